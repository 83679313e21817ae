"""Digest windows of two runs matched by overlap, and the items of matched windows (pure code).

Two runs may cut time differently (60- vs 180-minute rolling digests), so a window is matched
by the time it covers, not by its start: per digest type, the run with the shorter windows (the
*fine* side; with equal lengths, run A) has each of its windows assigned to the other run's
window that overlaps it most (ties: the earlier one). A :class:`WindowGroup` is one window of
the coarse side with the fine windows assigned to it (a 180-minute window and the three
60-minute windows inside it; with equal windows, one of each), or a window that overlaps
nothing of the other run.

The items of a side of a group are the items of its windows, each item (by its lead article)
once, at its best rank (1-based over all sections in section order) and that rank's score.
An item of one run whose lead changed but which shares a story id with an unmatched item of
the other run is the same item (``lead changed``).
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from newsflow.core.timeutil import iso_to_ms
from newsflow.digest.render import SECTION_ORDER

#: the window counts a group compares (sums over the group's windows of a side)
WINDOW_COUNTS = ("article_count", "selected_count", "cluster_count", "duplicates_removed")


def nonzero(x: float) -> bool:
    """A difference that shows at the reports' two decimals."""
    return round(x, 2) != 0


@dataclass(frozen=True, slots=True)
class ItemChange:
    """One digest item in either run (best rank, 1-based over all sections; None = absent)."""

    article_id: str
    title: str
    rank_a: int | None
    rank_b: int | None
    score_a: float | None
    score_b: float | None
    lead_changed: bool = False

    @property
    def kind(self) -> str:
        if self.rank_a is None:
            return "added"
        if self.rank_b is None:
            return "removed"
        return "re-ranked" if self.rank_a != self.rank_b else "same"

    @property
    def score_delta(self) -> float | None:
        if self.score_a is None or self.score_b is None:
            return None
        return round(self.score_b - self.score_a, 4)

    @property
    def shown(self) -> bool:
        """Worth a row: added, removed, re-ranked, another lead or another score."""
        return self.kind != "same" or self.lead_changed or nonzero(self.score_delta or 0.0)


@dataclass(frozen=True, slots=True)
class WindowGroup:
    """Windows of one digest type that cover the same time in the two runs."""

    digest_type: str
    start: str  # the earliest start and latest end of the group's windows
    end: str
    ids_a: tuple[str, ...]
    ids_b: tuple[str, ...]
    counts_a: tuple[int, ...] | None  # WINDOW_COUNTS summed; None = no window of run A
    counts_b: tuple[int, ...] | None
    items: tuple[ItemChange, ...]

    def n(self, kind: str) -> int:
        return sum(1 for it in self.items if it.kind == kind)

    @property
    def score_deltas(self) -> list[float]:
        return [d for it in self.items if (d := it.score_delta) is not None]

    @property
    def items_a(self) -> int:
        return sum(it.rank_a is not None for it in self.items)

    @property
    def items_b(self) -> int:
        return sum(it.rank_b is not None for it in self.items)

    @property
    def changed(self) -> bool:
        """What a reader of the group's windows sees differs: items, ranks, scores or counts."""
        return self.counts_a != self.counts_b or any(it.shown for it in self.items)

    @property
    def weight(self) -> int:
        """How much changed (the report shows the most changed groups first)."""
        return self.n("added") + self.n("removed") + self.n("re-ranked") + (self.counts_a != self.counts_b)


# ------------------------------------------------------------------------------ items
def ranked_items(d: Mapping[str, Any]) -> list[tuple[int, Mapping[str, Any]]]:
    """A digest's items with their rank over all sections, in the digests' section order."""
    by = {s.get("name"): s.get("items") or [] for s in d.get("sections") or []}
    order = [n for n in SECTION_ORDER if n in by] + sorted(str(n) for n in by if n not in SECTION_ORDER)
    items = [it for name in order for it in by.get(name, [])]
    return [(i + 1, it) for i, it in enumerate(items)]


