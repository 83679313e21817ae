"""What changes between two replays of one archive under two configurations (pure code).

Input: the records each run produced (``articles`` and ``digests`` topics, as dicts). Several
versions of one key (re-emits) -> the last one wins, as under log compaction. Output: a
:class:`Comparison` and its rendering as Markdown (:func:`to_markdown`) or as a standalone HTML
page (:func:`to_html`); both are built from the same blocks, so they say the same thing.

What is compared:

* **digest windows** (one per ``digest_id`` = ``<type>:<window start>``): items added, removed,
  re-ranked (rank = position over all sections, 1-based), score deltas of items in both runs,
  and the window's article / selected / cluster counts. An item is identified by its lead
  article; an item whose lead changed but which shares a story id with an unmatched item of the
  other run is the same item (``lead changed``).
* **dedup dispositions**: counts per disposition, and for articles in both runs the moves from
  one disposition to another.
* **stories**: number of stories, size distribution, largest stories, multi-publisher stories,
  and how many articles present in both runs were grouped with different articles.
* **importance**: per-article score deltas (articles in both runs), the largest ones listed.

Deterministic: everything is sorted on stable keys and numbers have fixed formats, so the same
two runs always give byte-identical reports.
"""

from __future__ import annotations

import html
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from newsflow.digest.render import SECTION_ORDER

JsonRecord = dict[str, Any]

#: story-size buckets of the size distribution (inclusive lower bound, label)
SIZE_BUCKETS: tuple[tuple[int, str], ...] = ((1, "1"), (2, "2"), (3, "3–5"), (6, "6–10"), (11, "11+"))
#: rows shown per table before "… N more"
MAX_ROWS = 50
WINDOW_COUNTS = ("article_count", "selected_count", "cluster_count", "duplicates_removed")


def _nonzero(x: float) -> bool:
    """A difference that shows at the reports' two decimals."""
    return round(x, 2) != 0


# ------------------------------------------------------------------------------ inputs
@dataclass(frozen=True, slots=True)
class RunOutputs:
    """One run's records, latest version per key, in order of first appearance."""

    label: str
    articles: tuple[JsonRecord, ...]
    digests: tuple[JsonRecord, ...]
    deadletters: int = 0


def _last_wins(records: Iterable[Mapping[str, Any]], key: str) -> tuple[JsonRecord, ...]:
    by: dict[str, JsonRecord] = {}
    for r in records:
        by[str(r.get(key))] = dict(r)  # dict keeps the first position, takes the last value
    return tuple(by.values())


def run_outputs(label: str, articles: Iterable[Mapping[str, Any]], digests: Iterable[Mapping[str, Any]],
                deadletters: int = 0) -> RunOutputs:
    return RunOutputs(label, _last_wins(articles, "key"), _last_wins(digests, "digest_id"), deadletters)


# ------------------------------------------------------------------------------ results
@dataclass(frozen=True, slots=True)
class ItemChange:
    """One digest item in either run (rank 1-based over all sections; None = absent)."""

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


@dataclass(frozen=True, slots=True)
class WindowDiff:
    digest_id: str
    digest_type: str
    window_start: str
    window_end: str
    counts_a: tuple[int, ...] | None  # WINDOW_COUNTS, None = window absent in run A
    counts_b: tuple[int, ...] | None
    items: tuple[ItemChange, ...]

    def n(self, kind: str) -> int:
        return sum(1 for it in self.items if it.kind == kind)

    @property
    def score_deltas(self) -> list[float]:
        return [d for it in self.items if (d := it.score_delta) is not None]

    @property
    def changed(self) -> bool:
        return (self.counts_a != self.counts_b or any(it.kind != "same" or it.lead_changed for it in self.items)
                or any(_nonzero(d) for d in self.score_deltas))


@dataclass(frozen=True, slots=True)
class StoryStats:
    stories: int
    articles: int
    buckets: tuple[int, ...]  # one count per SIZE_BUCKETS entry
    multi_publisher: int
    largest: tuple[tuple[int, str, str], ...]  # (size, story_id, a title), largest first


@dataclass(frozen=True, slots=True)
class ScoreChange:
    key: str
    title: str
    a: float
    b: float

    @property
    def delta(self) -> float:
        return round(self.b - self.a, 4)


