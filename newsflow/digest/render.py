"""Render a ``digests.v1`` dict as Markdown or as a standalone HTML page (inline CSS).

Everything taken from the digest is escaped; only ``http(s)`` URLs become links. A digest with
``final: false`` (its window was still open, e.g. at the end of a replay) says "in progress" in
its title, so a partial digest never reads as the whole window.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import cast

from newsflow.core.timeutil import iso_to_ms
from newsflow.digest.record import Digest, FeedHealth, Item, Lead
from newsflow.model.vocab import Trend
from newsflow.text.sentences import split_sentences

SECTION_ORDER = ("Top Stories", "Noteworthy", "Also Mentioned")
FEED_HEALTH = "Feed Health Report"
_SAFE_URL = re.compile(r"^https?://[^\s<>\"']+$", re.IGNORECASE)
_TRENDS = frozenset(Trend)


def as_digest(record: Mapping[str, object]) -> Digest:
    """A ``digests`` record (a dict decoded from the topic, a JSONL line, or the flow's own
    :class:`~newsflow.digest.record.Digest`) as the typed digest rendering reads. Not checked:
    the flow's sink writes only records of ``schemas/digests.v1.json``; rendering still reads
    each field with a default, so a record written before a field existed renders too."""
    return cast(Digest, record)


def safe_url(url: object) -> str | None:
    """The URL if it is a plain http(s) URL, else None (no javascript:, data:, ...)."""
    if isinstance(url, str) and _SAFE_URL.match(url.strip()):
        return url.strip()
    return None


def _fmt_time(iso: str | None) -> str:
    if not iso:
        return ""
    try:
        dt = datetime.fromtimestamp(iso_to_ms(iso) / 1000, tz=UTC)
    except (ValueError, TypeError):
        return str(iso)
    return dt.strftime("%Y-%m-%d %H:%M UTC")


def _fmt_date_range(d: Digest) -> str:
    return f"{_fmt_time(d.get('window_start'))} – {_fmt_time(d.get('window_end'))}"


def progress_note(d: Digest) -> str | None:
    """None for a final digest (``final`` true or absent: records before the field were final);
    else ``in progress``, with ``as of <time>`` when ``generated_at`` is before the window end
    (the event time the flow had reached; a producer that does not know it writes the window
    end, which is not an "as of" worth showing).

    >>> d = {"final": False, "window_end": "2020-05-07T07:00:00Z", "generated_at": "2020-05-06T22:08:00Z"}
    >>> progress_note(d)
    'in progress, as of 2020-05-06 22:08 UTC'
    >>> progress_note({**d, "generated_at": d["window_end"]}), progress_note({**d, "final": True})
    ('in progress', None)
    """
    if d.get("final") is not False:
        return None
    try:
        gen, end = iso_to_ms(str(d.get("generated_at"))), iso_to_ms(str(d.get("window_end")))
    except (ValueError, TypeError, OverflowError):
        return "in progress"
    return f"in progress, as of {_fmt_time(d.get('generated_at'))}" if gen < end else "in progress"


def _title(d: Digest) -> str:
    return str(d.get("title") or str(d.get("digest_type", "digest")).replace("_", " ").title())


#: sections shown even when empty ("Nothing in this section."); others only with items
ALWAYS_SHOWN = ("Top Stories", "Noteworthy")


def _sections(d: Digest) -> list[tuple[str, Sequence[Item]]]:
    by = {s.get("name"): s.get("items") or [] for s in d.get("sections") or []}
    out = [(name, by.get(name, [])) for name in SECTION_ORDER]
    out += [(n, it) for n, it in by.items() if n not in SECTION_ORDER]
    return [(n, it) for n, it in out if it or n in ALWAYS_SHOWN]


def _empty_reason(d: Digest, name: str) -> str | None:
    """Why the digest's section ``name`` is empty (``empty_reason``), if it says."""
    for s in d.get("sections") or []:
        if s.get("name") == name and s.get("empty_reason"):
            return str(s["empty_reason"])
    return None


