"""``newsflow tail TOPIC [--brokers B] [--from-beginning] [--story ID] [--format json|md]``.

Prints a topic's records as they arrive: one JSON object per line (``--format json``, the
default), or readable Markdown (``--format md``: a digest rendered in full as by ``newsflow
digest render``, an article or a feed-health record as one line, a story as a short block). ``--story ID`` keeps the articles of one story (and the
digests that list it). Stops after ``--max N`` records or ``--timeout S`` seconds without a
record; otherwise follows until Ctrl-C. Reading commits no offsets.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Iterator
from typing import Any, TextIO

import orjson

EPILOG = """examples:
  newsflow tail articles --brokers localhost:29092 --story s1394652666b7b877
  newsflow tail digests --brokers localhost:29092 --from-beginning --format md --max 1
  newsflow tail deadletter --from-beginning --timeout 5 | jq .reason
"""
DEFAULT_BROKERS = "localhost:9092"


def story_ids(rec: dict[str, Any]) -> set[str]:
    """The story ids a record is about: an article's own; every item's in a digest."""
    if rec.get("schema") == "digests" or "sections" in rec:
        return {str(s) for sec in rec.get("sections") or [] for it in sec.get("items") or []
                for s in it.get("story_ids") or []}
    sid = rec.get("story_id")
    return {str(sid)} if sid is not None else set()


def article_line(rec: dict[str, Any]) -> str:
    from newsflow.digest.render import md_escape

    parts = [f"- **{md_escape(rec.get('title') or '(no title)')}**"]
    if rec.get("publisher"):
        parts.append(f"— {md_escape(rec['publisher'])}")
    meta = [str(rec.get(k)) for k in ("published_at", "disposition", "story_id") if rec.get(k)]
    if isinstance(rec.get("importance"), int | float):
        meta.append(f"importance {rec['importance']:.1f}")
    return " ".join(parts) + (f" ({', '.join(meta)})" if meta else "")


def _plural(n: Any, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def story_block(rec: dict[str, Any]) -> str:
    """A ``stories`` record as a heading (its label) and a few lines: state, size, times, lead.

    >>> print(story_block({"story_id": "s1", "status": "expired", "merged_into": "s2", "phase": "developing",
    ...     "importance": 63.41, "peak_importance": 70, "member_count": 2, "publisher_count": 1,
    ...     "publishers": ["example.com"], "tiers": ["T1"], "first_seen": "2026-03-02T06:00:00Z",
    ...     "last_seen": "2026-03-02T07:00:00Z", "updated_at": "2026-03-02T08:00:00Z", "label": "Quake *hits*",
    ...     "lead": {"title": "Quake", "canonical_url": "https://x.example/q", "publisher": "Wire"}}))
    #### Quake \\*hits\\*
    - story `s1`: expired, merged into `s2`; developing; importance 63.4 (peak 70.0)
    - 2 articles from 1 publisher (example.com); tiers T1
    - first seen 2026-03-02T06:00:00Z, last seen 2026-03-02T07:00:00Z (updated 2026-03-02T08:00:00Z)
    - lead: [Quake](<https://x.example/q>) — Wire
    <BLANKLINE>
    """
    from newsflow.digest.render import _md_link, md_escape

    state = [str(rec.get("status") or "?")]
    if rec.get("merged_into"):
        state[0] += f", merged into `{rec['merged_into']}`"
    if rec.get("phase"):
        state.append(str(rec["phase"]))
    if isinstance(rec.get("importance"), int | float):
        peak = rec.get("peak_importance")
        state.append(f"importance {rec['importance']:.1f}"
                     + (f" (peak {peak:.1f})" if isinstance(peak, int | float) else ""))
    size = (f"{_plural(rec.get('member_count', 0), 'article')} from "
            f"{_plural(rec.get('publisher_count', 0), 'publisher')}")
    if rec.get("publishers"):
        size += f" ({md_escape(', '.join(map(str, rec['publishers'])))})"
    if rec.get("tiers"):
        size += f"; tiers {', '.join(map(str, rec['tiers']))}"
    lines = [f"#### {md_escape(rec.get('label') or '(no label)')}",
             f"- story `{rec.get('story_id')}`: {'; '.join(state)}", f"- {size}",
             f"- first seen {rec.get('first_seen')}, last seen {rec.get('last_seen')} (updated {rec.get('updated_at')})"]
    lead = rec.get("lead")
    if isinstance(lead, dict):
        who = f" — {md_escape(lead['publisher'])}" if lead.get("publisher") else ""
        lines.append(f"- lead: {_md_link(lead.get('title') or '(no title)', lead.get('canonical_url'))}{who}")
    return "\n".join(lines) + "\n"


def feed_health_line(rec: dict[str, Any]) -> str:
    """A ``feed-health`` record as one line: the feed, its status (in bold when not ``ok``),
    when and by whom, then what the poll or the parse found.

    >>> feed_health_line({"feed_id": "wire", "status": "http_error", "at": "2026-03-02T07:00:00Z",
    ...     "source": "poller", "http_status": 404, "response_ms": 12, "message": "Not Found",
    ...     "next_poll_at": "2026-03-02T07:05:00Z"})
    '- wire: **http_error** at 2026-03-02T07:00:00Z (poller) — HTTP 404, 12 ms; Not Found; next poll 2026-03-02T07:05:00Z'
    """
    from newsflow.digest.render import md_escape

    status = str(rec.get("status") or "?")
    head = (f"- {md_escape(rec.get('feed_id'))}: {status if status == 'ok' else f'**{status}**'} "
            f"at {rec.get('at')} ({rec.get('source')})")
    found = []
    if rec.get("http_status") is not None:
        found.append(f"HTTP {rec['http_status']}")
    if rec.get("response_ms") is not None:
        found.append(f"{rec['response_ms']} ms")
    if rec.get("items") is not None:
        found.append(_plural(rec["items"], "item"))
    for k in ("new_items", "malformed", "undated"):
        if rec.get(k):
            found.append(f"{rec[k]} {k.replace('_', ' ')}")
    if rec.get("feed_format"):
        found.append(str(rec["feed_format"]))
    parts = [", ".join(found)] if found else []
    for k in ("bozo", "message", "alert"):
        if rec.get(k):
            parts.append(md_escape(rec[k]))
    if rec.get("next_poll_at"):
        parts.append(f"next poll {rec['next_poll_at']}")
    return head + (f" — {'; '.join(parts)}" if parts else "")


def format_record(rec: dict[str, Any], raw: bytes, fmt: str) -> str:
    if fmt == "json":
        return raw.decode("utf-8", "replace").strip()
    schema = rec.get("schema")
    if schema == "digests":
        from newsflow.digest.render import to_markdown

        return to_markdown(rec).rstrip() + "\n\n---"
    if schema == "articles":
        return article_line(rec)
    if schema == "stories":
        return story_block(rec)
    if schema == "feed-health":
        return feed_health_line(rec)
    return "```json\n" + orjson.dumps(rec, option=orjson.OPT_INDENT_2).decode() + "\n```"


def render_stream(values: Iterable[bytes | None], *, fmt: str = "json", story: str | None = None,
                  limit: int | None = None, err: TextIO | None = None) -> Iterator[str]:
    """Message values -> printable records, filtered by story, at most ``limit``."""
    n = 0
    if limit is not None and limit <= 0:
        return
    for raw in values:
        if raw is None:  # a tombstone under compaction
            continue
        try:
            rec = orjson.loads(raw)
        except orjson.JSONDecodeError:
            (err or sys.stderr).write(f"skipped a value that is not JSON ({len(raw)} bytes)\n")
            continue
        if not isinstance(rec, dict):
            continue
        if story is not None and story not in story_ids(rec):
            continue
        n += 1
        yield format_record(rec, raw, fmt)
        if limit is not None and n >= limit:
            return


def cmd_tail(args: argparse.Namespace) -> int:
    from newsflow.connectors.consumer import TopicError, open_topic, read_messages

    brokers = [b.strip() for b in args.brokers.split(",") if b.strip()]
    try:
        consumer = open_topic(brokers, args.topic, from_beginning=args.from_beginning,
                              timeout_s=args.connect_timeout)
    except TopicError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"tailing {args.topic} at {','.join(brokers)}"
          f"{' from the beginning' if args.from_beginning else ''} (Ctrl-C to stop)", file=sys.stderr,
          flush=True)
    out = sys.stdout
    try:
        values = (m.value for m in read_messages(consumer, idle_timeout_s=args.timeout))
        for line in render_stream(values, fmt=args.format, story=args.story, limit=args.max):
            out.write(line + "\n")
            out.flush()
    except TopicError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `| head`
        return 0
    finally:
        consumer.close()
    return 0


def register(subparsers: Any) -> None:
    """Add ``tail`` to the ``newsflow`` command."""
    p = subparsers.add_parser("tail", help="print a topic's records as they arrive (JSON lines or Markdown)",
                              description=__doc__.split("\n\n")[1], epilog=EPILOG,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("topic", help="topic name, e.g. articles, digests, feed-health, deadletter, feeds.raw")
    p.add_argument("--brokers", default=DEFAULT_BROKERS, help=f"bootstrap servers (default {DEFAULT_BROKERS})")
    p.add_argument("--from-beginning", action="store_true", help="start at the oldest record, not at the end")
    p.add_argument("--story", metavar="ID", help="only this story's articles (and the digests listing it)")
    p.add_argument("--format", choices=("json", "md"), default="json",
                   help="json: one record per line (default); md: digests rendered, articles, stories "
                        "and feed health readable")
    p.add_argument("--max", type=int, metavar="N", help="stop after N records")
    p.add_argument("--timeout", type=float, metavar="S", help="stop after S seconds without a record")
    p.add_argument("--connect-timeout", type=float, default=10.0, metavar="S",
                   help="give up when the broker does not answer within S seconds (default 10)")
    p.set_defaults(func=cmd_tail)