@dataclass(frozen=True, slots=True)
class Comparison:
    label_a: str
    label_b: str
    articles: tuple[int, int]
    deadletters: tuple[int, int]
    only_a: int  # article keys only in run A
    only_b: int
    dispositions: tuple[tuple[str, int, int], ...]  # (disposition, count A, count B)
    transitions: tuple[tuple[str, str, int], ...]  # (A disposition, B disposition, articles), A != B
    stories: tuple[StoryStats, StoryStats]
    regrouped: int  # articles in both runs whose story co-members (among common articles) differ
    score_matched: int
    score_changed: int
    score_changes: tuple[ScoreChange, ...]  # delta != 0.00 at 2 decimals, largest |delta| first
    windows: tuple[WindowDiff, ...]
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def windows_changed(self) -> tuple[WindowDiff, ...]:
        return tuple(w for w in self.windows if w.changed)


# ------------------------------------------------------------------------------ comparison
def _ranked_items(d: Mapping[str, Any] | None) -> list[tuple[int, Mapping[str, Any]]]:
    if d is None:
        return []
    by = {s.get("name"): s.get("items") or [] for s in d.get("sections") or []}
    order = [n for n in SECTION_ORDER if n in by] + sorted(str(n) for n in by if n not in SECTION_ORDER)
    items = [it for name in order for it in by.get(name, [])]
    return [(i + 1, it) for i, it in enumerate(items)]


def _lead_id(it: Mapping[str, Any]) -> str:
    lead = it.get("lead") or {}
    return str(lead.get("article_id") or "")


def _title(it: Mapping[str, Any]) -> str:
    return str((it.get("lead") or {}).get("title") or it.get("label") or "")


def _score(it: Mapping[str, Any]) -> float | None:
    s = it.get("score")
    return float(s) if isinstance(s, int | float) else None