def plural(n: object, word: str, many: str | None = None) -> str:
    """``1 article``, ``2 articles``, ``0 errors`` (``many``: an irregular plural)."""
    return f"{n} {word if n == 1 else (many or word + 's')}"


def _related_line(it: Item) -> str:
    n = int(it.get("related_count") or 0)
    if n <= 0:
        return ""
    srcs = list(it.get("related_sources") or [])
    shown = ", ".join(srcs[:6]) + (f" and {len(srcs) - 6} more" if len(srcs) > 6 else "")
    return f"{n} more from {shown}" if shown else f"{n} more"  # "1 more", "3 more": no noun


_PLAIN = re.compile(r"\W+")


def _summary(it: Item) -> str:
    """The item's summary, or "" when it only repeats the lead's headline (a feed item without
    a description: the record's summary falls back to the title, which the page shows already).

    >>> _summary({"summary": "Europe reopens: 'No going back.'", "lead": {"title": "Europe reopens - no going back"}})
    ''
    """
    summ = it.get("summary") or ""
    title = (it.get("lead") or {}).get("title") or ""
    if summ and _PLAIN.sub(" ", summ).strip().lower() == _PLAIN.sub(" ", title).strip().lower():
        return ""
    return summ


def _one_line(text: str, max_words: int = 30) -> str:
    """The first sentence (abbreviations do not end it: "a U.S. ban"), at most ``max_words``."""
    sents = split_sentences(text)
    toks = sents[0].split() if sents else []
    return " ".join(toks[:max_words]) + (" …" if len(toks) > max_words else "")


# --------------------------------------------------------------------------------------
# Markdown
# --------------------------------------------------------------------------------------

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+!|<>])")


def md_escape(text: object) -> str:
    return _MD_SPECIAL.sub(r"\\\1", str(text if text is not None else ""))


def _md_link(text: str, url: str | None) -> str:
    u = safe_url(url)
    t = md_escape(text)
    return f"[{t}](<{u.replace('>', '%3E')}>)" if u else t


def to_markdown(record: Mapping[str, object]) -> str:
    d = as_digest(record)
    note = progress_note(d)
    lines = [
        f"# {md_escape(_title(d))}{f' ({md_escape(note)})' if note else ''} — {md_escape(_fmt_date_range(d))}",
        "",
        f"*{plural(d.get('article_count', 0), 'article')} · "
        f"{plural(d.get('duplicates_removed', 0), 'duplicate')} removed · digest `{str(d.get('digest_id', '')).replace('`', '')}`*",
        "",
    ]
    for name, items in _sections(d):
        lines += [f"## {md_escape(name)}", ""]
        if not items:
            why = _empty_reason(d, name)
            lines += [f"_Nothing in this section{': ' + md_escape(why) if why else ''}._", ""]
        for it in items:
            lead = it.get("lead") or {}
            trend = f"**[{it['trend']}]** " if it.get("trend") else ""
            meta = " · ".join(
                x
                for x in (
                    md_escape(lead.get("publisher") or ""),
                    md_escape(lead.get("tier") or ""),
                    md_escape(_fmt_time(lead.get("published_at"))),
                    f"score {it.get('score')}",
                )
                if x
            )
            once = _shown_once(it)
            if name == "Top Stories" and once is not None:  # the label is the lead's headline: say it once
                lines += [f"### {trend}{_md_link(once, lead.get('url'))}", "", meta, ""]
            elif name == "Top Stories":
                lines += [
                    f"### {trend}{md_escape(it.get('label', ''))}",
                    "",
                    f"**{_md_link(lead.get('title', ''), lead.get('url'))}** — {meta}",
                    "",
                ]
            if name == "Top Stories":
                summ = _summary(it)
                if summ:
                    lines += [md_escape(summ), ""]
                rel = _related_line(it)
                if rel:
                    lines += [f"*Related: {md_escape(rel)}*", ""]
            elif name == "Noteworthy":
                summ = _one_line(_summary(it))
                head = (f"**{_md_link(once, lead.get('url'))}**" if once is not None else
                        f"**{md_escape(it.get('label', ''))}**: {_md_link(lead.get('title', ''), lead.get('url'))}")
                lines.append(f"- {trend}{head} — {meta}" + (f"  \n  {md_escape(summ)}" if summ else ""))
            else:
                lines.append(
                    f"- {_md_link(lead.get('title', ''), lead.get('url'))} — "
                    f"{md_escape(lead.get('publisher') or '')}"
                )
        if items and name != "Top Stories":
            lines.append("")
    lines += _md_health(d.get("feed_health") or {})
    return "\n".join(lines).rstrip() + "\n"


