"""Which articles a window shows (pure): its scored articles (one per article id, the latest
revision, with its ``preferred`` URL duplicate's title, text and link), sorted by id, read as
columns; the duplicates it removed; the stories' duplicate copies from other outlets."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter, methodcaller
from typing import Any

import numpy as np

from newsflow.core.timeutil import iso_to_ms
from newsflow.digest.config import DEFAULT_DIGEST_CONFIG, DigestConfig
from newsflow.digest.schedule import (
    DigestWindow,
)
from newsflow.model.vocab import Disposition
from newsflow.scoring.importance import (
    SCORED_DISPOSITIONS,
)

DUPLICATE_DISPOSITIONS = frozenset({Disposition.EXACT_DUPLICATE, Disposition.NEAR_DUPLICATE})


def article_time_ms(rec: Mapping[str, Any], basis: str = "published") -> int:
    key = "fetched" if basis == "fetched" else "published"
    ms = rec.get(f"{key}_ms")
    if isinstance(ms, int):
        return ms
    return iso_to_ms(rec[f"{key}_at"])


def record_key(rec: Mapping[str, Any]) -> tuple[str, int, str, str]:
    return (
        str(rec.get("article_id") or ""),
        int(rec.get("revision_no") or 0),
        str(rec.get("key") or ""),
        str(rec.get("seq") or ""),
    )


def importance_of(rec: Mapping[str, Any]) -> float:
    v = rec.get("importance")
    if type(v) is float:
        return v
    return float(v) if isinstance(v, int | float) else 0.0


#: what the digest shows of an article: taken from the ``preferred`` URL-duplicate copy
_SHOWN_FIELDS = ("title", "body_text", "url", "word_count", "_bz", "_th", "_tc")


def _preferred_copies(records: Iterable[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """article id -> its URL-duplicate copy flagged ``preferred`` (more content; the one with
    the most words when several were)."""
    best: dict[str, Mapping[str, Any]] = {}
    for r in records:
        if r.get("disposition") == Disposition.EXACT_DUPLICATE:
            _prefer(best, r)
    return best


def _prefer(best: dict[str, Mapping[str, Any]], r: Mapping[str, Any]) -> None:
    """:func:`_preferred_copies` for one ``exact_duplicate`` record."""
    if not r.get("preferred"):
        return
    root = r.get("duplicate_of")
    if not root:
        return
    cur = best.get(root)
    k = (int(r.get("word_count") or 0), str(r.get("key") or ""))
    if cur is None or k > (int(cur.get("word_count") or 0), str(cur.get("key") or "")):
        best[root] = r


#: what assembly reads of every article, as columns (:class:`WindowRecords`)
_COLUMNS = ("importance_components", "story_id", "_sc", "feed_id", "tier", "_th", "_tc")


@dataclass(slots=True)
class WindowRecords:
    """The window's scored articles (one record per article id, its latest revision, shown
    with its ``preferred`` URL duplicate's fields), sorted by id, with the columns assembly
    reads of every one of them; the distinct duplicate keys; the stories' duplicate copies."""

    arts: list[Mapping[str, Any]]
    aids: list[str]  # article ids
    cols: dict[str, list[Any]]  # field (_COLUMNS) -> values, one per article (None: missing)
    duplicates: int
    copies: dict[str, list[tuple[str, Any]]]  # :func:`story_copies`

    def take(self, idx: list[int]) -> WindowRecords:
        """The articles ``idx`` (in that order)."""
        g = idx.__iter__
        return WindowRecords(list(map(self.arts.__getitem__, g())), list(map(self.aids.__getitem__, g())),
                              {k: list(map(v.__getitem__, g())) for k, v in self.cols.items()},
                              self.duplicates, self.copies)