def diff_items(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> tuple[ItemChange, ...]:
    """Items of one digest window in run A vs run B."""
    ra, rb = _ranked_items(a), _ranked_items(b)
    b_by_lead = {_lead_id(it): (r, it) for r, it in rb}
    matched: list[ItemChange] = []
    used_b: set[int] = set()
    unmatched_a: list[tuple[int, Mapping[str, Any]]] = []
    for r, it in ra:
        hit = b_by_lead.get(_lead_id(it))
        if hit is not None and hit[0] not in used_b:
            used_b.add(hit[0])
            matched.append(ItemChange(_lead_id(it), _title(hit[1]), r, hit[0], _score(it), _score(hit[1])))
        else:
            unmatched_a.append((r, it))
    # second pass: same story, another lead article
    rest_a: list[tuple[int, Mapping[str, Any]]] = []
    for r, it in unmatched_a:
        stories = set(it.get("story_ids") or [])
        hit = next(((rb_, itb) for rb_, itb in rb if rb_ not in used_b and stories & set(itb.get("story_ids") or [])),
                   None)
        if hit is not None:
            used_b.add(hit[0])
            matched.append(ItemChange(_lead_id(hit[1]), _title(hit[1]), r, hit[0], _score(it), _score(hit[1]),
                                      lead_changed=True))
        else:
            rest_a.append((r, it))
    out = matched
    out += [ItemChange(_lead_id(it), _title(it), r, None, _score(it), None) for r, it in rest_a]
    out += [ItemChange(_lead_id(it), _title(it), None, r, None, _score(it)) for r, it in rb if r not in used_b]
    return tuple(sorted(out, key=lambda c: (c.rank_b if c.rank_b is not None else 10**9,
                                            c.rank_a if c.rank_a is not None else 10**9, c.article_id)))


def _counts(d: Mapping[str, Any] | None) -> tuple[int, ...] | None:
    return None if d is None else tuple(int(d.get(k) or 0) for k in WINDOW_COUNTS)


def diff_windows(a: Sequence[Mapping[str, Any]], b: Sequence[Mapping[str, Any]]) -> tuple[WindowDiff, ...]:
    da = {str(d["digest_id"]): d for d in a}
    db = {str(d["digest_id"]): d for d in b}
    out = []
    for did in set(da) | set(db):
        x, y = da.get(did), db.get(did)
        ref = x if x is not None else y
        assert ref is not None
        out.append(WindowDiff(did, str(ref.get("digest_type")), str(ref.get("window_start")),
                              str(ref.get("window_end")), _counts(x), _counts(y), diff_items(x, y)))
    return tuple(sorted(out, key=lambda w: (w.window_start, w.digest_type, w.digest_id)))


def story_stats(articles: Sequence[Mapping[str, Any]], top: int = 5) -> StoryStats:
    members: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for r in articles:
        members[str(r.get("story_id"))].append(r)
    buckets = [0] * len(SIZE_BUCKETS)
    multi = 0
    for recs in members.values():
        n = len(recs)
        i = max(j for j, (lo, _) in enumerate(SIZE_BUCKETS) if n >= lo)
        buckets[i] += 1
        if len({r.get("publisher") for r in recs}) > 1:
            multi += 1
    largest = sorted(((len(recs), sid, str(recs[0].get("title") or "")) for sid, recs in members.items()),
                     key=lambda t: (-t[0], t[1]))[:top]
    return StoryStats(len(members), len(articles), tuple(buckets), multi, tuple(largest))


def _regrouped(a: Mapping[str, Mapping[str, Any]], b: Mapping[str, Mapping[str, Any]]) -> int:
    common = sorted(set(a) & set(b))

    def groups(recs: Mapping[str, Mapping[str, Any]]) -> dict[str, frozenset[str]]:
        by: dict[str, set[str]] = defaultdict(set)
        for k in common:
            by[str(recs[k].get("story_id"))].add(k)
        frozen = {sid: frozenset(ks) for sid, ks in by.items()}
        return {k: frozen[str(recs[k].get("story_id"))] for k in common}

    ga, gb = groups(a), groups(b)
    return sum(1 for k in common if ga[k] != gb[k])


def compare(a: RunOutputs, b: RunOutputs, *, top: int = 20) -> Comparison:
    """Run A (the baseline) vs run B."""
    ka = {str(r.get("key")): r for r in a.articles}
    kb = {str(r.get("key")): r for r in b.articles}
    ca = Counter(str(r.get("disposition")) for r in a.articles)
    cb = Counter(str(r.get("disposition")) for r in b.articles)
    disps = tuple((d, ca.get(d, 0), cb.get(d, 0)) for d in sorted(set(ca) | set(cb)))
    common = sorted(set(ka) & set(kb))
    moves = Counter((str(ka[k].get("disposition")), str(kb[k].get("disposition"))) for k in common)
    transitions = tuple(sorted(((x, y, n) for (x, y), n in moves.items() if x != y),
                               key=lambda t: (-t[2], t[0], t[1])))
    changes = []
    matched = 0
    for k in common:
        sa, sb = ka[k].get("importance"), kb[k].get("importance")
        if isinstance(sa, int | float) and isinstance(sb, int | float):
            matched += 1
            if _nonzero(sb - sa):
                changes.append(ScoreChange(k, str(kb[k].get("title") or ""), float(sa), float(sb)))
    changes.sort(key=lambda c: (-abs(c.delta), c.key))
    return Comparison(
        label_a=a.label, label_b=b.label,
        articles=(len(a.articles), len(b.articles)),
        deadletters=(a.deadletters, b.deadletters),
        only_a=len(set(ka) - set(kb)), only_b=len(set(kb) - set(ka)),
        dispositions=disps, transitions=transitions,
        stories=(story_stats(a.articles), story_stats(b.articles)),
        regrouped=_regrouped(ka, kb),
        score_matched=matched, score_changed=len(changes), score_changes=tuple(changes[:top]) if top else tuple(changes),
        windows=diff_windows(a.digests, b.digests),
    )


# ------------------------------------------------------------------------------ report blocks
@dataclass(frozen=True, slots=True)
class Heading:
    level: int
    text: str


@dataclass(frozen=True, slots=True)
class Para:
    text: str


@dataclass(frozen=True, slots=True)
class Table:
    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    more: int = 0  # rows left off


Block = Heading | Para | Table


def _d(x: float | int) -> str:
    if isinstance(x, int):
        return f"{x:+d}" if x else "0"
    return f"{x:+.2f}" if _nonzero(x) else "0.00"


def _f(x: float | None) -> str:
    return "–" if x is None else f"{x:.2f}"


def _r(x: int | None) -> str:
    return "–" if x is None else str(x)


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], limit: int = MAX_ROWS) -> Table:
    return Table(tuple(headers), tuple(tuple(r) for r in rows[:limit]), max(0, len(rows) - limit))


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


