"""Which worker runs a key, and key names chosen so that the flow's few heavy keys spread.

Bytewax 0.21.1 sends a keyed item to worker ``SipHash-1-3(key's UTF-8 bytes + 0xff) % workers``
(Rust's ``DefaultHasher`` on a ``String``), and it reads input partition ``i`` of the sorted
partition names on worker ``i % workers``; both are checked against real worker threads and
processes in ``tests/test_runtime_contract.py``. The flow has few keys of its own (input partitions, 8 dedup shards,
8 story shards, one key per digest type), so hashing alone placed them badly: on two workers
all five digest keys and three of the four UCI categories' story shards sat on worker 0, and
every input partition was parsed on the other worker than the one that read it (each raw
payload crossed processes).

:func:`placed_key` names a key for a *slot*: ``name`` itself, or ``name@n`` with the smallest
``n`` such that the key runs on worker ``slot % W`` for every worker count ``W`` up to
:data:`PLACED_UP_TO`. With more workers the key still runs somewhere (hash placement). Keys
are stable strings: the same in every process, run and machine.

With placement off (``flow.placement = false``; ``on=False`` below) every key is its plain
``name``: the records are the same bytes, only the spread of the keys over workers differs. Bytewax
keeps each key's recovery state under its name: changing the setting needs a new recovery
directory.
"""

from __future__ import annotations

from functools import lru_cache

#: the worker counts for which placed keys land on ``slot % W`` exactly
PLACED_UP_TO = 6

_M = (1 << 64) - 1


def _rotl(x: int, b: int) -> int:
    return ((x << b) | (x >> (64 - b))) & _M


def _sipround(v0: int, v1: int, v2: int, v3: int) -> tuple[int, int, int, int]:
    v0 = (v0 + v1) & _M
    v1 = _rotl(v1, 13) ^ v0
    v0 = _rotl(v0, 32)
    v2 = (v2 + v3) & _M
    v3 = _rotl(v3, 16) ^ v2
    v0 = (v0 + v3) & _M
    v3 = _rotl(v3, 21) ^ v0
    v2 = (v2 + v1) & _M
    v1 = _rotl(v1, 17) ^ v2
    v2 = _rotl(v2, 32)
    return v0, v1, v2, v3


def siphash13(data: bytes, k0: int = 0, k1: int = 0) -> int:
    """SipHash-1-3 with keys ``k0``, ``k1`` (Rust's ``DefaultHasher`` uses 0, 0).

    >>> hex(siphash13(b""))
    '0xd1fba762150c532c'
    """
    v0 = k0 ^ 0x736F6D6570736575
    v1 = k1 ^ 0x646F72616E646F6D
    v2 = k0 ^ 0x6C7967656E657261
    v3 = k1 ^ 0x7465646279746573
    n = len(data)
    end = n - n % 8
    words = [int.from_bytes(data[i:i + 8], "little") for i in range(0, end, 8)]
    words.append(((n & 0xFF) << 56) | int.from_bytes(data[end:], "little"))
    for m in words:
        v0, v1, v2, v3 = _sipround(v0, v1, v2, v3 ^ m)
        v0 ^= m
    v2 ^= 0xFF
    for _ in range(3):
        v0, v1, v2, v3 = _sipround(v0, v1, v2, v3)
    return v0 ^ v1 ^ v2 ^ v3


def worker_of(key: str, workers: int) -> int:
    """The worker (0-based, of ``workers``) that Bytewax 0.21.1 runs ``key``'s state on.

    >>> [worker_of(k, 2) for k in ("dd000", "dd001", "dd002")]
    [1, 1, 0]
    """
    return siphash13(key.encode("utf-8") + b"\xff") % workers


@lru_cache(maxsize=4096)
def placed_key(name: str, slot: int, *, on: bool) -> str:
    """``name`` or ``name@n``: a key that runs on worker ``slot % W`` for ``W`` in
    ``1..PLACED_UP_TO`` (the first ``n`` that does; ``name`` itself if it does); ``name`` when
    placement is off.

    >>> placed_key("dd000", 0, on=True), placed_key("dd003", 3, on=True), placed_key("dd000", 0, on=False)
    ('dd000@53', 'dd003@10', 'dd000')
    >>> all(worker_of(placed_key("x", s, on=True), w) == s % w for s in range(8) for w in range(1, 7))
    True
    """
    if not on:
        return name
    want = [(w, slot % w) for w in range(2, PLACED_UP_TO + 1)]
    key, n = name, 0
    while any(worker_of(key, w) != s for w, s in want):
        key, n = f"{name}@{n}", n + 1
    return key


def input_keys(names: dict[str, str], *, on: bool) -> dict[str, str]:
    """Input partition -> the key of the step that reads it, from partition -> key name: Bytewax
    reads the ``i``-th of the sorted partitions on worker ``i % W``, and its key runs there too
    (no input item crosses processes to reach its first step); the names when placement is off.

    >>> input_keys({"0001": "p0001", "0000": "p0000"}, on=True)
    {'0001': 'p0001@35', '0000': 'p0000@106'}
    >>> input_keys({"0001": "p0001"}, on=False)
    {'0001': 'p0001'}
    """
    order = {p: i for i, p in enumerate(sorted(names))}
    return {p: placed_key(name, order[p], on=on) for p, name in names.items()}


def key_name(key: str) -> str:
    """The name a placed key was made from (``"st02@17"`` -> ``"st02"``).

    >>> key_name("st02@17"), key_name("st02")
    ('st02', 'st02')
    """
    return key.split("@", 1)[0]
