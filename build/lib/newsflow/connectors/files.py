"""File connectors for the embedded default (no Kafka): raw-payload archives in, JSONL out.

Archive format: one or more ``*.jsonl`` / ``*.jsonl.gz`` files of ``feeds.raw`` envelopes (the
exact Kafka message values), read in file-name order as ONE ordered partition, so a replay is
deterministic with any number of workers. Items are ``(seq, bytes)`` with ``seq`` =
``"0000:<line number>"``; the resume state is the number of lines already emitted.
"""

from __future__ import annotations

import gzip
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from bytewax.inputs import FixedPartitionedSource, StatefulSourcePartition
from bytewax.outputs import FixedPartitionedSink, StatefulSinkPartition

from newsflow.model.records import RawPayload
from newsflow.wire.codec import encode_raw

ARCHIVE_PARTITION = "0000"


def archive_files(path: str | os.PathLike[str]) -> list[Path]:
    p = Path(path)
    if p.is_file():
        return [p]
    files = sorted(f for f in p.rglob("*") if f.is_file() and f.name.endswith((".jsonl", ".jsonl.gz")))
    if not files:
        msg = f"no *.jsonl or *.jsonl.gz raw-payload files under {p}"
        raise FileNotFoundError(msg)
    return files


def _open(path: Path) -> IO[bytes]:
    return gzip.open(path, "rb") if path.name.endswith(".gz") else path.open("rb")


def iter_archive(path: str | os.PathLike[str]) -> Iterator[bytes]:
    """Every non-blank line of the archive, in order (the bytes of one envelope each)."""
    for f in archive_files(path):
        with _open(f) as fh:
            for line in fh:
                line = line.rstrip(b"\r\n")
                if line.strip():
                    yield line


def write_archive(payloads: list[RawPayload] | Iterator[RawPayload], path: str | os.PathLike[str]) -> int:
    """Write envelopes as a JSONL (optionally .gz) archive; returns the count."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with (gzip.open(p, "wb", compresslevel=5) if p.name.endswith(".gz") else p.open("wb")) as fh:
        for payload in payloads:
            fh.write(encode_raw(payload)[1] + b"\n")
            n += 1
    return n


class _ArchivePartition(StatefulSourcePartition[tuple[str, bytes], int]):
    def __init__(self, path: Path, resume: int | None, batch_size: int) -> None:
        self._it = iter_archive(path)
        self._pos = 0
        self._batch = batch_size
        for _ in range(resume or 0):
            next(self._it, None)
            self._pos += 1

    def next_batch(self) -> list[tuple[str, bytes]]:
        out: list[tuple[str, bytes]] = []
        for line in self._it:
            out.append((f"{ARCHIVE_PARTITION}:{self._pos:012d}", line))
            self._pos += 1
            if len(out) >= self._batch:
                return out
        if not out:
            raise StopIteration
        return out

    def snapshot(self) -> int:
        return self._pos


class RawArchiveSource(FixedPartitionedSource[tuple[str, bytes], int]):
    """Reads a raw-payload archive (file or directory) as one ordered partition."""

    def __init__(self, path: str | os.PathLike[str], batch_size: int = 256) -> None:
        self.path = Path(path)
        archive_files(self.path)  # fail early with a clear message
        self.batch_size = batch_size

    def list_parts(self) -> list[str]:
        return [ARCHIVE_PARTITION]

    def build_part(self, step_id: str, for_part: str, resume_state: int | None) -> _ArchivePartition:
        return _ArchivePartition(self.path, resume_state, self.batch_size)


class _TopicFilePartition(StatefulSinkPartition[bytes, int]):
    def __init__(self, path: Path, resume: int | None) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = path.open("ab" if resume else "wb")
        if resume is not None:  # exactly-once on resume: drop what was written after the snapshot
            self._fh.truncate(resume)
            self._fh.seek(resume)

    def write_batch(self, items: list[bytes]) -> None:
        self._fh.write(b"\n".join(items) + b"\n")
        self._fh.flush()

    def snapshot(self) -> int:
        return self._fh.tell()

    def close(self) -> None:
        self._fh.close()


class JsonlTopicSink(FixedPartitionedSink[bytes, int]):
    """Writes each topic to ``<out_dir>/<topic>.jsonl``; items are ``(topic, value_bytes)``."""

    def __init__(self, out_dir: str | os.PathLike[str], topics: list[str]) -> None:
        self.out_dir = Path(out_dir)
        self.topics = sorted(topics)

    def list_parts(self) -> list[str]:
        return list(self.topics)

    def part_fn(self, item_key: str) -> int:
        return self.topics.index(item_key)

    def build_part(self, step_id: str, for_part: str, resume_state: int | None) -> _TopicFilePartition:
        return _TopicFilePartition(self.out_dir / f"{for_part}.jsonl", resume_state)


def resolve_body_ref(payload: RawPayload, max_bytes: int = 64 * 1024 * 1024) -> RawPayload:
    """A payload whose body was stored aside by the poller (``body_ref`` = ``file://`` URI)
    gets its bytes back; other schemes are left alone (the payload then counts as empty)."""
    from dataclasses import replace
    from urllib.parse import unquote, urlsplit

    ref = payload.body_ref
    if payload.body is not None or not ref or not ref.startswith("file://"):
        return payload
    path = Path(unquote(urlsplit(ref).path))
    with path.open("rb") as fh:
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:
        msg = f"body_ref {ref} is larger than {max_bytes} bytes"
        raise ValueError(msg)
    return replace(payload, body=data)
