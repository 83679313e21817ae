"""Messages that cross processes pickle as (class, field values) and still read old pickles."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from newsflow.core import pickling
from newsflow.core.pickling import Shared, fast_pickle
from newsflow.dedup.stories import StoryFeatures
from newsflow.model import messages, records
from newsflow.model.messages import Batch, Deduped, FromShard, ScoredArticle, Tick
from newsflow.model.records import Article, DedupInfo, Media, Sighting


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
    feats = StoryFeatures("id", "P", 5, ("w",), (1, 2), (), b"\x00\x01", 7, (3,), ("e",), (("t", 0.5),), ("5-6",))
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

    for c in (Derived, Checked):
        with pytest.raises(TypeError):
            fast_pickle(c)


def test_shared_message_pickles_once_and_arrives_as_one_object(monkeypatch: pytest.MonkeyPatch) -> None:
    """A message for several keys (the five digest steps): Bytewax pickles it for each key on
    another process; its payload is pickled once, and the receiving process rebuilds one object
    that every key's step gets."""
    msg = Batch(tuple(FromShard("st01", ScoredArticle({"fetched_at": f"2026-01-01T00:00:0{i}Z"}, {"key": str(i)}))
                      for i in range(3)))
    calls: list[object] = []
    dumps = pickle.dumps

    def counting(obj: object, *a: object, **kw: object) -> bytes:
        calls.append(obj)
        return dumps(obj, *a, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(pickle, "dumps", counting)
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
