"""Cheap pickling of what crosses processes: Bytewax 0.21.1 pickles every item that goes to a
key of another process (and every snapshot), and pays for each item, so the flow's messages
pickle as few bytes, as few times and as few items as it can.

* :func:`fast_pickle`: a frozen, slotted dataclass pickles as ``(class, field values)``.
  ``@dataclass(frozen=True, slots=True)`` pickles through the ``__getstate__``/``__setstate__``
  that :mod:`dataclasses` adds: both call :func:`dataclasses.fields` on every object and set
  each slot with ``object.__setattr__`` in a Python loop (with two processes on the 1,037 polls
  of the NPR/Ars/WGRZ archive, ~7 % of each worker's samples in a sampling profile). The
  ``__reduce__`` it adds sends the field values as one tuple, read by one C-level
  :func:`operator.attrgetter`, and rebuilds the object with its own constructor: a round trip
  of the real messages of an archive takes a third less time (1.47x,
  ``bench/bench_steps.py --pickle ARCHIVE``), and a 2-process run of that archive ~6 % less
  CPU (``bench/bench_steps.py ARCHIVE``). Old pickles (from snapshots written before) still
  load: the dataclass's ``__setstate__`` stays.
* :class:`Batch`: the messages one activation sends to one key, as one item, pickled once
  although Bytewax pickles each item twice.
* :class:`Shared`: one message sent to several keys, pickled once per sending process and
  unpickled once per receiving process.
* :func:`to_columns` / :func:`from_columns`: a state of many dataclass objects as columns.

What these rely on in Bytewax (items are pickled with :mod:`pickle`, twice per item that crosses
processes, never within a process) is checked against the installed Bytewax by
``tests/test_runtime_contract.py``.
"""

from __future__ import annotations

import dataclasses
import operator
import pickle
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from newsflow.core.hashing import fingerprint
from newsflow.core.memo import BoundedMemo

T = TypeVar("T")


def fast_pickle(cls: type[T]) -> type[T]:
    """Decorate a dataclass (after ``@dataclass``): pickled as ``(cls, field values)``.

    Every field must be a positional ``__init__`` argument and the constructor must not
    transform its arguments (no ``__post_init__``): unpickling calls it with the values the
    object holds. A frozen, slotted class also gets a faster constructor (:func:`_slot_init`):
    every message is built once where it is made and again where it is unpickled."""
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    if any(not f.init or f.kw_only for f in fields) or hasattr(cls, "__post_init__"):
        msg = f"{cls.__name__}: fast_pickle needs every field a positional __init__ argument and no __post_init__"
        raise TypeError(msg)
    names = tuple(f.name for f in fields)
    reduce: Callable[[Any], tuple[Any, tuple[Any, ...]]]
    if len(names) == 1:
        get_one = operator.attrgetter(names[0])

        def reduce(self: Any) -> tuple[Any, tuple[Any, ...]]:
            return (cls, (get_one(self),))
    else:
        get = operator.attrgetter(*names)

        def reduce(self: Any) -> tuple[Any, tuple[Any, ...]]:
            return (cls, get(self))

    cls.__reduce__ = reduce  # type: ignore[method-assign]
    if cls.__dataclass_params__.frozen and "__slots__" in cls.__dict__:  # type: ignore[attr-defined]
        DATACLASS_INITS[cls] = orig = cls.__init__
        cls.__init__ = init = _slot_init(cls, fields)  # type: ignore[method-assign]
        init.__annotations__ = dict(orig.__annotations__)
    return cls


#: the constructors :mod:`dataclasses` wrote for the classes whose ``__init__``
#: :func:`fast_pickle` replaced (the tests compare the two)
DATACLASS_INITS: dict[type, Callable[..., None]] = {}


class _Factory:
    """The default of a parameter whose field has a default factory (shown as dataclasses does)."""

    def __repr__(self) -> str:
        return "<factory>"


_FACTORY = _Factory()