def window_records(
    records: Sequence[Mapping[str, Any]], window: DigestWindow, config: DigestConfig
) -> WindowRecords:
    """What :func:`select_records` (before its ``adjust`` and importance cut) and
    :func:`story_copies` read of the records. Digest entries (the flow's) are read field by
    field for all records at once (:func:`_window_columns`); other records one by one."""
    fast = _window_columns(records, window, config)
    if fast is not None:
        return fast
    w = _window_pass(records, window, config, range(len(records)), scored_too=True)
    cols = {k: list(map(methodcaller("get", k), w.arts)) for k in _COLUMNS}
    return WindowRecords(w.arts, w.aids, cols, w.duplicates, w.copies)


_ENTRY_FIELDS = {b: itemgetter("disposition", f"{b}_ms", "article_id", *_COLUMNS) for b in ("published", "fetched")}


def _window_columns(
    records: Sequence[Mapping[str, Any]], window: DigestWindow, config: DigestConfig
) -> WindowRecords | None:
    """:func:`window_records` when every record has every field read (digest entries): one
    pass picks them all; the scored articles are then chosen on columns (times and ids checked
    for type, collisions of ids resolved one by one), duplicates go through
    :func:`_window_pass`. None when a record lacks a field or a time is not an int."""
    basis = "fetched" if config.time_basis == "fetched" else "published"
    try:
        rows = list(map(_ENTRY_FIELDS[basis], records))
    except (KeyError, TypeError):
        return None
    n = len(rows)
    if n == 0:
        return None
    disp = list(map(itemgetter(0), rows))
    ms = list(map(itemgetter(1), rows))
    aid = list(map(itemgetter(2), rows))
    scored = np.fromiter(map(SCORED_DISPOSITIONS.__contains__, disp), bool, n)
    si = np.flatnonzero(scored)
    ms_s = ms if len(si) == n else [ms[i] for i in si.tolist()]
    if set(map(type, ms_s)) - {int}:
        return None  # a time to parse: one by one
    try:
        t = np.array(ms_s, dtype=np.int64)
    except OverflowError:
        return None
    inw = (t >= window.start_ms) & (t < window.end_ms)
    ins = si.tolist() if inw.all() else si[inw].tolist()
    ids = aid if len(ins) == n else [aid[i] for i in ins]
    if set(map(type, ids)) - {str} or not all(ids):
        return None
    first = dict(zip(ids, ins, strict=True))
    if len(first) < len(ids):  # revisions / re-emits: the latest of each id, as _window_pass
        first = {}
        for a_, i in zip(ids, ins, strict=True):
            cur = first.setdefault(a_, i)
            if cur != i and record_key(records[i]) > record_key(records[cur]):
                first[a_] = i
    others = np.flatnonzero(~scored).tolist()
    w = _window_pass(records, window, config, others, scored_too=False)
    aids = sorted(first)
    idx = list(map(first.__getitem__, aids))
    arts = list(map(records.__getitem__, idx))
    # the other fields of the chosen rows, in id order, as columns
    picked = list(zip(*map(rows.__getitem__, idx), strict=True))[3:] or [()] * len(_COLUMNS)
    out = {k: list(v) for k, v in zip(_COLUMNS, picked, strict=True)}
    if w.preferred:
        for j, a_ in enumerate(aids):
            p = w.preferred.get(a_)
            if p is not None:
                arts[j] = r = _shown(arts[j], p)
                for k in _COLUMNS:
                    out[k][j] = r.get(k)
    return WindowRecords(arts, aids, out, w.duplicates, w.copies)


def _in_window(r: Mapping[str, Any], basis: str, start: int, end: int) -> bool:
    """Whether the record's time (``basis``) is in ``[start, end)``; a record without one is not."""
    try:
        t = article_time_ms(r, basis)
    except (KeyError, TypeError, ValueError):
        return False
    return start <= t < end


def _shown(r: Mapping[str, Any], p: Mapping[str, Any]) -> dict[str, Any]:
    """The article ``r`` shown with its preferred URL duplicate ``p``'s title, text and link."""
    return {**r, **{f: p.get(f) for f in _SHOWN_FIELDS if p.get(f) is not None}}


