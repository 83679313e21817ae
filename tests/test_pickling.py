"""Messages that cross processes pickle as (class, field values) and still read old pickles."""

from __future__ import annotations

import dataclasses
import inspect
import pickle
from collections.abc import Callable

import pytest

from newsflow.dedup.story_features import StoryFeatures
from newsflow.model import messages, records
from newsflow.model.messages import Deduped, FromShard, ScoredArticle, Tick
from newsflow.model.records import Article, DedupInfo, Media, Sighting
from newsflow.runtime import pickling
from newsflow.runtime.pickling import Batch, Shared, fast_pickle


def _frozen_slotted(module: object) -> list[type]:
    return [c for c in vars(module).values() if isinstance(c, type) and dataclasses.is_dataclass(c)
            and c.__module__ == module.__name__ and c.__dataclass_params__.frozen  # type: ignore[attr-defined]
            and "__slots__" in vars(c)]


def _article(**kw: object) -> Article:
    vals: dict[str, object] = {f.name: f"v-{f.name}" for f in dataclasses.fields(Article)}
    vals.update(published_ms=1, fetched_ms=2, date_uncertain=False, word_count=3, reading_time_min=0.5,
                partial_content=False, item_index=0, categories=("a", "b"),
                media=(Media("https://x/1.jpg", "image/jpeg", None, None),), tier=None, story_text=None)
    vals.update(kw)
    return Article(**vals)  # type: ignore[arg-type]


def test_every_message_class_pickles_by_its_fields() -> None:
    classes = _frozen_slotted(messages) + _frozen_slotted(records) + [StoryFeatures]
    assert len(classes) >= 20
    for c in classes:
        assert "__reduce__" in vars(c), c.__name__


def test_round_trip_is_equal_and_of_the_same_class() -> None:
    a = _article()
    info = DedupInfo("unique", None, None, seen_in=(Sighting("f", "P", "https://x", "t", "id"),))
    feats = StoryFeatures("id", "P", 5, ("w",), (1, 2), (), b"\x00\x01", (3,), (("t", 0.5),), ("5-6",))
    for m in (a, info, feats, Deduped("0001", a, info, 3, feats), Tick(4, 5, "p0"),
              FromShard("st00", ScoredArticle({"k": [1, 2]}, None, "text")), Batch((Tick(1, 2), Tick(3, 4)))):
        back = pickle.loads(pickle.dumps(m, protocol=pickle.HIGHEST_PROTOCOL))
        assert type(back) is type(m)
        assert back == m


def test_pickles_written_before_still_load() -> None:
    """A snapshot written with the dataclass's own __getstate__ (before fast_pickle)."""
    a = _article(title="old")
    reduce = vars(Article)["__reduce__"]
    del Article.__reduce__  # type: ignore[attr-defined]
    try:
        old = pickle.dumps(a, protocol=pickle.HIGHEST_PROTOCOL)
    finally:
        Article.__reduce__ = reduce  # type: ignore[method-assign]
    assert b"__reduce__" not in old
    assert pickle.loads(old) == a
    assert pickle.dumps(pickle.loads(old)) == pickle.dumps(a)


def test_refuses_classes_it_would_rebuild_wrongly() -> None:
    @dataclasses.dataclass(frozen=True, slots=True)
    class Derived:
        x: int
        y: int = dataclasses.field(init=False, default=0)

    @dataclasses.dataclass(frozen=True)
    class Checked:
        x: int

        def __post_init__(self) -> None:
            pass

    @dataclasses.dataclass(frozen=True, slots=True)
    class KeywordOnly:  # rebuilt from positional values, a keyword-only field would not load
        x: int
        y: int = dataclasses.field(default=0, kw_only=True)

    for c in (Derived, Checked, KeywordOnly):
        with pytest.raises(TypeError):
            fast_pickle(c)


