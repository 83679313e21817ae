"""Poison messages: which raw message each input partition is working on, kept on disk beside
the recovery snapshots, so a message that killed the process (out of memory, a crash in C code,
kill -9 while it ran) is recognised when the run resumes instead of killing it again.

Python exceptions never need this (every step is isolated: ``newsflow.flows.isolation``); this
is for the deaths no ``except`` sees. One small file per input partition,
``<recovery dir>/inflight/<partition>.json``::

    {"pid": 4242, "current": "0000:000000000042", "suspects": {"0000:000000000017": 1}}

``current`` is written before a message is parsed, by the process ``pid``. When a process starts and finds a
``current``, the previous process died while parsing it: that message becomes a *suspect* with
one more crash. A suspect that has killed ``poison_after`` processes is not parsed again: the
parse step turns it into a ``poison_message`` dead letter. A suspect parsed without a crash is
forgiven. Each partition's file stays open and a write overwrites it in place (one ``pwrite``
of the JSON record, padded with spaces to the longest record written before, so no old bytes
remain): a replaced file per write (write, then rename) cost 536 us a message on the 2-core VM,
27 s of a 100k-row UCI replay with recovery; in place it costs a few microseconds. The page cache
keeps a write when the process is killed; a file torn by a machine crash reads as empty.
"""

from __future__ import annotations

import os
import weakref
from pathlib import Path

import orjson


class InflightJournal:
    """The journal of one input partition (``partition`` = the seq prefix of its messages)."""

    def __init__(self, directory: str | os.PathLike[str], partition: str) -> None:
        self.path = Path(directory) / "inflight" / f"{partition}.json"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            st = orjson.loads(self.path.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            st = {}
        if not isinstance(st, dict):
            st = {}
        self.suspects: dict[str, int] = {str(k): int(v) for k, v in (st.get("suspects") or {}).items()}
        died_on = st.get("current")
        if died_on:  # the previous process died while parsing this message
            self.suspects[died_on] = self.suspects.get(died_on, 0) + 1
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        weakref.finalize(self, os.close, self._fd)
        #: the file's length: every write covers it (shorter records are padded with spaces)
        self._size = os.fstat(self._fd).st_size
        self._write(None)

    def crashes(self, seq: str) -> int:
        """How many processes died while parsing ``seq``."""
        return self.suspects.get(seq, 0)

    def begin(self, seq: str) -> None:
        self._write(seq)

    def done(self, seq: str) -> None:
        """``seq`` was handled (parsed, or dead-lettered as poison): it is no longer a suspect."""
        self.suspects.pop(seq, None)
        self._write(None)

    def _write(self, current: str | None) -> None:
        data = orjson.dumps({"pid": os.getpid(), "current": current, "suspects": self.suspects})
        if len(data) < self._size:
            data = data.ljust(self._size)  # (JSON allows the trailing spaces)
        os.pwrite(self._fd, data, 0)
        self._size = len(data)


class InflightJournals:
    """Journals of every partition a worker parses, opened on first use."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self._open: dict[str, InflightJournal] = {}

    def of(self, seq: str) -> InflightJournal:
        part = seq.split(":", 1)[0]
        j = self._open.get(part)
        if j is None:
            j = self._open[part] = InflightJournal(self.directory, part)
        return j