def lead_id(it: Mapping[str, Any]) -> str:
    return str((it.get("lead") or {}).get("article_id") or "")


def item_title(it: Mapping[str, Any]) -> str:
    return str((it.get("lead") or {}).get("title") or it.get("label") or "")


def item_score(it: Mapping[str, Any]) -> float | None:
    s = it.get("score")
    return float(s) if isinstance(s, int | float) else None


def _best_items(digests: Sequence[Mapping[str, Any]]) -> list[tuple[int, Mapping[str, Any]]]:
    """The items of several windows, each lead once at its best rank, best rank first."""
    best: dict[str, tuple[int, Mapping[str, Any]]] = {}
    for d in digests:
        for r, it in ranked_items(d):
            k = lead_id(it)
            if k not in best or r < best[k][0]:
                best[k] = (r, it)
    return sorted(best.values(), key=lambda t: (t[0], lead_id(t[1])))


def diff_items(a: Sequence[Mapping[str, Any]] | Mapping[str, Any] | None,
               b: Sequence[Mapping[str, Any]] | Mapping[str, Any] | None) -> tuple[ItemChange, ...]:
    """The items of run A's windows vs run B's (one digest, several, or None for none)."""
    ra = _best_items(_as_list(a))
    rb = _best_items(_as_list(b))
    b_by_lead = {lead_id(it): (r, it) for r, it in rb}
    out: list[ItemChange] = []
    used_b: set[str] = set()
    unmatched_a: list[tuple[int, Mapping[str, Any]]] = []
    for r, it in ra:
        hit = b_by_lead.get(lead_id(it))
        if hit is not None:
            used_b.add(lead_id(hit[1]))
            out.append(ItemChange(lead_id(it), item_title(hit[1]), r, hit[0], item_score(it), item_score(hit[1])))
        else:
            unmatched_a.append((r, it))
    # second pass: the same story under another lead article
    rest_a: list[tuple[int, Mapping[str, Any]]] = []
    for r, it in unmatched_a:
        stories = set(it.get("story_ids") or [])
        hit = next(((rb_, itb) for rb_, itb in rb if lead_id(itb) not in used_b
                    and stories & set(itb.get("story_ids") or [])), None)
        if hit is not None:
            used_b.add(lead_id(hit[1]))
            out.append(ItemChange(lead_id(hit[1]), item_title(hit[1]), r, hit[0], item_score(it),
                                  item_score(hit[1]), lead_changed=True))
        else:
            rest_a.append((r, it))
    out += [ItemChange(lead_id(it), item_title(it), r, None, item_score(it), None) for r, it in rest_a]
    out += [ItemChange(lead_id(it), item_title(it), None, r, None, item_score(it))
            for r, it in rb if lead_id(it) not in used_b]
    return tuple(sorted(out, key=lambda c: (c.rank_b if c.rank_b is not None else 10**9,
                                            c.rank_a if c.rank_a is not None else 10**9, c.article_id)))