def blocks(c: Comparison) -> list[Block]:
    A, B = c.label_a, c.label_b
    out: list[Block] = [Heading(1, f"Replay comparison: {A} vs {B}")]
    out.append(Para(f"Run A = {A} (baseline), run B = {B}; deltas are B − A. Records with one key "
                    "emitted more than once count once (the last version, as under compaction)."))
    for k, v in sorted(c.extra.items()):
        out.append(Para(f"{k}: {v}"))
    wc = c.windows_changed
    out.append(Heading(2, "Summary"))
    sa, sb = c.stories
    out.append(_table(("", A, B, "delta"), [
        ("articles", str(c.articles[0]), str(c.articles[1]), _d(c.articles[1] - c.articles[0])),
        ("dead letters", str(c.deadletters[0]), str(c.deadletters[1]), _d(c.deadletters[1] - c.deadletters[0])),
        ("stories", str(sa.stories), str(sb.stories), _d(sb.stories - sa.stories)),
        ("multi-publisher stories", str(sa.multi_publisher), str(sb.multi_publisher),
         _d(sb.multi_publisher - sa.multi_publisher)),
        ("digest windows", str(sum(w.counts_a is not None for w in c.windows)),
         str(sum(w.counts_b is not None for w in c.windows)),
         _d(sum(w.counts_b is not None for w in c.windows) - sum(w.counts_a is not None for w in c.windows))),
    ]))
    out.append(Para(f"{len(wc)} of {len(c.windows)} digest windows differ; "
                    f"{c.only_a} article keys only in A, {c.only_b} only in B; "
                    f"{c.regrouped} articles in both runs are grouped with different articles."))

    out.append(Heading(2, "Dedup dispositions"))
    out.append(_table(("disposition", A, B, "delta"),
                      [(d, str(x), str(y), _d(y - x)) for d, x, y in c.dispositions]))
    if c.transitions:
        out.append(Para("Articles in both runs whose disposition changed:"))
        out.append(_table((f"in {A}", f"in {B}", "articles"), [(x, y, str(n)) for x, y, n in c.transitions]))
    else:
        out.append(Para("No article present in both runs changed disposition."))

    out.append(Heading(2, "Stories"))
    out.append(_table(("story size", A, B, "delta"),
                      [(label, str(x), str(y), _d(y - x))
                       for (_, label), x, y in zip(SIZE_BUCKETS, sa.buckets, sb.buckets, strict=True)]))
    for label, st in ((A, sa), (B, sb)):
        if st.largest:
            out.append(Para(f"Largest stories in {label}:"))
            out.append(_table(("articles", "story", "title"), [(str(n), sid, t) for n, sid, t in st.largest]))

    out.append(Heading(2, "Importance scores"))
    deltas = [ch.delta for ch in c.score_changes]
    out.append(Para(f"{c.score_matched} articles scored in both runs, {c.score_changed} with another score; "
                    f"the largest changes (up to {len(c.score_changes)}):" if c.score_changes else
                    f"{c.score_matched} articles scored in both runs; no score changed."))
    if deltas:
        out.append(_table(("article", "title", A, B, "delta"),
                          [(ch.key, ch.title, _f(ch.a), _f(ch.b), _d(ch.delta)) for ch in c.score_changes]))

    out.append(Heading(2, "Digest windows"))
    if not wc:
        out.append(Para("Every digest window has the same items, ranks, scores and counts."))
        return out
    out.append(_table(
        ("window", "type", f"items {A}", f"items {B}", "added", "removed", "re-ranked", "mean score delta"),
        [(w.window_start, w.digest_type,
          "–" if w.counts_a is None else str(sum(it.rank_a is not None for it in w.items)),
          "–" if w.counts_b is None else str(sum(it.rank_b is not None for it in w.items)),
          str(w.n("added")), str(w.n("removed")), str(w.n("re-ranked")), _d(round(_mean(w.score_deltas), 4)))
         for w in wc], limit=10 * MAX_ROWS))
    for w in wc:
        out.append(Heading(3, f"{w.digest_type} {w.window_start} – {w.window_end}"))
        if w.counts_a is None or w.counts_b is None:
            out.append(Para(f"Only in {A if w.counts_b is None else B}."))
        if w.counts_a != w.counts_b:
            out.append(_table(("", A, B), [
                (name.replace("_", " "), "–" if w.counts_a is None else str(w.counts_a[i]),
                 "–" if w.counts_b is None else str(w.counts_b[i]))
                for i, name in enumerate(WINDOW_COUNTS)]))
        rows = [(it.kind + (" (lead changed)" if it.lead_changed else ""), _r(it.rank_a), _r(it.rank_b),
                 _f(it.score_a), _f(it.score_b), "–" if it.score_delta is None else _d(it.score_delta), it.title)
                for it in w.items if it.kind != "same" or _nonzero(it.score_delta or 0.0) or it.lead_changed]
        if rows:
            out.append(_table(("change", f"rank {A}", f"rank {B}", f"score {A}", f"score {B}", "delta", "item"),
                              rows))
    return out