@dataclass(slots=True)
class _Pass:
    arts: list[Mapping[str, Any]]
    aids: list[str]
    duplicates: int
    copies: dict[str, list[tuple[str, Any]]]
    preferred: dict[str, Mapping[str, Any]]


def _window_pass(
    records: Sequence[Mapping[str, Any]], window: DigestWindow, config: DigestConfig,
    which: Iterable[int], *, scored_too: bool,
) -> _Pass:
    """The records ``which`` one by one, in order: the window's scored articles (with
    ``scored_too``; latest revision per id, sorted by id, preferred copies applied), the
    distinct duplicate keys, the stories' copies and the preferred URL duplicates."""
    preferred: dict[str, Mapping[str, Any]] = {}
    latest: dict[str, Mapping[str, Any]] = {}
    dup_keys: set[str] = set()
    copies: dict[str, list[tuple[str, Any]]] = {}
    copy_seen: set[str] = set()
    start, end = window.start_ms, window.end_ms
    basis = config.time_basis
    scored = SCORED_DISPOSITIONS
    for i in which:
        r = records[i]
        disp = r.get("disposition")
        if disp in scored:
            if not scored_too:
                continue
            if not _in_window(r, basis, start, end):
                continue
            aid = r.get("article_id")
            if not aid:
                continue
            if type(aid) is not str:
                aid = str(aid)
            cur = latest.setdefault(aid, r)
            if cur is not r and record_key(r) > record_key(cur):
                latest[aid] = r
            continue
        if disp == Disposition.EXACT_DUPLICATE:
            _prefer(preferred, r)  # whatever its time
        if disp not in DUPLICATE_DISPOSITIONS:
            continue
        if not _in_window(r, basis, start, end):
            continue
        dup_keys.add(str(r.get("key") or r.get("article_id") or ""))
        sid = r.get("story_id")
        if sid:  # the story's copies: one per distinct article
            key = str(r.get("article_id") or r.get("key") or "")
            if key not in copy_seen:
                copy_seen.add(key)
                pub = str(r.get("publisher") or r.get("feed_id") or "")
                copies.setdefault(str(sid), []).append((pub, r.get("tier")))
    aids = sorted(latest)
    arts = list(map(latest.__getitem__, aids))
    if preferred:
        for j, a in enumerate(aids):
            p = preferred.get(a)
            if p is not None:
                arts[j] = _shown(arts[j], p)
    return _Pass(arts, aids, len(dup_keys), copies, preferred)


def select_records(
    records: Iterable[Mapping[str, Any]],
    window: DigestWindow,
    config: DigestConfig = DEFAULT_DIGEST_CONFIG,
    adjust: Any = None,
) -> tuple[list[Mapping[str, Any]], int, int]:
    """(articles >= min importance, sorted by id; article count; duplicates removed).

    One record per ``article_id`` (its latest revision); re-emitted keys count once;
    ``exact_duplicate``/``near_duplicate`` records are the duplicates removed. An article whose
    URL duplicate was ``preferred`` by dedup (more content) is shown with that copy's title,
    text and link. ``adjust(rec) -> rec`` (e.g. re-scoring) runs before the importance cut.
    """
    w = window_records(records if isinstance(records, list) else list(records), window, config)
    arts = w.arts
    if adjust is not None:
        arts = [adjust(r) for r in arts]
    sel = [r for r in arts if importance_of(r) >= config.min_importance]
    return sel, len(arts), w.duplicates


def story_copies(
    records: Iterable[Mapping[str, Any]],
    window: DigestWindow,
    config: DigestConfig = DEFAULT_DIGEST_CONFIG,
) -> dict[str, list[tuple[str, Any]]]:
    """story id -> (publisher, tier) of the window's duplicate copies (exact and near), so a
    digest item can credit every outlet that carried the story, not only the scored ones.
    One entry per distinct article: a copy's later versions (``#rN``) are the same article."""
    return window_records(records if isinstance(records, list) else list(records), window, config).copies