def _as_list(x: Sequence[Mapping[str, Any]] | Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    if x is None:
        return []
    if isinstance(x, Mapping):
        return [x]
    return list(x)


# ------------------------------------------------------------------------------ windows
@dataclass(frozen=True, slots=True)
class _Win:
    start: int
    end: int
    d: Mapping[str, Any]

    @property
    def id(self) -> str:
        return str(self.d.get("digest_id"))


def _wins(digests: Sequence[Mapping[str, Any]]) -> tuple[dict[str, list[_Win]], list[Mapping[str, Any]]]:
    """Digests by type as windows, and those without an ISO 8601 window (matched by id)."""
    by: dict[str, list[_Win]] = {}
    untimed: list[Mapping[str, Any]] = []
    for d in digests:
        try:
            s, e = iso_to_ms(str(d.get("window_start"))), iso_to_ms(str(d.get("window_end")))
        except (ValueError, OverflowError):  # (every digest the flow writes has both)
            untimed.append(d)
            continue
        by.setdefault(str(d.get("digest_type")), []).append(_Win(s, max(e, s + 1), d))
    for ws in by.values():
        ws.sort(key=lambda w: (w.start, w.end, w.id))
    return by, untimed


def _median_length(ws: Sequence[_Win]) -> int:
    lengths = sorted(w.end - w.start for w in ws)
    return lengths[len(lengths) // 2] if lengths else 0


def _counts_of(ds: Sequence[Mapping[str, Any]]) -> tuple[int, ...] | None:
    if not ds:
        return None
    return tuple(sum(int(d.get(k) or 0) for d in ds) for k in WINDOW_COUNTS)


def _counts(ws: Sequence[_Win]) -> tuple[int, ...] | None:
    return _counts_of([w.d for w in ws])


def _assign(fine: Sequence[_Win], coarse: Sequence[_Win]) -> list[int | None]:
    """For each fine window, the index of the coarse window overlapping it most (None: none)."""
    starts = [w.start for w in coarse]
    longest = max((w.end - w.start for w in coarse), default=0)
    out: list[int | None] = []
    for f in fine:
        best, best_ov = None, 0
        j = bisect.bisect_left(starts, f.end) - 1  # the last coarse window starting before f ends
        while j >= 0 and coarse[j].start > f.start - longest:
            ov = min(f.end, coarse[j].end) - max(f.start, coarse[j].start)
            if ov > 0 and ov >= best_ov:  # (walking back: on a tie the earlier window wins)
                best, best_ov = j, ov
            j -= 1
        out.append(best)
    return out


def match_windows(a: Sequence[Mapping[str, Any]], b: Sequence[Mapping[str, Any]]) -> tuple[WindowGroup, ...]:
    """Run A's digests vs run B's, matched by overlap per digest type (see the module)."""
    (wa, ua), (wb, ub) = _wins(a), _wins(b)
    groups: list[WindowGroup] = []
    by_id_a = {str(d.get("digest_id")): d for d in ua}
    by_id_b = {str(d.get("digest_id")): d for d in ub}
    for did in sorted(set(by_id_a) | set(by_id_b)):
        x, y = by_id_a.get(did), by_id_b.get(did)
        ref = x if x is not None else y
        assert ref is not None
        xs, ys = [x] if x is not None else [], [y] if y is not None else []
        groups.append(WindowGroup(str(ref.get("digest_type")), str(ref.get("window_start")),
                                  str(ref.get("window_end")), tuple(did for _ in xs), tuple(did for _ in ys),
                                  _counts_of(xs), _counts_of(ys), diff_items(xs, ys)))
    for kind in sorted(set(wa) | set(wb)):
        xa, xb = wa.get(kind, []), wb.get(kind, [])
        a_fine = _median_length(xa) <= _median_length(xb) if xa and xb else True
        fine, coarse = (xa, xb) if a_fine else (xb, xa)
        members: list[list[_Win]] = [[] for _ in coarse]
        alone: list[_Win] = []
        for f, j in zip(fine, _assign(fine, coarse), strict=True):
            if j is None:
                alone.append(f)
            else:
                members[j].append(f)
        pairs = [(ms, [c]) for c, ms in zip(coarse, members, strict=True)] + [([f], []) for f in alone]
        for fs, cs in pairs:
            ga, gb = (fs, cs) if a_fine else (cs, fs)
            ws = ga + gb
            groups.append(WindowGroup(
                kind, _iso(min(w.start for w in ws)), _iso(max(w.end for w in ws)),
                tuple(w.id for w in ga), tuple(w.id for w in gb), _counts(ga), _counts(gb),
                diff_items([w.d for w in ga], [w.d for w in gb])))
    return tuple(sorted(groups, key=lambda g: (g.start, g.digest_type, g.end, g.ids_a, g.ids_b)))


def _iso(ms: int) -> str:
    from newsflow.core.timeutil import ms_to_iso

    return ms_to_iso(ms)
