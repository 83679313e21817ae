"""One poller per state directory (its lock), and ``newsflow poll --now`` requests."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

LOCK_FILE = "poller.lock"
REQUESTS_DIR = "requests"


class StateDirLocked(RuntimeError):
    """Another poller holds the state directory's lock."""

    def __init__(self, state_dir: str | Path, pid: int | str) -> None:
        super().__init__(f"another poller (pid {pid}) is using the state directory {state_dir}; stop it "
                         "first, or give this one its own --state-dir")


def state_dir_owner(state_dir: str | Path) -> int | None:
    """The pid of the poller holding ``state_dir``'s lock (0 if it wrote none yet); None: free."""
    import fcntl

    path = Path(state_dir) / LOCK_FILE
    if not path.exists():
        return None
    with path.open("a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.seek(0)
            text = f.read().strip()
            return int(text) if text.isdigit() else 0
        fcntl.flock(f, fcntl.LOCK_UN)
        return None


@contextlib.contextmanager
def locked_state_dir(state_dir: str | Path) -> Iterator[None]:
    """Hold ``state_dir``'s lock (``flock`` on ``poller.lock``, released by the kernel when the
    process ends, however it ends): two pollers on one state directory would each snapshot
    their own epochs into the same recovery files and leave them unusable."""
    import fcntl

    d = Path(state_dir)
    d.mkdir(parents=True, exist_ok=True)
    f = (d / LOCK_FILE).open("a+")
    try:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.seek(0)
            raise StateDirLocked(d, f.read().strip() or "?") from None
        f.seek(0)
        f.truncate()
        f.write(f"{os.getpid()}\n")
        f.flush()
        yield
    finally:
        f.close()


def request_poll_now(state_dir: str | Path, feed_id: str) -> Path:
    """Ask the poller running on ``state_dir`` to poll ``feed_id`` now (a request file it picks
    up within a second); returns the file."""
    d = Path(state_dir) / REQUESTS_DIR
    d.mkdir(parents=True, exist_ok=True)
    name = f"{time.time_ns()}-{os.getpid()}"
    tmp = d / f".{name}.tmp"
    tmp.write_text(feed_id, encoding="utf-8")
    final = d / f"{name}.now"
    tmp.replace(final)  # atomic: the poller never reads half a request
    return final


class NowRequests:
    """The ``--now`` requests of one requests directory, read at most every ``every_s``;
    each partition takes the ones for its own feeds (a process-wide instance per directory)."""

    _by_dir: ClassVar[dict[str, NowRequests]] = {}
    _lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, directory: str, every_s: float = 0.5) -> None:
        self.directory = Path(directory)
        self.every_s = every_s
        self.pending: set[str] = set()
        self._next = 0.0

    @classmethod
    def of(cls, directory: str) -> NowRequests:
        with cls._lock:
            inst = cls._by_dir.get(directory)
            if inst is None:
                inst = cls._by_dir[directory] = cls(directory)
            return inst

    def take(self, feed_ids: Mapping[str, Any]) -> list[str]:
        """The requested feeds among ``feed_ids`` (each handed out once)."""
        with self._lock:
            mono = time.monotonic()
            if mono >= self._next:
                self._next = mono + self.every_s
                for path in sorted(self.directory.glob("*.now")):
                    with contextlib.suppress(OSError):
                        self.pending.add(path.read_text(encoding="utf-8").strip())
                        path.unlink()
            mine = sorted(f for f in self.pending if f in feed_ids)
            self.pending.difference_update(mine)
            return mine


__all__ = ["LOCK_FILE", "REQUESTS_DIR", "NowRequests", "StateDirLocked", "locked_state_dir", "request_poll_now",
           "state_dir_owner"]