# ------------------------------------------------------------------------------ rendering
#: characters that could make feed text into Markdown markup (links, emphasis, HTML, table cells)
_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|#])")


def _md_cell(s: str) -> str:
    return _MD_SPECIAL.sub(r"\\\1", " ".join(s.split()))


def to_markdown(c: Comparison) -> str:
    lines: list[str] = []
    for b in blocks(c):
        if isinstance(b, Heading):
            lines += ["#" * b.level + " " + _md_cell(b.text), ""]
        elif isinstance(b, Para):
            lines += [_md_cell(b.text), ""]
        else:
            lines.append("| " + " | ".join(_md_cell(h) for h in b.headers) + " |")
            lines.append("|" + "|".join("---" for _ in b.headers) + "|")
            lines += ["| " + " | ".join(_md_cell(x) for x in row) + " |" for row in b.rows]
            if b.more:
                lines.append(f"\n… {b.more} more rows")
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"


_CSS = (
    "body{font:15px/1.45 system-ui,sans-serif;margin:0;background:#f6f7f9;color:#1d232b}"
    "main{max-width:1100px;margin:0 auto;padding:24px}"
    "h1{font-size:1.6em}h2{margin-top:1.6em;border-bottom:1px solid #ccd;padding-bottom:4px}"
    "h3{font-size:1.05em;margin-top:1.3em}"
    "table{border-collapse:collapse;margin:8px 0 12px;background:#fff}"
    "th,td{border:1px solid #d5d9e0;padding:4px 8px;text-align:left;vertical-align:top}"
    "th{background:#eef1f5}td.n{text-align:right;font-variant-numeric:tabular-nums}"
    ".pos{color:#11762f}.neg{color:#b3261e}p.more{color:#667}"
)


_NUMERIC = re.compile(r"[+-]?\d+(?:\.\d+)?|–")


def _html_cell(s: str) -> str:
    e = html.escape(s)
    numeric = _NUMERIC.fullmatch(s) is not None
    cls = "n" + (" pos" if s.startswith("+") else " neg" if s.startswith("-") else "") if numeric else ""
    return f'<td class="{cls}">{e}</td>' if cls else f"<td>{e}</td>"


def to_html(c: Comparison) -> str:
    """A standalone page (inline CSS, no scripts, everything escaped)."""
    parts = ['<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             f"<title>{html.escape(f'Replay comparison: {c.label_a} vs {c.label_b}')}</title>",
             f"<style>{_CSS}</style></head><body><main>"]
    for b in blocks(c):
        if isinstance(b, Heading):
            parts.append(f"<h{b.level}>{html.escape(b.text)}</h{b.level}>")
        elif isinstance(b, Para):
            parts.append(f"<p>{html.escape(b.text)}</p>")
        else:
            parts.append("<table><thead><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in b.headers)
                         + "</tr></thead><tbody>")
            parts += ["<tr>" + "".join(_html_cell(x) for x in row) + "</tr>" for row in b.rows]
            parts.append("</tbody></table>")
            if b.more:
                parts.append(f'<p class="more">… {b.more} more rows</p>')
    parts.append("</main></body></html>\n")
    return "\n".join(parts)