def _slot_init(cls: type, fields: tuple[dataclasses.Field[Any], ...]) -> Callable[..., None]:
    """An ``__init__`` for a frozen, slotted dataclass that sets each slot through its member
    descriptor. The dataclass's own calls ``object.__setattr__(self, name, value)`` per field
    (a global, an attribute and a setattr by name): this one is 1.7x faster for 8 fields, with
    the same signature, defaults and default factories. Assigning to a field afterwards still
    raises ``FrozenInstanceError`` (``__setattr__`` stays the dataclass's)."""
    ns: dict[str, Any] = {"_FACTORY": _FACTORY}
    params: list[str] = []
    body: list[str] = []
    for i, f in enumerate(fields):
        ns[f"_set{i}"] = cls.__dict__[f.name].__set__
        param = f.name
        if f.default is not dataclasses.MISSING:
            ns[f"_dflt{i}"] = f.default
            param += f"=_dflt{i}"
        elif f.default_factory is not dataclasses.MISSING:
            ns[f"_fact{i}"] = f.default_factory
            param += "=_FACTORY"
            body.append(f"    if {f.name} is _FACTORY:\n        {f.name} = _fact{i}()\n")
        params.append(param)
        body.append(f"    _set{i}(self, {f.name})\n")
    src = f"def __init__({', '.join(['self', *params])}):\n" + "".join(body or ["    pass\n"])
    exec(src, ns)  # built from the class's own field names, as dataclasses does
    init: Callable[..., None] = ns["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    return init


#: per dataclass: its field names and a getter per field (:func:`to_columns`)
_COLUMNS: dict[type, tuple[tuple[str, ...], tuple[Callable[[Any], Any], ...]]] = {}


def _columns_of(cls: type) -> tuple[tuple[str, ...], tuple[Callable[[Any], Any], ...]]:
    got = _COLUMNS.get(cls)
    if got is None:
        names = tuple(f.name for f in dataclasses.fields(cls))
        got = _COLUMNS[cls] = (names, tuple(operator.attrgetter(n) for n in names))
    return got


def to_columns(table: dict[Any, Any], cls: type) -> tuple[list[Any], tuple[str, ...], list[list[Any]]]:
    """A dict of ``cls`` dataclass objects as ``(keys, field names, one list per field)``, in
    the dict's order: a state pickled every epoch (recovery) pickles thousands of such objects
    about twice as fast as columns than one object at a time. :func:`from_columns` reads it.

    >>> from newsflow.model.records import Sighting
    >>> cols = to_columns({"k": Sighting("f", "P", "u", "t", "a")}, Sighting)
    >>> cols[1], from_columns(cols, Sighting)["k"].publisher
    (('feed_id', 'publisher', 'url', 'fetched_at', 'article_id'), 'P')
    """
    names, getters = _columns_of(cls)
    vals = list(table.values())
    return list(table), names, [list(map(g, vals)) for g in getters]


def from_columns(cols: tuple[list[Any], Sequence[str], list[list[Any]]], cls: type[T]) -> dict[Any, T]:
    """The dict :func:`to_columns` wrote, in its order. Columns of fields the class no longer
    has are dropped; fields it has gained since get their defaults (by name)."""
    keys, names, columns = cols
    objs: Iterable[T]
    known = _columns_of(cls)[0]
    if tuple(names) == known:
        objs = map(cls, *columns)
    else:
        have = set(known)
        objs = (cls(**{n: v for n, v in zip(names, row, strict=True) if n in have})
                for row in zip(*columns, strict=True))
    return dict(zip(keys, objs, strict=True))


def set_slots(obj: Any, state: Any) -> None:
    """Restore a slotted object from the state pickle gave it before it had a ``__getstate__``
    (``(None, {slot: value})``, or the dict alone); names that are no slots any more are dropped."""
    slots = state[1] if isinstance(state, tuple) else state
    names = set(type(obj).__slots__)
    for k, v in slots.items():
        if k in names:
            object.__setattr__(obj, k, v)


class Shared:
    """One message sent to several keys (the digest types' steps): pickled at most once per
    process that sends it, unpickled at most once per process that receives it.

    Bytewax pickles an item once for *each key* it goes to on another process, and the other
    process unpickles a copy per key: a batch of digest entries for the five digest steps went
    over twice or three times with two processes, and the receiving process kept a copy of each
    entry per digest step. A :class:`Shared` caches its pickle on first use and is rebuilt, in
    the receiving process, from a per-process table of what arrived (by the pickle's 128-bit
    xxh3 digest): every step of that process gets the same object, as the steps of one process
    do when nothing crosses. Within a process nothing is pickled at all. The receiving steps
    take the message from :attr:`obj` and must not modify it (as before: a process's steps
    always shared it).
    """

    __slots__ = ("_blob", "obj")

    def __init__(self, obj: Any) -> None:
        self.obj = obj
        self._blob: tuple[bytes, bytes] | None = None

    def __reduce__(self) -> tuple[Callable[[bytes, bytes], Shared], tuple[bytes, bytes]]:
        if self._blob is None:
            data = pickle.dumps(self.obj, protocol=pickle.HIGHEST_PROTOCOL)
            self._blob = (fingerprint(data), data)
        return _shared_from, self._blob


#: what arrived as :class:`Shared` in this process, by digest. A digest entry goes to several
#: window keys, each in its own batch, so its copies arrive among every other entry a story
#: shard sent in the same activation: the table must hold a whole batch of them (with 512 slots,
#: the 46,000 entries of 100k UCI rows that crossed processes were unpickled 103,000 and 134,000
#: times). It grows to twice the largest batch of shared messages that arrived
#: (:func:`expect_shared`), up to :data:`RECEIVED_MAX`: a fixed 8,192 held entries nobody
#: needed on NPR (2 % more CPU, 11 MB more memory). A miss costs an unpickle, never a different
#: output.
_RECEIVED = BoundedMemo(512)
RECEIVED_MAX = 1 << 16


def expect_shared(n: int) -> None:
    """A batch of ``n`` :class:`Shared` messages is about to be unpickled in this process."""
    _RECEIVED.grow(min(2 * n, RECEIVED_MAX))


def _shared_from(digest: bytes, data: bytes) -> Shared:
    """Unpickles a :class:`Shared`: the object already received with this digest, or the
    data's."""
    return Shared(_RECEIVED.get(digest, lambda: pickle.loads(data)))


class Batch:
    """Messages for one key, in the order they were emitted, sent as one Bytewax item; the
    receiving step handles each as if it came alone (``newsflow.flows.isolation``).

    Pickled once however often it is asked: Bytewax 0.21.1 pickles every item that crosses
    processes twice (timely measures a message's encoded size, then encodes it; both call
    ``pickle.dumps``), so a batch keeps its pickle from the first call. Nothing is pickled
    for a key of the same process."""

    __slots__ = ("_blob", "_shared", "items")

    def __init__(self, items: tuple[Any, ...]) -> None:
        self.items = items
        self._blob: bytes | None = None
        self._shared = 0

    def __eq__(self, other: object) -> bool:
        return type(other) is Batch and self.items == other.items

    def __hash__(self) -> int:
        return hash(self.items)

    def __repr__(self) -> str:
        return f"Batch(items={self.items!r})"

    def __reduce__(self) -> tuple[Callable[[bytes, int], Batch], tuple[bytes, int]]:
        if self._blob is None:
            self._blob = pickle.dumps(self.items, protocol=pickle.HIGHEST_PROTOCOL)
            self._shared = sum(1 for x in self.items if type(x) is Shared)
        return _batch_from, (self._blob, self._shared)


def _batch_from(blob: bytes, shared: int = 0) -> Batch:
    if shared:  # (the receiving process's table of shared messages holds the whole batch)
        expect_shared(shared)
    return Batch(pickle.loads(blob))
