"""A file replay on several local processes: ``--processes N`` of ``newsflow demo`` and
``newsflow replay``.

Bytewax runs one dataflow on several processes as one cluster (``cluster_main`` with every
process's address and its own index). A Python process runs one thread at a time, so more worker
*threads* give a replay no speed; more processes do (``bench/bench_throughput.py``). This
starts ``N`` children of this module on free loopback ports, each building the same file flow
and running its share of the keys, and waits for them. The outputs are the bytes one process
writes (the file sink orders each file when the replay ends). Each child writes its counters
(payloads read, articles emitted) to a small JSON file twice a second and when it ends, so the
parent shows progress and totals. A child's output goes to a log file; when a child fails, the
others are stopped, the end of its log is written to stderr and the run fails.

    python -m newsflow.cli.processes RUN.pickle INDEX ADDRESSES COUNTERS.json   (one child)
"""

from __future__ import annotations

import os
import pickle
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson


@dataclass(frozen=True, slots=True)
class FileRun:
    """What every process of a file replay builds its flow from (pickled for the children;
    the settings as their JSON, which validates back to the same settings)."""

    input_path: str
    out_dir: str
    settings_json: bytes
    workers: int = 1
    interactions_path: str | None = None
    profiles: Any = None
    #: an initialised recovery directory the processes share (``--recovery-dir``): each snapshots
    #: its keys' state and its input partitions' offsets there, and a rerun resumes from them
    recovery_dir: str | None = None


class ProcessFailed(RuntimeError):
    """A child process of the replay exited with an error."""


def free_ports(n: int) -> list[int]:
    """``n`` distinct TCP ports free on 127.0.0.1 now (held together while chosen)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _read_counts(path: Path) -> tuple[int, int]:
    try:
        d = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return 0, 0
    return int(d.get("payloads", 0)), int(d.get("articles", 0))


def run_processes(run: FileRun, processes: int,
                  progress: Callable[[int, int], None] | None = None, poll_s: float = 0.25) -> tuple[int, int]:
    """Run ``run`` on ``processes`` local processes; returns (payloads read, articles emitted)
    summed over them. ``progress`` is called with the running sums while they run."""
    with tempfile.TemporaryDirectory(prefix="newsflow-procs-") as tmp:
        spec = Path(tmp) / "run.pickle"
        spec.write_bytes(pickle.dumps(run, protocol=5))
        addresses = ";".join(f"127.0.0.1:{p}" for p in free_ports(processes))
        counters = [Path(tmp) / f"proc-{i}.json" for i in range(processes)]
        logs = [Path(tmp) / f"proc-{i}.log" for i in range(processes)]
        children = []
        for i in range(processes):  # (their output to a log each: shown when one fails)
            with logs[i].open("wb") as log:
                children.append(subprocess.Popen(
                    [sys.executable, "-m", "newsflow.cli.processes", str(spec), str(i), addresses, str(counters[i])],
                    stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))
        failed: tuple[int, int] | None = None
        try:
            while True:
                codes = [c.poll() for c in children]
                failed = next(((i, rc) for i, rc in enumerate(codes) if rc not in (None, 0)), None)
                if failed is not None or all(rc == 0 for rc in codes):
                    break
                if progress is not None:
                    progress(*_sums(counters))
                time.sleep(poll_s)
        finally:
            for c in children:  # a failed child leaves the others waiting for it: stop them
                if c.poll() is None:
                    c.kill()
                c.wait()
        totals = _sums(counters)
        if progress is not None:
            progress(*totals)
        if failed is not None:
            i, rc = failed
            tail = logs[i].read_text(encoding="utf-8", errors="replace").splitlines()[-40:]
            sys.stderr.write("\n".join(tail) + "\n")
            msg = f"process {i} of {processes} exited with status {rc} (its output is above)"
            raise ProcessFailed(msg)
    return totals


def _sums(counters: list[Path]) -> tuple[int, int]:
    counts = [_read_counts(p) for p in counters]
    return sum(p for p, _ in counts), sum(a for _, a in counts)


def _write_counts(path: Path) -> None:
    from newsflow.flows import metrics

    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(orjson.dumps({"payloads": int(metrics.total(metrics.PAYLOADS)),
                                  "articles": int(metrics.total(metrics.ARTICLES))}))
    os.replace(tmp, path)


def _meet(ready: Path, index: int, timeout_s: float = 60.0) -> None:
    """Process 0 says it is about to listen; the others wait for that before connecting to it.
    (A process that finds no listener yet waits a whole second before it tries again, and they
    all import the flow's modules at the same time, for about 1.5 s.)"""
    if index == 0:
        ready.touch()
        return
    end = time.monotonic() + timeout_s
    while not ready.exists() and time.monotonic() < end:
        time.sleep(0.01)
    time.sleep(0.05)  # (its listener is bound a few ms after the file)


def child_main(argv: list[str]) -> int:
    """One process of the cluster: ``RUN.pickle INDEX ADDRESSES COUNTERS.json``."""
    from datetime import timedelta

    from bytewax.testing import cluster_main

    from newsflow.config import Settings
    from newsflow.flows.pipeline import file_flow

    spec, index, addresses, counts = argv
    run: FileRun = pickle.loads(Path(spec).read_bytes())
    settings = Settings.model_validate_json(run.settings_json)
    flow = file_flow(run.input_path, run.out_dir, settings, interactions_path=run.interactions_path,
                     profiles=run.profiles, recovery=run.recovery_dir is not None, inflight_dir=run.recovery_dir)
    recovery = None
    if run.recovery_dir is not None:
        from bytewax.recovery import RecoveryConfig

        recovery = RecoveryConfig(run.recovery_dir)
    path = Path(counts)
    stop = threading.Event()

    def report() -> None:
        while not stop.wait(0.5):
            _write_counts(path)

    reporter = threading.Thread(target=report, name="counters", daemon=True)
    reporter.start()
    _meet(path.parent / "ready-0", int(index))
    try:
        cluster_main(flow, addresses.split(";"), int(index), worker_count_per_proc=run.workers,
                     epoch_interval=timedelta(seconds=settings.flow.epoch_seconds), recovery_config=recovery)
    finally:
        stop.set()
        reporter.join()
        _write_counts(path)
    return 0


if __name__ == "__main__":
    sys.exit(child_main(sys.argv[1:]))