def _md_health(h: FeedHealth) -> list[str]:
    rate = h.get("success_rate")
    lines = [
        f"## {FEED_HEALTH}",
        "",
        f"- {plural(h.get('feeds_polled', 0), 'feed')} polled, "
        f"{plural(h.get('successful', 0), 'successful poll')}, {plural(h.get('errors', 0), 'error')}"
        + (f" (success rate {rate * 100:.1f} %)" if isinstance(rate, int | float) else ""),
        f"- {plural(h.get('new_articles', 0), 'new article')}, "
        f"{plural(h.get('duplicates_removed', 0), 'duplicate')} removed",
    ]
    unhealthy = h.get("unhealthy_feeds") or []
    if unhealthy:
        lines.append(f"- Unhealthy feeds: {md_escape(', '.join(map(str, unhealthy[:20])))}")
    for title, vals in (("Emerging", h.get("emerging_topics") or []),
                        ("Declining", h.get("declining_topics") or [])):
        if vals:
            lines.append(f"- {title} topics: {md_escape('; '.join(map(str, vals[:5])))}")
    rows = h.get("feeds") or []
    if rows:
        lines += [
            "",
            "| Feed | Polls | OK | Errors | Success | Last status | Reliability |",
            "| --- | ---: | ---: | ---: | ---: | --- | ---: |",
        ]
        for r in rows[:25]:
            lines.append(
                f"| {md_escape(r.get('feed_id'))}{' ⚠' if r.get('unhealthy') else ''} "
                f"| {r.get('polls', 0)} | {r.get('successful', 0)} | {r.get('errors', 0)} "
                f"| {_pct(r.get('success_rate'))} | {md_escape(r.get('last_status') or '')} "
                f"| {_num(r.get('reliability'))} |"
            )
    lines.append("")
    return lines


def _pct(v: float | None) -> str:
    return f"{v * 100:.0f} %" if isinstance(v, int | float) else "–"


def _num(v: float | None) -> str:
    return f"{v:.2f}" if isinstance(v, int | float) else "–"


# --------------------------------------------------------------------------------------
# HTML
# --------------------------------------------------------------------------------------

