"""The report of a :class:`~newsflow.replay.compare.Comparison`: Markdown and a standalone HTML page.

Both are rendered from one list of blocks, so they say the same thing, reader's questions first:
what changed for a reader (stories, briefs, articles, dispositions, windows, and why digests are
empty), then the counts per topic, then one section per subject. The HTML page has a table of
contents whose links are the sections' anchors, charts drawn here as inline SVG (no script),
and long lists collapsed in ``<details>``; its size is bounded (at most :data:`DETAIL_GROUPS`
windows in detail, :data:`MAX_ROWS` rows per table), whatever the archive. Every string from a
feed is escaped (HTML, and Markdown markup).
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass

from newsflow.replay.compare import BRIEF_TOP, SIZE_BUCKETS, Comparison, DigestHealth
from newsflow.replay.windows import WindowGroup, nonzero

#: rows shown per table before "… N more"
MAX_ROWS = 50
#: changed window groups listed in the windows table, and shown item by item
WINDOW_ROWS = 200
DETAIL_GROUPS = 30
DETAIL_ROWS = 20
COLORS = ("#2563c9", "#d9480f")


# ------------------------------------------------------------------------------ blocks
@dataclass(frozen=True, slots=True)
class Heading:
    level: int
    text: str

    @property
    def anchor(self) -> str:
        return slug(self.text)


@dataclass(frozen=True, slots=True)
class Para:
    text: str


@dataclass(frozen=True, slots=True)
class Bullets:
    items: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Table:
    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    more: int = 0  # rows left off


@dataclass(frozen=True, slots=True)
class Chart:
    """A chart of one or two series over shared labels: ``bars`` (grouped) or ``line``."""

    kind: str
    title: str
    labels: tuple[str, ...]
    series: tuple[tuple[str, tuple[int, ...]], ...]


@dataclass(frozen=True, slots=True)
class Details:
    """Blocks a reader opens when wanted (collapsed in HTML)."""

    summary: str
    blocks: tuple[Block, ...]


Block = Heading | Para | Bullets | Table | Chart | Details


def slug(text: str) -> str:
    """An anchor from a heading (GitHub's rule: lower case, punctuation dropped, spaces -> -).

    >>> slug("What changed for a reader")
    'what-changed-for-a-reader'
    """
    return re.sub(r"[^\w\- ]", "", text.lower()).strip().replace(" ", "-")


def _d(x: float | int) -> str:
    if isinstance(x, int):
        return f"{x:+d}" if x else "0"
    return f"{x:+.2f}" if nonzero(x) else "0.00"


def _f(x: float | None) -> str:
    return "–" if x is None else f"{x:.2f}"


def _r(x: int | None) -> str:
    return "–" if x is None else str(x)


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], limit: int = MAX_ROWS) -> Table:
    return Table(tuple(headers), tuple(tuple(r) for r in rows[:limit]), max(0, len(rows) - limit))


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


def _n(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _arrow(a: int, b: int) -> str:
    return f"{a} → {b} ({_d(b - a)})"


# ------------------------------------------------------------------------------ sections
def _empty_lines(label: str, health: Sequence[DigestHealth], top: float, lo: float) -> list[str]:
    out = []
    for h in health:
        if not h.empty:
            continue
        why = []
        if h.empty_no_articles:
            why.append(f"{h.empty_no_articles} had no article in their {h.window_minutes}-minute window")
        if h.empty_below_min:
            why.append(f"{h.empty_below_min} had articles but none scored at least {lo:g} "
                       "(digests.min_importance)")
        rest = h.empty - h.empty_no_articles - h.empty_below_min
        if rest:
            why.append(f"{rest} had articles above it that were left out")
        out.append(f"{label}: {h.empty} of {h.digests} {h.digest_type} digests are empty: {'; '.join(why)}.")
    n = sum(h.digests for h in health)
    top_empty = sum(h.top_empty for h in health)
    scores = [h.best_score for h in health if h.best_score is not None]
    best = max(scores) if scores else None
    if n and top_empty:
        best_s = "no digest has an item" if best is None else f"the best item score is {best:.2f}"
        cmp_s = "" if best is None else (" <" if best < top else " ≥")
        share = f"all {n}" if top_empty == n else f"{top_empty} of {n}"
        out.append(f"{label}: Top Stories is empty in {share} digests: {best_s}{cmp_s} "
                   f"the threshold {top:g} (digests.top_threshold).")
    return out


def _reader(c: Comparison) -> list[Block]:
    A, B = c.label_a, c.label_b
    sa, sb = c.stories
    sc = c.story_changes
    lines = [f"Stories: {_arrow(sa.stories, sb.stories)}; in {B}: {sc.gained} gained, {sc.lost} lost, "
             f"{sc.merged} merged (articles of several stories of {A}), {sc.split} split, {sc.same} unchanged."]
    kinds = sorted({b.digest_type for b in c.briefs})
    lines.append(f"Briefs: the top {BRIEF_TOP} items changed in {len(c.briefs)} of {c.briefs_compared} "
                 f"brief windows{' (' + ', '.join(kinds) + ')' if kinds else ''}.")
    t = {name: (x, y) for name, x, y in c.topics}
    arts = t.get("articles")
    if arts is not None and arts[0] is not None and arts[1] is not None:
        ra, rb = arts[0], arts[1]
        lines.append(f"Articles: {_arrow(ra.keys, rb.keys)} distinct ({c.only_a} only in {A}, {c.only_b} only in "
                     f"{B}); article records written: {_arrow(ra.records, rb.records)}, of which "
                     f"{ra.records - ra.keys} and {rb.records - rb.keys} repeat a key (revisions, re-emits).")
    else:
        lines.append(f"Articles: {_arrow(*c.articles)} distinct ({c.only_a} only in {A}, {c.only_b} only in {B}).")
    moved = sorted(c.disposition_records, key=lambda t: (-abs(t[2] - t[1]), t[0]))[:3]
    if moved:
        lines.append("Dispositions (records): " + "; ".join(f"{d} {_arrow(x, y)}" for d, x, y in moved)
                     + f"; {sum(n for _, _, n in c.transitions)} articles in both runs moved.")
    wc = c.windows_changed
    lines.append(f"Digest windows (matched by the time they cover): {len(wc)} of {len(c.windows)} "
                 f"differ; {sum(w.n('added') for w in wc)} items added, {sum(w.n('removed') for w in wc)} "
                 f"removed, {sum(w.n('re-ranked') for w in wc)} re-ranked.")
    (top_a, lo_a), (top_b, lo_b) = c.thresholds
    lines += _empty_lines(A, c.health[0], top_a, lo_a) + _empty_lines(B, c.health[1], top_b, lo_b)
    return [Heading(2, "What changed for a reader"), Bullets(tuple(lines))]


def _topics(c: Comparison) -> list[Block]:
    A, B = c.label_a, c.label_b
    rows = []
    for name, x, y in c.topics:
        rows.append((name, _r(x.records if x else None), _r(x.keys if x else None),
                     _r(y.records if y else None), _r(y.keys if y else None),
                     _d((y.records if y else 0) - (x.records if x else 0)),
                     _d((y.keys if y else 0) - (x.keys if x else 0))))
    return [Heading(2, "Records and keys per topic"),
            Para("Records: what a consumer of the topic receives. Keys: distinct idempotent keys (what "
                 "a compacted topic keeps; a key written again is a revision or a re-emit)."),
            _table(("topic", f"records {A}", f"keys {A}", f"records {B}", f"keys {B}", "Δ records", "Δ keys"),
                   rows)]


def _stories(c: Comparison) -> list[Block]:
    A, B = c.label_a, c.label_b
    sa, sb = c.stories
    sc = c.story_changes
    out: list[Block] = [Heading(2, "Stories")]
    out.append(Para(f"Stories are matched through the articles they share (by key). Gained: a story of {B} "
                    f"none of whose articles is in {A}; lost: the reverse; merged: a story of {B} with "
                    f"articles of several stories of {A}; split: a story of {A} whose articles are in "
                    f"several stories of {B}."))
    out.append(_table(("", A, B, "delta"), [
        ("stories", str(sa.stories), str(sb.stories), _d(sb.stories - sa.stories)),
        ("multi-publisher stories", str(sa.multi_publisher), str(sb.multi_publisher),
         _d(sb.multi_publisher - sa.multi_publisher)),
        *[(f"stories of {label} article{'' if label == '1' else 's'}", str(x), str(y), _d(y - x))
          for (_, label), x, y in zip(SIZE_BUCKETS, sa.buckets, sb.buckets, strict=True)],
    ]))
    out.append(Para(f"{sc.gained} gained, {sc.lost} lost, {sc.merged} merged, {sc.split} split, {sc.same} with "
                    f"the same articles; {c.regrouped} articles in both runs are grouped with different articles."))
    if sc.examples:
        out.append(Details(f"The largest merges and splits ({len(sc.examples)})", (
            _table(("change", "articles", "stories of the other run", "story", "lead title"),
                   [(e.kind, str(e.size), str(e.parts), e.story, e.title) for e in sc.examples]),)))
    for label, st in ((A, sa), (B, sb)):
        if st.largest:
            out.append(Details(f"Largest stories in {label}", (
                _table(("articles", "story", "title"), [(str(n), sid, t) for n, sid, t in st.largest]),)))
    return out


def _briefs(c: Comparison) -> list[Block]:
    out: list[Block] = [Heading(2, "Briefs")]
    if not c.briefs_compared:
        out.append(Para("No brief window (a digest type other than rolling) is in both runs."))
        return out
    out.append(Para(f"Brief windows whose top {BRIEF_TOP} items differ: {len(c.briefs)} of {c.briefs_compared} "
                    f"(entered: in the top {BRIEF_TOP} of {c.label_b}, not in that of {c.label_a}; left: the reverse)."))
    rows = [(b.start, b.digest_type, " · ".join(b.entered) or "–", " · ".join(b.left) or "–") for b in c.briefs]
    head = ("window", "type", "entered", "left")
    out.append(_table(head, rows[:20], limit=20))
    if len(rows) > 20:
        out.append(Details(f"{len(rows) - 20} more brief windows", (_table(head, rows[20:]),)))
    return out


def _dispositions(c: Comparison) -> list[Block]:
    A, B = c.label_a, c.label_b
    out: list[Block] = [Heading(2, "Dedup dispositions")]
    arts = {d: (x, y) for d, x, y in c.dispositions}
    names = sorted({d for d, _, _ in c.disposition_records} | set(arts))
    recs = {d: (x, y) for d, x, y in c.disposition_records}
    if names:
        out.append(Chart("bars", "Article records per disposition", tuple(names),
                         ((A, tuple(recs.get(d, (0, 0))[0] for d in names)),
                          (B, tuple(recs.get(d, (0, 0))[1] for d in names)))))
    out.append(Para("Records: every article record written. Articles: distinct keys, by their last version."))
    out.append(_table(("disposition", f"records {A}", f"records {B}", "Δ", f"articles {A}", f"articles {B}", "Δ "),
                      [(d, str(recs.get(d, (0, 0))[0]), str(recs.get(d, (0, 0))[1]),
                        _d(recs.get(d, (0, 0))[1] - recs.get(d, (0, 0))[0]),
                        str(arts.get(d, (0, 0))[0]), str(arts.get(d, (0, 0))[1]),
                        _d(arts.get(d, (0, 0))[1] - arts.get(d, (0, 0))[0])) for d in names]))
    if c.transitions:
        out.append(Para("Articles in both runs whose disposition changed:"))
        out.append(_table((f"in {A}", f"in {B}", "articles"), [(x, y, str(n)) for x, y, n in c.transitions]))
    else:
        out.append(Para("No article present in both runs changed disposition."))
    return out


def _timeline(c: Comparison) -> list[Block]:
    if not c.per_day:
        return []
    return [Heading(2, "Article records per day"),
            Chart("line", "Article records per day (by fetch time)", tuple(d for d, _, _ in c.per_day),
                  ((c.label_a, tuple(x for _, x, _ in c.per_day)), (c.label_b, tuple(y for _, _, y in c.per_day))))]


def _health_rows(label: str, hs: Sequence[DigestHealth]) -> list[tuple[str, ...]]:
    return [(label, h.digest_type, str(h.digests), f"{h.window_minutes}", str(h.empty), str(h.empty_no_articles),
             str(h.empty_below_min), str(h.top_empty), _f(h.best_score)) for h in hs]


def _group_label(g: WindowGroup) -> str:
    return f"{g.digest_type} {g.start} – {g.end}"


def _windows(c: Comparison) -> list[Block]:
    A, B = c.label_a, c.label_b
    out: list[Block] = [Heading(2, "Digest windows")]
    out.append(Para("Windows are matched by the time they cover: per digest type, each window of the run "
                    "with the shorter windows goes with the other run's window it overlaps most, so a "
                    "180-minute window is compared with the 60-minute windows inside it. An item is "
                    "counted once per group, at its best rank (over all sections)."))
    kinds = sorted({g.digest_type for g in c.windows})
    rows = []
    for k in kinds:
        gs = [g for g in c.windows if g.digest_type == k]
        ch = [g for g in gs if g.changed]
        rows.append((k, str(len({i for g in gs for i in g.ids_a})), str(len({i for g in gs for i in g.ids_b})),
                     str(len(gs)), str(len(ch)), str(sum(g.n("added") for g in ch)),
                     str(sum(g.n("removed") for g in ch)), str(sum(g.n("re-ranked") for g in ch))))
    out.append(_table(("type", f"windows {A}", f"windows {B}", "matched groups", "differ", "items added",
                       "removed", "re-ranked"), rows))
    out.append(Para("Digests per type, empty ones and why, and Top Stories (the items scoring at least "
                    "digests.top_threshold):"))
    out.append(_table(("run", "type", "digests", "window (min)", "empty", "no article", "none above min",
                       "Top Stories empty", "best item score"),
                      _health_rows(A, c.health[0]) + _health_rows(B, c.health[1])))
    wc = c.windows_changed
    if not wc:
        out.append(Para("Every digest window has the same items, ranks, scores and counts."))
        return out
    ranked = sorted(wc, key=lambda g: (-g.weight, g.start, g.digest_type))
    shown = sorted(ranked[:WINDOW_ROWS], key=lambda g: (g.start, g.digest_type, g.end))
    out.append(Details(f"Changed windows ({len(shown)} most changed of {len(wc)}, by time)", (_table(
        ("window", "type", f"windows {A}", f"windows {B}", f"items {A}", f"items {B}", "added", "removed",
         "re-ranked", "mean score delta"),
        [(g.start, g.digest_type, str(len(g.ids_a)), str(len(g.ids_b)),
          "–" if g.counts_a is None else str(g.items_a), "–" if g.counts_b is None else str(g.items_b),
          str(g.n("added")), str(g.n("removed")), str(g.n("re-ranked")), _d(round(_mean(g.score_deltas), 4)))
         for g in shown], limit=WINDOW_ROWS),)))
    out.append(Heading(3, f"The {min(DETAIL_GROUPS, len(ranked))} most changed windows"))
    for g in ranked[:DETAIL_GROUPS]:
        blocks: list[Block] = []
        if g.counts_a is None or g.counts_b is None:
            blocks.append(Para(f"Only in {A if g.counts_b is None else B}."))
        blocks.append(Para(f"{A}: {', '.join(g.ids_a) or '–'}; {B}: {', '.join(g.ids_b) or '–'}"))
        if g.counts_a != g.counts_b:
            blocks.append(_table(("", A, B), [
                (name.replace("_", " "), "–" if g.counts_a is None else str(g.counts_a[i]),
                 "–" if g.counts_b is None else str(g.counts_b[i]))
                for i, name in enumerate(("article_count", "selected_count", "cluster_count",
                                          "duplicates_removed"))]))
        rows2 = [(it.kind + (" (lead changed)" if it.lead_changed else ""), _r(it.rank_a), _r(it.rank_b),
                  _f(it.score_a), _f(it.score_b), "–" if it.score_delta is None else _d(it.score_delta), it.title)
                 for it in g.items if it.shown]
        if rows2:
            blocks.append(_table(("change", f"rank {A}", f"rank {B}", f"score {A}", f"score {B}", "delta", "item"),
                                 rows2, limit=DETAIL_ROWS))
        out.append(Details(f"{_group_label(g)}: {g.n('added')} added, {g.n('removed')} removed, "
                           f"{g.n('re-ranked')} re-ranked", tuple(blocks)))
    return out


def _importance(c: Comparison) -> list[Block]:
    A, B = c.label_a, c.label_b
    out: list[Block] = [Heading(2, "Importance scores")]
    if not c.score_changes:
        out.append(Para(f"{c.score_matched} articles scored in both runs; no score changed."))
        return out
    out.append(Para(f"{c.score_matched} articles scored in both runs, {c.score_changed} with another score."))
    out.append(Details(f"The largest changes ({len(c.score_changes)})", (
        _table(("article", "title", A, B, "delta"),
               [(ch.key, ch.title, _f(ch.a), _f(ch.b), _d(ch.delta)) for ch in c.score_changes]),)))
    return out


def blocks(c: Comparison) -> list[Block]:
    A, B = c.label_a, c.label_b
    out: list[Block] = [Heading(1, f"Replay comparison: {A} vs {B}")]
    out.append(Para(f"Run A = {A} (baseline), run B = {B}; deltas are B − A. Where things are compared "
                    "(articles, stories, windows), a key written more than once counts once: its last "
                    "version, as a compacted topic keeps it."))
    for k, v in sorted(c.extra.items()):
        out.append(Para(f"{k}: {v}"))
    for section in (_reader, _topics, _stories, _briefs, _dispositions, _timeline, _windows, _importance):
        out += section(c)
    return out


# ------------------------------------------------------------------------------ Markdown
#: characters that could make feed text into Markdown markup (links, emphasis, HTML, table cells)
_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|#])")


def _md_cell(s: str) -> str:
    return _MD_SPECIAL.sub(r"\\\1", " ".join(s.split()))


def _md(bs: Sequence[Block], lines: list[str]) -> None:
    for b in bs:
        if isinstance(b, Heading):
            lines += ["#" * b.level + " " + _md_cell(b.text), ""]
        elif isinstance(b, Para):
            lines += [_md_cell(b.text), ""]
        elif isinstance(b, Bullets):
            lines += [f"- {_md_cell(x)}" for x in b.items] + [""]
        elif isinstance(b, Table):
            lines.append("| " + " | ".join(_md_cell(h) for h in b.headers) + " |")
            lines.append("|" + "|".join("---" for _ in b.headers) + "|")
            lines += ["| " + " | ".join(_md_cell(x) for x in row) + " |" for row in b.rows]
            if b.more:
                lines.append(f"\n… {b.more} more rows")
            lines.append("")
        elif isinstance(b, Chart):
            totals = "; ".join(f"{_md_cell(name)}: {sum(v)}" for name, v in b.series)
            if b.kind == "bars":
                lines.append(f"{_md_cell(b.title)} (chart in the HTML report): " + "; ".join(
                    f"{_md_cell(lab)} " + " vs ".join(str(v[i]) for _, v in b.series) for i, lab in enumerate(b.labels)))
            else:
                lines.append(f"{_md_cell(b.title)} (chart in the HTML report): {len(b.labels)} days, "
                             f"{_md_cell(b.labels[0])} to {_md_cell(b.labels[-1])}; totals {totals}")
            lines.append("")
        else:
            lines += [f"**{_md_cell(b.summary)}**", ""]
            _md(b.blocks, lines)


def to_markdown(c: Comparison) -> str:
    bs = blocks(c)
    lines: list[str] = []
    _md(bs[:1], lines)
    lines += [f"- [{h.text}](#{h.anchor})" for h in bs if isinstance(h, Heading) and h.level == 2] + [""]
    _md(bs[1:], lines)
    return "\n".join(lines).rstrip() + "\n"


# ------------------------------------------------------------------------------ HTML
_CSS = (
    "body{font:15px/1.45 system-ui,sans-serif;margin:0;background:#f6f7f9;color:#1d232b}"
    "main{max-width:1100px;margin:0 auto;padding:24px}"
    "h1{font-size:1.6em}h2{margin-top:1.6em;border-bottom:1px solid #ccd;padding-bottom:4px}"
    "h3{font-size:1.05em;margin-top:1.3em}"
    "nav.toc{background:#fff;border:1px solid #d5d9e0;padding:8px 16px;display:inline-block}"
    "nav.toc ol{margin:4px 0;padding-left:20px}"
    "ul.reader li{margin:4px 0}"
    "table{border-collapse:collapse;margin:8px 0 12px;background:#fff}"
    "th,td{border:1px solid #d5d9e0;padding:4px 8px;text-align:left;vertical-align:top}"
    "th{background:#eef1f5}td.n{text-align:right;font-variant-numeric:tabular-nums}"
    ".pos{color:#11762f}.neg{color:#b3261e}p.more{color:#667}"
    "details{margin:6px 0;background:#fff;border:1px solid #d5d9e0;padding:4px 10px}"
    "summary{cursor:pointer;font-weight:600}"
    "figure{margin:8px 0;background:#fff;border:1px solid #d5d9e0;padding:8px;display:inline-block}"
    "figcaption{font-weight:600;margin-bottom:4px}"
)
_NUMERIC = re.compile(r"[+-]?\d+(?:\.\d+)?|–")


def _e(s: str) -> str:
    return html.escape(s, quote=True)


def _html_cell(s: str) -> str:
    numeric = _NUMERIC.fullmatch(s) is not None
    cls = "n" + (" pos" if s.startswith("+") else " neg" if s.startswith("-") else "") if numeric else ""
    return f'<td class="{cls}">{_e(s)}</td>' if cls else f"<td>{_e(s)}</td>"


def _nice_max(v: int) -> int:
    """The axis top: a round number at least ``v`` (1, 1.2, 1.6, 2, 3, 4, 5, 6 or 8 times a
    power of ten, so that quarters of it are round too).

    >>> _nice_max(7054), _nice_max(126), _nice_max(3)
    (8000, 160, 3)
    """
    m = 1
    while True:
        for f in (1, 1.2, 1.6, 2, 3, 4, 5, 6, 8):
            if f * m >= v:
                return int(f * m)
        m *= 10


def svg_chart(ch: Chart, width: int = 900, height: int = 260) -> str:
    """The chart as inline SVG: axes, a legend, values as ``<title>`` tooltips; every label escaped."""
    left, right, top, bottom = 56, 16, 36, 44
    w, h = width - left - right, height - top - bottom
    ymax = _nice_max(max((max(v, default=0) for _, v in ch.series), default=0) or 1)
    n = len(ch.labels)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img" aria-label="{_e(ch.title)}">']
    parts.append(f'<rect x="0" y="0" width="{width}" height="{height}" fill="#fff"/>')
    for i in range(5):  # gridlines and y labels
        y = top + h - h * i / 4
        parts.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + w}" y2="{y:.1f}" stroke="#e3e6ea"/>')
        parts.append(f'<text x="{left - 6}" y="{y + 4:.1f}" font-size="11" text-anchor="end">'
                     f"{ymax * i // 4}</text>")
    parts.append(f'<line x1="{left}" y1="{top + h}" x2="{left + w}" y2="{top + h}" stroke="#889"/>')

    def y_of(v: int) -> float:
        return top + h - h * v / ymax

    if ch.kind == "bars":
        slot = w / max(n, 1)
        bw = slot * 0.8 / max(len(ch.series), 1)
        for i, lab in enumerate(ch.labels):
            x0 = left + slot * i + slot * 0.1
            for j, (name, vals) in enumerate(ch.series):
                v = vals[i]
                parts.append(f'<rect x="{x0 + j * bw:.1f}" y="{y_of(v):.1f}" width="{bw - 2:.1f}" '
                             f'height="{top + h - y_of(v):.1f}" fill="{COLORS[j % 2]}">'
                             f"<title>{_e(name)}: {_e(lab)} {v}</title></rect>")
                parts.append(f'<text x="{x0 + j * bw + bw / 2 - 1:.1f}" y="{y_of(v) - 3:.1f}" font-size="10" '
                             f'text-anchor="middle">{v}</text>')
            parts.append(f'<text x="{x0 + slot * 0.4:.1f}" y="{top + h + 16}" font-size="11" '
                         f'text-anchor="middle">{_e(lab)}</text>')
    else:
        def x_of(i: int) -> float:
            return left + (w * i / (n - 1) if n > 1 else w / 2)

        for j, (name, vals) in enumerate(ch.series):
            pts = " ".join(f"{x_of(i):.1f},{y_of(v):.1f}" for i, v in enumerate(vals))
            parts.append(f'<polyline fill="none" stroke="{COLORS[j % 2]}" stroke-width="1.6" points="{pts}">'
                         f"<title>{_e(name)}</title></polyline>")
        for i in sorted({0, n // 2, n - 1}) if n else ():
            anchor = "start" if i == 0 and n > 1 else "end" if i == n - 1 and n > 1 else "middle"
            parts.append(f'<text x="{x_of(i):.1f}" y="{top + h + 16}" font-size="11" text-anchor="{anchor}">'
                         f"{_e(ch.labels[i])}</text>")
    for j, (name, vals) in enumerate(ch.series):  # legend
        x = left + 8 + j * 220
        parts.append(f'<rect x="{x}" y="8" width="12" height="12" fill="{COLORS[j % 2]}"/>')
        parts.append(f'<text x="{x + 16}" y="18" font-size="12">{_e(name)} ({sum(vals)})</text>')
    parts.append("</svg>")
    return "".join(parts)


def _html(bs: Sequence[Block], parts: list[str]) -> None:
    for b in bs:
        if isinstance(b, Heading):
            parts.append(f'<h{b.level} id="{_e(b.anchor)}">{_e(b.text)}</h{b.level}>')
        elif isinstance(b, Para):
            parts.append(f"<p>{_e(b.text)}</p>")
        elif isinstance(b, Bullets):
            parts.append('<ul class="reader">' + "".join(f"<li>{_e(x)}</li>" for x in b.items) + "</ul>")
        elif isinstance(b, Table):
            parts.append("<table><thead><tr>" + "".join(f"<th>{_e(h)}</th>" for h in b.headers)
                         + "</tr></thead><tbody>")
            parts += ["<tr>" + "".join(_html_cell(x) for x in row) + "</tr>" for row in b.rows]
            parts.append("</tbody></table>")
            if b.more:
                parts.append(f'<p class="more">… {b.more} more rows</p>')
        elif isinstance(b, Chart):
            parts.append(f"<figure><figcaption>{_e(b.title)}</figcaption>{svg_chart(b)}</figure>")
        else:
            parts.append(f"<details><summary>{_e(b.summary)}</summary>")
            _html(b.blocks, parts)
            parts.append("</details>")


def to_html(c: Comparison) -> str:
    """A standalone page (inline CSS and SVG, no scripts, everything escaped)."""
    bs = blocks(c)
    parts = ['<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             f"<title>{_e(f'Replay comparison: {c.label_a} vs {c.label_b}')}</title>",
             f"<style>{_CSS}</style></head><body><main>"]
    _html(bs[:1], parts)
    parts.append('<nav class="toc" id="contents"><strong>Contents</strong><ol>'
                 + "".join(f'<li><a href="#{_e(h.anchor)}">{_e(h.text)}</a></li>'
                           for h in bs if isinstance(h, Heading) and h.level == 2) + "</ol></nav>")
    _html(bs[1:], parts)
    parts.append("</main></body></html>\n")
    return "\n".join(parts)
