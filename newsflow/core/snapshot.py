"""One versioned snapshot format for every stateful step of the dataflow.

A snapshot is a dict ``{"format": "newsflow-state", "step": ..., "version": N, "state": {...}}``
whose ``state`` holds named fields (never positional tuples), so a field can be added without
breaking resume: :func:`restore` returns the fields and the step fills in what is missing. A
snapshot of another format or of a newer version is refused with a clear message instead of
being mis-read.

With recovery on, the snapshot is pickled at once (Bytewax pickles later, and the live state
keeps mutating after ``snapshot()`` returns), and the pickle is compressed with Zstandard at
level 1 (:data:`ZSTD_LEVEL`): the recovery store writes every touched key's snapshot each epoch,
and a digest window's entries or a story shard's records pickle to text-heavy bytes that zstd
level 1 halves (2.2x over the snapshots of a 20k-row UCI replay, for 0.5 s of CPU where zlib
level 1 took 2.4 s for 2.15x; ``bench/state_bytes.py`` reports both sizes). :func:`restore`
reads a compressed snapshot and a plain pickle (a store written before compression) alike.
"""

from __future__ import annotations

import pickle
import threading
from typing import Any

import zstandard

FORMAT = "newsflow-state"
#: bump when a step's fields change meaning or a pickled class moves (adding a field does not
#: need a bump); 7: the digest steps' drafts and feeder entries are classes of
#: ``newsflow.digest.trends`` and ``newsflow.flows.digest_windows``
VERSION = 7
#: the oldest version this release resumes from: only the current layout is read; a recovery
#: directory of an earlier release is refused with one line saying to start from a new directory
#: and replay the input (a replay rebuilds every step's state from ``feeds.raw``)
MIN_VERSION = VERSION

#: Zstandard level of a frozen snapshot: level 1 compresses a pickle at several hundred MB/s
ZSTD_LEVEL = 1
#: how every compressed snapshot starts (a zstd frame); a pickle starts with ``0x80``
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_codecs = threading.local()  # (compressor, decompressor) per thread: zstandard's are not thread-safe

#: what a step's ``snapshot()`` returns and its builder gets back: the dict, or its pickle
Snapshot = bytes | dict[str, Any]


class SnapshotFormatError(RuntimeError):
    """A recovery snapshot this version of newsflow cannot resume from."""


def _codec() -> tuple[zstandard.ZstdCompressor, zstandard.ZstdDecompressor]:
    c = getattr(_codecs, "pair", None)
    if c is None:
        # the frame records its content size: a reader (bench/state_bytes.py) gets the pickled
        # size without decompressing
        c = _codecs.pair = (zstandard.ZstdCompressor(level=ZSTD_LEVEL, write_content_size=True),
                            zstandard.ZstdDecompressor())
    return c


def make_snapshot(step: str, fields: dict[str, Any], *, freeze: bool) -> Snapshot:
    """The step's snapshot: with ``freeze`` (recovery on) pickled and compressed now, else the
    dict itself (Bytewax drops it without recovery)."""
    snap = {"format": FORMAT, "step": step, "version": VERSION, "state": fields}
    if not freeze:
        return snap
    return frozen(snap)


def frozen(obj: Any) -> bytes:
    """``obj`` pickled and compressed, as a frozen snapshot is (:func:`thaw` reads it): also a
    part of a state that does not change once written (a full chunk of a digest window's
    entries), frozen once and carried by every later snapshot as bytes."""
    return _codec()[0].compress(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))


def thaw(blob: bytes | bytearray) -> Any:
    """A frozen snapshot's dict: compressed by :func:`make_snapshot`, or a plain pickle."""
    if blob[:4] == ZSTD_MAGIC:
        blob = _codec()[1].decompress(blob)
    return pickle.loads(blob)


def pickled_size(blob: bytes | bytearray) -> int:
    """The size of a frozen snapshot's pickle (before compression)."""
    if blob[:4] == ZSTD_MAGIC:
        return int(zstandard.frame_content_size(blob))
    return len(blob)


def restore(step: str, resume: object, *, min_version: int = MIN_VERSION) -> dict[str, Any]:
    """The named fields of a snapshot made by :func:`make_snapshot` for ``step`` (of version
    ``min_version`` or later).

    >>> restore("dedup", make_snapshot("dedup", {"n": 1}, freeze=True))
    {'n': 1}
    >>> try:
    ...     restore("dedup", (1, 2))  # an older release's positional tuple
    ... except SnapshotFormatError as e:
    ...     print(str(e)[:60])
    step 'dedup': the recovery snapshot is not in the newsflow-s
    """
    try:
        snap = thaw(resume) if isinstance(resume, bytes | bytearray) else resume
    except (AttributeError, ImportError) as e:  # a class this release no longer has there
        msg = (f"step {step!r}: the recovery snapshot names a class this release does not have ({e}): "
               "it is from another release; resume is refused: start from a new recovery directory "
               "and replay the input")
        raise SnapshotFormatError(msg) from e
    if not isinstance(snap, dict) or snap.get("format") != FORMAT:
        msg = (
            f"step {step!r}: the recovery snapshot is not in the {FORMAT} format (an older "
            "release's positional state); resume is refused: start from a new recovery directory "
            "and replay the input"
        )
        raise SnapshotFormatError(msg)
    if snap.get("step") != step:
        msg = f"step {step!r}: the recovery snapshot belongs to step {snap.get('step')!r}"
        raise SnapshotFormatError(msg)
    if int(snap.get("version", 0)) < min_version:
        msg = (
            f"step {step!r}: the recovery snapshot has version {snap.get('version')}, from an earlier "
            f"release whose state layout differs (this release: {VERSION}); resume is refused: start "
            "from a new recovery directory and replay the input"
        )
        raise SnapshotFormatError(msg)
    if int(snap.get("version", 0)) > VERSION:
        msg = (
            f"step {step!r}: the recovery snapshot has version {snap['version']}, newer than this "
            f"release's {VERSION}; upgrade newsflow to resume from it"
        )
        raise SnapshotFormatError(msg)
    return dict(snap["state"])