_CSS = """
:root{--ink:#1d2430;--muted:#5c6675;--line:#e3e7ee;--bg:#f6f7fb;--card:#fff;--accent:#2956d6}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--ink);font:16px/1.55 -apple-system,BlinkMacSystemFont,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
main{max-width:860px;margin:0 auto;padding:32px 20px 64px}
header.digest{border-bottom:3px solid var(--ink);padding-bottom:14px;margin-bottom:28px}
header.digest h1{font-family:Georgia,"Times New Roman",serif;font-size:2.3rem;margin:0 0 4px;letter-spacing:-.5px}
.meta{color:var(--muted);font-size:.92rem}
.in-progress{display:inline-block;vertical-align:middle;font-family:-apple-system,BlinkMacSystemFont,"Segoe UI",Roboto,Arial,sans-serif;font-size:.95rem;font-weight:700;letter-spacing:0;color:#92400e;background:#fef3c7;border:1px solid #fcd34d;border-radius:6px;padding:2px 8px}
.stats{display:flex;gap:18px;flex-wrap:wrap;margin-top:10px}
.stat{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:6px 12px;font-size:.9rem}
.stat b{font-size:1.1rem}
section{margin:0 0 36px}
section>h2{font-size:1.05rem;text-transform:uppercase;letter-spacing:1.5px;color:var(--muted);border-bottom:1px solid var(--line);padding-bottom:6px}
article.story{background:var(--card);border:1px solid var(--line);border-radius:10px;padding:16px 18px;margin:14px 0;box-shadow:0 1px 2px rgba(20,30,50,.04)}
article.story h3{margin:0 0 6px;font-size:1.2rem}
.lead-title{font-family:Georgia,"Times New Roman",serif;font-size:1.08rem;font-weight:600}
a{color:var(--accent);text-decoration:none}a:hover{text-decoration:underline}
.byline{color:var(--muted);font-size:.86rem;margin:4px 0 8px}
.score{display:inline-block;min-width:2.6em;text-align:center;border-radius:999px;padding:1px 8px;font-size:.8rem;font-weight:700;color:#fff;background:#6b7280}
.score.hi{background:#c2410c}.score.mid{background:#b45309}.score.lo{background:#6b7280}
.tier{display:inline-block;border:1px solid var(--line);border-radius:4px;padding:0 5px;font-size:.75rem}
.badge{display:inline-block;border-radius:4px;padding:1px 7px;font-size:.72rem;font-weight:800;letter-spacing:.6px;margin-right:6px;vertical-align:middle}
.badge.EMERGING{background:#dcfce7;color:#166534}.badge.TRENDING{background:#fee2e2;color:#991b1b}.badge.FADING{background:#e5e7eb;color:#374151}
.summary{margin:6px 0}
.related{color:var(--muted);font-size:.88rem}
.related ul{margin:4px 0 0;padding-left:18px}
ul.compact{list-style:none;padding:0;margin:0}
ul.compact li{padding:8px 0;border-bottom:1px dashed var(--line)}
.label{font-weight:700}
.empty{color:var(--muted);font-style:italic}
table{border-collapse:collapse;width:100%;background:var(--card);font-size:.88rem}
th,td{border-bottom:1px solid var(--line);padding:6px 8px;text-align:left}
th{background:#eef1f7}
td.num{text-align:right;font-variant-numeric:tabular-nums}
tr.bad td{background:#fff4f2}
footer{color:var(--muted);font-size:.8rem;margin-top:40px}
"""


def _e(x: object) -> str:
    return html.escape(str(x if x is not None else ""), quote=True)


def _a(text: object, url: str | None, cls: str = "") -> str:
    u = safe_url(url)
    c = f' class="{cls}"' if cls else ""
    if u:
        return f'<a{c} href="{_e(u)}" rel="noopener noreferrer">{_e(text)}</a>'
    return f"<span{c}>{_e(text)}</span>"


def _score_badge(score: float | None) -> str:
    if not isinstance(score, int | float):
        return ""
    cls = "hi" if score >= 70 else "mid" if score >= 40 else "lo"
    return f'<span class="score {cls}" title="importance">{score:.0f}</span>'


def _trend_badge(trend: str | None) -> str:
    if trend in _TRENDS:
        return f'<span class="badge {trend}">{trend}</span>'
    return ""


def _byline(lead: Lead) -> str:
    parts = [_e(lead.get("publisher") or "")]
    if lead.get("tier"):
        parts.append(f'<span class="tier">{_e(lead["tier"])}</span>')
    parts.append(f'<time datetime="{_e(lead.get("published_at"))}">'
                 f"{_e(_fmt_time(lead.get('published_at')))}</time>")  # fmt: skip
    return " · ".join(p for p in parts if p)