def _count_dumps(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every object ``pickle.dumps`` is called on from now on (nested calls included)."""
    calls: list[object] = []
    dumps = pickle.dumps

    def counting(obj: object, *a: object, **kw: object) -> bytes:
        calls.append(obj)
        return dumps(obj, *a, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(pickle, "dumps", counting)
    return calls


def test_shared_message_pickles_once_and_arrives_as_one_object(monkeypatch: pytest.MonkeyPatch) -> None:
    """A message for several keys (the five digest steps): Bytewax pickles it for each key on
    another process; its payload is pickled once, and the receiving process rebuilds one object
    that every key's step gets."""
    msg = Batch(tuple(FromShard("st01", ScoredArticle({"fetched_at": f"2026-01-01T00:00:0{i}Z"}, {"key": str(i)}))
                      for i in range(3)))
    dumps = pickle.dumps
    calls = _count_dumps(monkeypatch)
    shared = Shared(msg)
    sent = [dumps(("digests@1", shared)) for _ in range(3)]  # three keys on one other process
    assert [c for c in calls if c is msg] == [msg]  # the payload pickled once
    monkeypatch.setattr(pickling, "_RECEIVED", type(pickling._RECEIVED)(8))
    got = [pickle.loads(b)[1] for b in sent]
    assert all(isinstance(g, Shared) for g in got)
    assert got[0].obj == msg and got[0].obj is not msg
    assert got[1].obj is got[0].obj and got[2].obj is got[0].obj  # one copy for every key's step
    # a message with other contents is another object; the table keeps only the last few
    other = pickle.loads(dumps(Shared(Batch((Tick(1, 2, "dd000"),)))))
    assert other.obj == Batch((Tick(1, 2, "dd000"),)) and other.obj is not got[0].obj
    assert pickle.loads(dumps(Shared(msg))).obj is got[0].obj  # the same contents: the same object
    monkeypatch.setattr(pickling._RECEIVED, "size", 1)
    third = pickle.loads(dumps(Shared(Batch((Tick(3, 4, "dd001"),)))))
    assert list(pickling._RECEIVED.data.values()) == [third.obj]
    assert pickle.loads(dumps(Shared(msg))).obj is not got[0].obj  # forgotten: unpickled again


def test_fast_constructors_take_the_dataclass_arguments_and_build_the_same_objects() -> None:
    """Each class's constructor (fields set through their slots) against the one dataclasses
    wrote: the same signature, and the same object from positional, keyword and default
    arguments; fields stay read-only."""
    classes = _frozen_slotted(messages) + _frozen_slotted(records) + [StoryFeatures]
    assert set(classes) <= set(pickling.DATACLASS_INITS)
    for c in classes:
        fast, orig = vars(c)["__init__"], pickling.DATACLASS_INITS[c]
        assert fast is not orig
        sig_fast, sig_orig = inspect.signature(fast), inspect.signature(orig)
        assert str(sig_fast) == str(sig_orig), c.__name__
        fields = dataclasses.fields(c)
        for f in fields:
            p = sig_fast.parameters[f.name]
            if f.default is not dataclasses.MISSING:
                assert p.default is f.default
            elif f.default_factory is not dataclasses.MISSING:
                assert repr(p.default) == repr(sig_orig.parameters[f.name].default) == "<factory>"
            else:
                assert p.default is inspect.Parameter.empty
        vals = [object() for _ in fields]
        required = [v for f, v in zip(fields, vals, strict=True)
                    if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
        for args, kwargs in (((*vals,), {}), ((), {f.name: v for f, v in zip(fields, vals, strict=True)}),
                             ((*required,), {})):
            a, b = object.__new__(c), object.__new__(c)
            fast(a, *args, **kwargs)
            orig(b, *args, **kwargs)
            assert [getattr(a, f.name) for f in fields] == [getattr(b, f.name) for f in fields], c.__name__
        with pytest.raises(TypeError):
            c(*vals, object())  # one argument too many
        if required:
            with pytest.raises(TypeError):
                c()  # a required argument missing
        obj = c(*vals)
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(obj, fields[0].name, 1)


def test_fast_constructor_makes_a_new_value_per_object_from_a_default_factory() -> None:
    @fast_pickle
    @dataclasses.dataclass(frozen=True, slots=True)
    class K:
        a: int
        b: list[int] = dataclasses.field(default_factory=list)
        c: int = 3

    assert str(inspect.signature(K.__init__)) == str(inspect.signature(pickling.DATACLASS_INITS[K]))
    x, y = K(1), K(1)
    assert x.b == [] and x.b is not y.b and x.c == 3
    assert K(1, [2], 4) == K(a=1, b=[2], c=4)
    with pytest.raises(TypeError):
        K(1, [2], 4, 5)


def test_batch_pickles_its_messages_once_however_often_it_is_pickled(monkeypatch: pytest.MonkeyPatch) -> None:
    """Bytewax 0.21 pickles an item that crosses processes twice (its size, then its bytes): a
    batch's messages are pickled on the first call only, and both pickles load to equal batches."""
    msgs = tuple(Tick(i, i + 1, f"dd00{i}") for i in range(3))
    batch = Batch(msgs)
    dumps = pickle.dumps
    calls = _count_dumps(monkeypatch)
    first, second = (dumps(("st00", batch), protocol=pickle.HIGHEST_PROTOCOL) for _ in range(2))
    assert first == second
    assert [c for c in calls if c is msgs] == [msgs]  # the messages pickled once
    for blob in (first, second):
        key, back = pickle.loads(blob)
        assert key == "st00" and type(back) is Batch and back == batch and back.items == msgs
        assert back is not batch
    assert Batch(msgs) != Batch(msgs[:2]) and hash(Batch(msgs)) == hash(Batch(msgs))


_REBUILT: list[int] = []


def _rebuild(i: int) -> tuple[int]:
    _REBUILT.append(i)
    return (i,)


class _Entry:
    """A digest entry stand-in that counts how often it is unpickled."""

    def __init__(self, i: int) -> None:
        self.i = i

    def __reduce__(self) -> tuple[Callable[[int], tuple[int]], tuple[int]]:
        return _rebuild, (self.i,)


def test_an_activations_entries_sent_to_several_windows_are_unpickled_once_each(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A story shard's activation sends its entries to several window keys, one batch per key:
    every copy of an entry arrives after all the other entries of the batch before it. With
    3,000 entries (a busy shard's minute of 100k UCI rows) each is unpickled once."""
    monkeypatch.setattr(pickling, "_RECEIVED", type(pickling._RECEIVED)(512))
    shared = [Shared(_Entry(i)) for i in range(3000)]
    sent = [pickle.dumps((key, Batch(tuple(shared))), protocol=pickle.HIGHEST_PROTOCOL)
            for key in ("dw:rolling:0", "dw:rolling:900000", "dw:morning_brief:0", "dw:weekly_roundup:0")]
    _REBUILT.clear()
    got = [pickle.loads(b)[1] for b in sent]
    assert sorted(_REBUILT) == list(range(3000))  # once each, not once per window key
    assert all(g.items[i].obj is got[0].items[i].obj for g in got for i in (0, 1500, 2999))
    # the table grew to twice the batch, and only for batches of shared messages
    assert pickling._RECEIVED.size == 6000
    pickle.loads(pickle.dumps(("st00", Batch(tuple(Tick(i, i + 1) for i in range(5000))))))
    assert pickling._RECEIVED.size == 6000
