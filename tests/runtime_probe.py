"""A Bytewax flow that reports where things run and what was pickled
(``tests/test_runtime_contract.py``).

Every input partition of ``PROBE_PARTS`` sends one item saying which thread read it, to its
``input_keys`` key (``PROBE_PLACEMENT``: placed or plain names); the first partition also sends,
to every key of ``PROBE_KEYS``, a bare :class:`Probe`, a :class:`Probe` inside a
:class:`~newsflow.runtime.pickling.Batch`, and one :class:`Probe` in one
:class:`~newsflow.runtime.pickling.Shared` (the same object to every key). A stateful step says which thread ran each key, and
the sink which worker that thread is. A :class:`Probe` logs every pickling of itself (its
``__reduce__``) and every unpickling, with the thread. Lines go to ``PROBE_OUT/<pid>.txt``;
a thread is ``<pid>.<native thread id>``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import bytewax.operators as op
from bytewax.dataflow import Dataflow
from bytewax.inputs import FixedPartitionedSource, StatefulSourcePartition
from bytewax.outputs import DynamicSink, StatelessSinkPartition

from newsflow.runtime.pickling import Batch, Shared
from newsflow.runtime.placement import input_keys

PARTS = [p for p in os.environ.get("PROBE_PARTS", "").split(",") if p]
KEYS = [k for k in os.environ.get("PROBE_KEYS", "").split(",") if k]
OUT = Path(os.environ.get("PROBE_OUT", "."))
PKEYS = input_keys({p: "p" + p for p in PARTS}, on=os.environ.get("PROBE_PLACEMENT", "1") == "1")


def here() -> str:
    return f"{os.getpid()}.{threading.get_native_id()}"


def log(*words: object) -> None:
    with (OUT / f"{os.getpid()}.txt").open("a") as f:
        f.write(" ".join(map(str, words)) + "\n")


class Probe:
    """An item that logs ``pickle <name> <thread>`` when pickled, ``unpickle`` when rebuilt."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __reduce__(self) -> tuple[Callable[[str], Probe], tuple[str]]:
        log("pickle", self.name, here())
        return _unpickled, (self.name,)


def _unpickled(name: str) -> Probe:
    log("unpickle", name, here())
    return Probe(name)


class _Part(StatefulSourcePartition[Any, None]):
    def __init__(self, name: str) -> None:
        self.name, self.done = name, False

    def next_batch(self) -> list[Any]:
        if self.done:
            raise StopIteration
        self.done = True
        items: list[Any] = [(PKEYS[self.name], ("read", self.name, here()))]
        if self.name == sorted(PARTS)[0]:
            shared = Shared(Probe("shared"))
            for k in KEYS:
                items += [(k, ("bare", k, Probe(f"bare:{k}"))), (k, ("batch", k, Batch((Probe(f"batch:{k}"),)))),
                          (k, ("shared", k, shared))]
        return items

    def snapshot(self) -> None:
        return None


class _Source(FixedPartitionedSource[Any, None]):
    def list_parts(self) -> list[str]:
        return PARTS

    def build_part(self, step_id: str, for_part: str, resume_state: None) -> _Part:
        return _Part(for_part)


class _SinkPart(StatelessSinkPartition[str]):
    def __init__(self, worker: int) -> None:
        self.worker = worker

    def write_batch(self, items: list[str]) -> None:
        for line in items:
            log(line, "on", self.worker, here())


class _Sink(DynamicSink[str]):
    def build(self, step_id: str, worker_index: int, worker_count: int) -> _SinkPart:
        return _SinkPart(worker_index)


def _where(state: None, item: tuple[str, str, Any]) -> tuple[None, str]:
    kind, name, what = item
    return None, f"ran {kind} {name} {what if kind == 'read' else '-'} {here()}"


flow = Dataflow("runtime_probe")
src = op.input("in", flow, _Source())
op.output("out", op.map("line", op.stateful_map("where", src, _where), lambda kv: kv[1]), _Sink())