def to_html(record: Mapping[str, object]) -> str:
    d = as_digest(record)
    title, note = _title(d), progress_note(d)
    badge = f' <span class="in-progress" title="the window was still open">{_e(note)}</span>' if note else ""
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)}{f' ({_e(note)})' if note else ''} — {_e(_fmt_date_range(d))}</title>",
        f"<style>{_CSS}</style></head><body><main>",
        '<header class="digest">',
        f"<h1>{_e(title)}{badge}</h1>",
        f'<div class="meta">{_e(_fmt_date_range(d))}</div>',
        '<div class="stats">',
        f'<span class="stat"><b>{_e(d.get("article_count", 0))}</b> {_w(d.get("article_count", 0), "article")}</span>',
        f'<span class="stat"><b>{_e(d.get("duplicates_removed", 0))}</b> {_w(d.get("duplicates_removed", 0), "duplicate")} removed</span>',
        f'<span class="stat"><b>{_e(d.get("cluster_count", ""))}</b> {_w(d.get("cluster_count"), "topic")}</span>'
        if d.get("cluster_count") is not None
        else "",
        "</div></header>",
    ]
    for name, items in _sections(d):
        sid = name.lower().replace(" ", "-")
        out.append(f'<section id="{_e(sid)}" data-section="{_e(name)}"><h2>{_e(name)}</h2>')
        if not items:
            why = _empty_reason(d, name)
            out.append(f'<p class="empty">Nothing in this section{": " + _e(why) if why else ""}.</p>')
        elif name == "Top Stories":
            out += [_html_top(it) for it in items]
        else:
            out.append('<ul class="compact">')
            out += [_html_compact(it, full=name == "Noteworthy") for it in items]
            out.append("</ul>")
        out.append("</section>")
    out.append(_html_health(d.get("feed_health") or {}))
    when = (
        f"{_e(note)}: the window was still open, a later version replaces this digest"
        if note
        else f"generated for event time {_e(_fmt_time(d.get('generated_at')))}"
    )
    out.append(f"<footer>Digest <code>{_e(d.get('digest_id', ''))}</code> · {when} · newsflow</footer>")
    out.append("</main></body></html>")
    return "\n".join(x for x in out if x) + "\n"


def _shown_once(it: Item) -> str | None:
    """The heading of an item whose label only repeats its lead's headline (labels are
    headlines), shown once, as the link: the label when it is the whole headline
    (after "[Entity]: "), the whole headline when the label is its first words (a first clause,
    or a cut ending in "…"); None when the label says something else (both are shown).

    >>> lead = {"title": "Europe slowly reopens as WHO chief warns: 'No going back'"}
    >>> _shown_once({"label": "Europe slowly reopens as WHO chief warns", "lead": lead})
    "Europe slowly reopens as WHO chief warns: 'No going back'"
    >>> _shown_once({"label": "Europe slowly reopens …", "lead": lead}) == lead["title"]
    True
    >>> _shown_once({"label": "Europe slowly", "lead": {"title": "Europe slowlyish"}}) is None
    True
    """
    title = (it.get("lead") or {}).get("title") or ""
    label = it.get("label") or ""
    if not title or not label:
        return None
    if label == title or label.endswith(f": {title}"):
        return label
    head = label.removesuffix("…").rstrip()
    if head and title.startswith(head) and not (title[len(head):][:1].isalnum() or head[-1:] == "-"):
        return title
    return None


def _html_top(it: Item) -> str:
    lead = it.get("lead") or {}
    summ = _summary(it)
    rel = _related_line(it)
    related = ""
    if rel:
        links = "".join(
            f"<li>{_a(r.get('title', ''), r.get('url'))} — {_e(r.get('publisher', ''))}</li>"
            for r in it.get("related") or []
        )
        related = f'<div class="related">Related: {_e(rel)}' + (
            f"<ul>{links}</ul>" if links else ""
        ) + "</div>"  # fmt: skip
    once = _shown_once(it)  # the label is the lead's headline: the heading is its link
    label = _a(once, lead.get("url"), "lead-title") if once is not None else _e(it.get("label", ""))
    return (
        '<article class="story">'
        f"<h3>{_trend_badge(it.get('trend'))}{label} "
        f"{_score_badge(it.get('score'))}</h3>"
        + ("" if once is not None else f"<div>{_a(lead.get('title', ''), lead.get('url'), 'lead-title')}</div>")
        + f'<div class="byline">{_byline(lead)}</div>'
        + (f'<p class="summary">{_e(summ)}</p>' if summ else "")
        + related
        + "</article>"
    )


