"""Stable hashes. Never Python's ``hash()``: it is salted per process, so routing and ids
would differ between runs and between workers."""

from __future__ import annotations

import hashlib

import xxhash


def stable_id(*parts: str, size: int = 8) -> str:
    """Hex blake2b digest of the parts (NUL-separated): stable ids for records, the same in
    every process and run (never Python's salted ``hash()``). The separator keeps
    ``("a", "b")`` and ``("ab",)`` apart.

    >>> stable_id("a", "b")
    'ffc151170352baa3'
    >>> stable_id("ab")
    '0e52b5f187de1088'
    """
    h = hashlib.blake2b(digest_size=size)
    for i, p in enumerate(parts):
        if i:
            h.update(b"\x00")
        h.update(p.encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def bytes_id(data: bytes, size: int = 8) -> str:
    return hashlib.blake2b(data, digest_size=size).hexdigest()


def shard_of(key: str, shards: int) -> int:
    """Stable shard number of a key (xxh3, fast), the same in every process and run.

    >>> shard_of("bbc.co.uk", 64)
    52
    """
    return xxhash.xxh3_64_intdigest(key.encode("utf-8", "surrogatepass")) % shards


def fingerprint(data: bytes) -> bytes:
    """128-bit xxh3 digest: "are these bytes the same as last time?" (re-poll memory)."""
    return xxhash.xxh3_128_digest(data)
