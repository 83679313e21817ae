"""Which articles a window shows (pure): its scored articles (one per article id, the latest
revision, with its ``preferred`` URL duplicate's title, text and link), sorted by id, read as
columns; the duplicates it removed; the stories' duplicate copies from other outlets."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from operator import attrgetter, itemgetter

import numpy as np

from newsflow.digest.config import DEFAULT_DIGEST_CONFIG, DigestConfig
from newsflow.digest.entries import DigestEntry
from newsflow.digest.schedule import (
    DigestWindow,
)
from newsflow.model.vocab import Disposition
from newsflow.scoring.importance import (
    SCORED_DISPOSITIONS,
)

DUPLICATE_DISPOSITIONS = frozenset({Disposition.EXACT_DUPLICATE, Disposition.NEAR_DUPLICATE})


def entry_time_ms(rec: DigestEntry, basis: str = "published") -> int | None:
    """The entry's event time on ``basis`` (``fetched`` or ``published``), None: it has none."""
    return rec.fetched_ms if basis == "fetched" else rec.published_ms


def article_time_ms(rec: DigestEntry, basis: str = "published") -> int:
    """:func:`entry_time_ms` of an entry that has one."""
    ms = entry_time_ms(rec, basis)
    if ms is None:
        msg = f"article {rec.article_id!r} has no {basis} time"
        raise ValueError(msg)
    return ms


def record_key(rec: DigestEntry) -> tuple[str, int, str]:
    """Which of an article's entries is its latest (revisions, re-emits)."""
    return str(rec.article_id or ""), int(rec.revision_no or 0), str(rec.key or "")


def importance_of(rec: DigestEntry) -> float:
    v = rec.importance
    if type(v) is float:
        return v
    return float(v) if isinstance(v, int | float) else 0.0


#: what the digest shows of an article: taken from the ``preferred`` URL-duplicate copy
_SHOWN_FIELDS = ("title", "url", "word_count", "body_z", "term_hashes", "term_counts")


def _preferred_copies(records: Iterable[DigestEntry]) -> dict[str, DigestEntry]:
    """article id -> its URL-duplicate copy flagged ``preferred`` (more content; the one with
    the most words when several were)."""
    best: dict[str, DigestEntry] = {}
    for r in records:
        if r.disposition == Disposition.EXACT_DUPLICATE:
            _prefer(best, r)
    return best


def _prefer(best: dict[str, DigestEntry], r: DigestEntry) -> None:
    """:func:`_preferred_copies` for one ``exact_duplicate`` record."""
    if not r.preferred:
        return
    root = r.duplicate_of
    if not root:
        return
    cur = best.get(root)
    k = (int(r.word_count or 0), str(r.key or ""))
    if cur is None or k > (int(cur.word_count or 0), str(cur.key or "")):
        best[root] = r


#: what assembly reads of every article, as columns (:class:`EntryColumns`)
_COLUMNS = ("importance_components", "story_id", "story_counts", "feed_id", "tier", "term_hashes", "term_counts")


@dataclass(slots=True)
class EntryColumns:
    """The fields assembly reads of every article of a window (:data:`_COLUMNS`), one list
    each, one value per article."""

    importance_components: list[dict[str, float] | None]
    story_id: list[str | None]
    story_counts: list[tuple[int, int]]
    feed_id: list[str | None]
    tier: list[str | None]
    term_hashes: list[bytes]
    term_counts: list[bytes]

    @classmethod
    def of(cls, arts: Sequence[DigestEntry]) -> EntryColumns:
        return cls(*(list(map(attrgetter(k), arts)) for k in _COLUMNS))

    def take(self, idx: list[int]) -> EntryColumns:
        """The articles ``idx`` (in that order)."""
        return EntryColumns(*(list(map(getattr(self, k).__getitem__, idx)) for k in _COLUMNS))

    def set_row(self, j: int, e: DigestEntry) -> None:
        """Article ``j``'s values are now ``e``'s."""
        for k in _COLUMNS:
            getattr(self, k)[j] = getattr(e, k)


@dataclass(slots=True)
class WindowRecords:
    """The window's scored articles (one record per article id, its latest revision, shown
    with its ``preferred`` URL duplicate's fields), sorted by id, with the columns assembly
    reads of every one of them; the distinct duplicate keys; the stories' duplicate copies."""

    arts: list[DigestEntry]
    aids: list[str]  # article ids
    cols: EntryColumns
    duplicates: int
    copies: dict[str, list[tuple[str, str | None]]]  # :func:`story_copies`

    def take(self, idx: list[int]) -> WindowRecords:
        """The articles ``idx`` (in that order)."""
        return WindowRecords(list(map(self.arts.__getitem__, idx)), list(map(self.aids.__getitem__, idx)),
                             self.cols.take(idx), self.duplicates, self.copies)