def _html_compact(it: Item, *, full: bool) -> str:
    lead = it.get("lead") or {}
    if full:
        summ = _one_line(_summary(it))
        rel = _related_line(it)
        once = _shown_once(it)
        if once is not None:
            head = f'<span class="label">{_a(once, lead.get("url"))}</span> {_score_badge(it.get("score"))}'
        else:
            head = (f'<span class="label">{_e(it.get("label", ""))}</span> {_score_badge(it.get("score"))}<br>'
                    f"{_a(lead.get('title', ''), lead.get('url'))}")
        return (
            f'<li>{_trend_badge(it.get("trend"))}{head}'
            f'<div class="byline">{_byline(lead)}'
            + (f" · {_e(rel)}" if rel else "")
            + "</div>"
            + (f'<div class="summary">{_e(summ)}</div>' if summ else "")
            + "</li>"
        )
    return (
        f"<li>{_a(lead.get('title', ''), lead.get('url'))} "
        f'<span class="byline">— {_e(lead.get("publisher", ""))}</span></li>'
    )


def _w(n: object, word: str) -> str:
    return plural(n, word).split(" ", 1)[1]


def _html_health(h: FeedHealth) -> str:
    rate = h.get("success_rate")
    items = [
        f"<li><b>{_e(h.get('feeds_polled', 0))}</b> {_w(h.get('feeds_polled', 0), 'feed')} polled, "
        f"<b>{_e(h.get('successful', 0))}</b> {_w(h.get('successful', 0), 'successful poll')}, "
        f"<b>{_e(h.get('errors', 0))}</b> {_w(h.get('errors', 0), 'error')}"
        + (f" (success rate {_e(f'{rate * 100:.1f}')} %)" if isinstance(rate, int | float) else "")
        + "</li>",
        f"<li><b>{_e(h.get('new_articles', 0))}</b> {_w(h.get('new_articles', 0), 'new article')}, "
        f"<b>{_e(h.get('duplicates_removed', 0))}</b> {_w(h.get('duplicates_removed', 0), 'duplicate')} removed</li>",
    ]
    if h.get("unhealthy_feeds"):
        items.append(
            "<li>Unhealthy feeds: " + _e(", ".join(map(str, h["unhealthy_feeds"][:20]))) + "</li>"
        )
    for title, badge, vals in (
        ("Emerging topics", Trend.EMERGING, h.get("emerging_topics") or []),
        ("Declining topics", Trend.FADING, h.get("declining_topics") or []),
    ):
        if vals:
            items.append(
                f"<li>{_trend_badge(badge)}{title}: {_e('; '.join(map(str, vals[:5])))}</li>"
            )
    rows = h.get("feeds") or []
    table = ""
    if rows:
        body = "".join(
            f'<tr class="{"bad" if r.get("unhealthy") else ""}"><td>{_e(r.get("feed_id"))}</td>'
            f'<td class="num">{_e(r.get("polls", 0))}</td>'
            f'<td class="num">{_e(r.get("successful", 0))}</td>'
            f'<td class="num">{_e(r.get("errors", 0))}</td>'
            f'<td class="num">{_e(_pct(r.get("success_rate")))}</td>'
            f"<td>{_e(r.get('last_status') or '')}</td>"
            f'<td class="num">{_e(_num(r.get("reliability")))}</td></tr>'
            for r in rows[:50]
        )
        table = (
            '<table class="feed-health"><thead><tr><th>Feed</th><th>Polls</th><th>OK</th>'
            "<th>Errors</th><th>Success</th><th>Last status</th><th>Reliability</th></tr>"
            f"</thead><tbody>{body}</tbody></table>"
        )
    return (
        f'<section id="feed-health-report" data-section="{FEED_HEALTH}"><h2>{FEED_HEALTH}</h2>'
        f"<ul>{''.join(items)}</ul>{table}</section>"
    )


def render(d: Mapping[str, object], fmt: str = "md") -> str:
    if fmt == "html":
        return to_html(d)
    if fmt in ("md", "markdown"):
        return to_markdown(d)
    msg = f"unknown format {fmt!r} (md or html)"
    raise ValueError(msg)
