"""A Bytewax flow that reports where things run (``tests/test_placement.py``): every input
partition says which process read it, and every key of ``PROBE_KEYS`` and every partition's
``input_keys`` key says which process ran its state. Lines go to ``PROBE_OUT/<pid>.txt``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import bytewax.operators as op
from bytewax.dataflow import Dataflow
from bytewax.inputs import FixedPartitionedSource, StatefulSourcePartition
from bytewax.outputs import DynamicSink, StatelessSinkPartition

from newsflow.core.placement import input_keys

PARTS = os.environ.get("PROBE_PARTS", "").split(",")
KEYS = [k for k in os.environ.get("PROBE_KEYS", "").split(",") if k]
OUT = Path(os.environ.get("PROBE_OUT", "."))
PKEYS = input_keys({p: "p" + p for p in PARTS})


class _Part(StatefulSourcePartition[Any, None]):
    def __init__(self, name: str) -> None:
        self.name, self.done = name, False

    def next_batch(self) -> list[Any]:
        if self.done:
            raise StopIteration
        self.done = True
        first = self.name == sorted(PARTS)[0]  # one partition also sends the probe keys
        return [("read", self.name, os.getpid())] + ([("key", k, 0) for k in KEYS] if first else [])

    def snapshot(self) -> None:
        return None


class _Source(FixedPartitionedSource[Any, None]):
    def list_parts(self) -> list[str]:
        return PARTS

    def build_part(self, step_id: str, for_part: str, resume_state: None) -> _Part:
        return _Part(for_part)


class _SinkPart(StatelessSinkPartition[str]):
    def write_batch(self, items: list[str]) -> None:
        with (OUT / f"{os.getpid()}.txt").open("a") as f:
            f.writelines(line + "\n" for line in items)


class _Sink(DynamicSink[str]):
    def build(self, step_id: str, worker_index: int, worker_count: int) -> _SinkPart:
        return _SinkPart()


def _key(item: Any) -> tuple[str, Any]:
    kind, name, _ = item
    return (PKEYS[name] if kind == "read" else name), item


def _where(state: None, item: Any) -> tuple[None, str]:
    kind, name, pid = item
    here = os.getpid()
    return None, f"read {name} {pid} {here}" if kind == "read" else f"key {name} {here}"


flow = Dataflow("placement_probe")
keyed = op.map("key", op.input("in", flow, _Source()), _key)
op.output("out", op.map("line", op.stateful_map("where", keyed, _where), lambda kv: kv[1]), _Sink())