def window_records(
    records: Sequence[DigestEntry], window: DigestWindow, config: DigestConfig
) -> WindowRecords:
    """What :func:`select_records` (before its ``adjust`` and importance cut) and
    :func:`story_copies` read of the entries: field by field for all of them at once
    (:func:`_window_columns`), or one by one when that cannot be."""
    fast = _window_columns(records, window, config)
    if fast is not None:
        return fast
    w = _window_pass(records, window, config, range(len(records)), scored_too=True)
    return WindowRecords(w.arts, w.aids, EntryColumns.of(w.arts), w.duplicates, w.copies)


_ENTRY_FIELDS = {b: attrgetter("disposition", f"{b}_ms", "article_id", *_COLUMNS) for b in ("published", "fetched")}


def _window_columns(
    records: Sequence[DigestEntry], window: DigestWindow, config: DigestConfig
) -> WindowRecords | None:
    """:func:`window_records` on columns: one pass picks every field read; the scored articles
    are then chosen on columns (times and ids checked for type, collisions of ids resolved one
    by one), duplicates go through :func:`_window_pass`. None when a scored entry has no time
    or an id is not a non-empty string."""
    basis = "fetched" if config.time_basis == "fetched" else "published"
    rows = list(map(_ENTRY_FIELDS[basis], records))
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
        return None  # an entry without a time: one by one
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
    out = EntryColumns(*map(list, picked))
    if w.preferred:
        for j, a_ in enumerate(aids):
            p = w.preferred.get(a_)
            if p is not None:
                arts[j] = r = _shown(arts[j], p)
                out.set_row(j, r)
    return WindowRecords(arts, aids, out, w.duplicates, w.copies)


def _in_window(r: DigestEntry, basis: str, start: int, end: int) -> bool:
    """Whether the record's time (``basis``) is in ``[start, end)``; a record without one is not."""
    t = entry_time_ms(r, basis)
    return t is not None and start <= t < end


def _shown(r: DigestEntry, p: DigestEntry) -> DigestEntry:
    """The article ``r`` shown with its preferred URL duplicate ``p``'s title, text and link."""
    shown = {f: v for f in _SHOWN_FIELDS if (v := getattr(p, f)) is not None}
    return replace(r, **shown)


@dataclass(slots=True)
class _Pass:
    arts: list[DigestEntry]
    aids: list[str]
    duplicates: int
    copies: dict[str, list[tuple[str, str | None]]]
    preferred: dict[str, DigestEntry]


def _window_pass(
    records: Sequence[DigestEntry], window: DigestWindow, config: DigestConfig,
    which: Iterable[int], *, scored_too: bool,
) -> _Pass:
    """The records ``which`` one by one, in order: the window's scored articles (with
    ``scored_too``; latest revision per id, sorted by id, preferred copies applied), the
    distinct duplicate keys, the stories' copies and the preferred URL duplicates."""
    preferred: dict[str, DigestEntry] = {}
    latest: dict[str, DigestEntry] = {}
    dup_keys: set[str] = set()
    copies: dict[str, list[tuple[str, str | None]]] = {}
    copy_seen: set[str] = set()
    start, end = window.start_ms, window.end_ms
    basis = config.time_basis
    scored = SCORED_DISPOSITIONS
    for i in which:
        r = records[i]
        disp = r.disposition
        if disp in scored:
            if not scored_too:
                continue
            if not _in_window(r, basis, start, end):
                continue
            aid = r.article_id
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
        dup_keys.add(str(r.key or r.article_id or ""))
        sid = r.story_id
        if sid:  # the story's copies: one per distinct article
            key = str(r.article_id or r.key or "")
            if key not in copy_seen:
                copy_seen.add(key)
                pub = str(r.publisher or r.feed_id or "")
                copies.setdefault(str(sid), []).append((pub, r.tier))
    aids = sorted(latest)
    arts = list(map(latest.__getitem__, aids))
    if preferred:
        for j, a in enumerate(aids):
            p = preferred.get(a)
            if p is not None:
                arts[j] = _shown(arts[j], p)
    return _Pass(arts, aids, len(dup_keys), copies, preferred)


def select_records(
    records: Iterable[DigestEntry],
    window: DigestWindow,
    config: DigestConfig = DEFAULT_DIGEST_CONFIG,
    adjust: Callable[[DigestEntry], DigestEntry] | None = None,
) -> tuple[list[DigestEntry], int, int]:
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
    records: Iterable[DigestEntry],
    window: DigestWindow,
    config: DigestConfig = DEFAULT_DIGEST_CONFIG,
) -> dict[str, list[tuple[str, str | None]]]:
    """story id -> (publisher, tier) of the window's duplicate copies (exact and near), so a
    digest item can credit every outlet that carried the story, not only the scored ones.
    One entry per distinct article: a copy's later versions (``#rN``) are the same article."""
    return window_records(records if isinstance(records, list) else list(records), window, config).copies
