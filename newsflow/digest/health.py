"""The digest's Feed Health Report: per-feed counters accumulated from ``feed-health`` records.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from newsflow.digest.record import FeedHealth, FeedRow
from newsflow.model.vocab import UNHEALTHY_STATUSES

# --------------------------------------------------------------------------------------
# Feed health summary
# --------------------------------------------------------------------------------------


@dataclass(slots=True)
class _FeedStat:
    polls: int = 0
    ok: int = 0
    errors: int = 0
    last_at: str = ""
    last_status: str = ""
    reliability: float | None = None
    alert: str | None = None


#: what a digest reads of a ``feed-health`` record: the report (:class:`FeedHealthAccumulator`),
#: the window it falls in (``at``) and the feed's reliability (``StoryCoverage.add_health``)
REPORT_FIELDS = ("record_id", "feed_id", "status", "source", "at", "reliability", "alert")


def report_view(rec: Mapping[str, object]) -> dict[str, object]:
    """The fields of a ``feed-health`` record a digest reads (those it has): each digest step
    keeps a week of them, one per poll, and the whole record (HTTP details, counts, timings)
    was most of the daily and rolling steps' state (``bench/state_bytes.py``).

    >>> report_view({"feed_id": "f", "at": "2026-03-09T07:00:00Z", "status": "ok", "http_status": 200, "etag": "x"})
    {'feed_id': 'f', 'status': 'ok', 'at': '2026-03-09T07:00:00Z'}
    """
    return {k: rec[k] for k in REPORT_FIELDS if k in rec}


class FeedHealthAccumulator:
    """Folds ``feed-health`` records (poller polls) of a window into the digest's report."""

    def __init__(self) -> None:
        self._feeds: dict[str, _FeedStat] = {}
        self._seen: set[str] = set()

    def add(self, rec: Mapping[str, object]) -> None:
        rid = str(rec.get("record_id") or "")
        if rid:
            if rid in self._seen:  # at-least-once re-emits
                return
            self._seen.add(rid)
        fid = str(rec.get("feed_id") or "")
        if not fid:
            return
        st = self._feeds.setdefault(fid, _FeedStat())
        status = str(rec.get("status") or "")
        # a poll seen by the poller, or the same poll seen by the flow (every poll reaches
        # feeds.raw, a failed one without a body: a record of either kind is one poll)
        if rec.get("source", "poller") in ("poller", "flow"):
            st.polls += 1
            if status in UNHEALTHY_STATUSES:
                st.errors += 1
            else:
                st.ok += 1
        at = str(rec.get("at") or "")
        if (at, status) >= (st.last_at, st.last_status):
            st.last_at, st.last_status = at, status
            rel = rec.get("reliability")
            if isinstance(rel, int | float):  # (a number or null: schemas/feed-health.v1.json)
                st.reliability = float(rel)
            alert = rec.get("alert")
            st.alert = None if alert is None else str(alert)

    def summary(self, max_rows: int = 50) -> FeedHealth:
        polls = sum(s.polls for s in self._feeds.values())
        ok = sum(s.ok for s in self._feeds.values())
        errors = sum(s.errors for s in self._feeds.values())
        rows: list[FeedRow] = []
        for fid, s in sorted(self._feeds.items()):
            rate = s.ok / s.polls if s.polls else None
            unhealthy = (
                s.last_status in UNHEALTHY_STATUSES
                or bool(s.alert)
                or (s.reliability is not None and s.reliability < 0.5)
                or (rate is not None and s.polls >= 3 and rate < 0.5)
            )
            rows.append(
                {
                    "feed_id": fid,
                    "polls": s.polls,
                    "successful": s.ok,
                    "errors": s.errors,
                    "success_rate": round(rate, 4) if rate is not None else None,
                    "last_status": s.last_status or None,
                    "reliability": s.reliability,
                    "alert": s.alert,
                    "unhealthy": unhealthy,
                }
            )
        rows.sort(
            key=lambda r: (
                not r["unhealthy"],
                r["success_rate"] if r["success_rate"] is not None else 2.0,
                r["feed_id"],
            )
        )
        return {
            "feeds_polled": sum(1 for s in self._feeds.values() if s.polls),
            "feeds_seen": len(self._feeds),
            "polls": polls,
            "successful": ok,
            "errors": errors,
            "success_rate": round(ok / polls, 4) if polls else None,
            "unhealthy_feeds": [r["feed_id"] for r in rows if r["unhealthy"]],
            "feeds": rows[:max_rows],
        }


def summarize_feed_health(records: Iterable[Mapping[str, object]]) -> FeedHealth:
    acc = FeedHealthAccumulator()
    for r in records:
        acc.add(r)
    return acc.summary()


def window_health(by_hour: Mapping[int, Sequence[Mapping[str, object]]], start_ms: int, end_ms: int) -> FeedHealth:
    """The summary of the ``feed-health`` records kept by hour (``at // HOUR``) whose ``at`` is
    in ``[start_ms, end_ms)``, added in hour order (a digest step's window)."""
    from newsflow.core.timeutil import HOUR_MS, iso_to_ms

    acc = FeedHealthAccumulator()
    for hour in sorted(by_hour):
        if start_ms // HOUR_MS <= hour <= end_ms // HOUR_MS:
            for h in by_hour[hour]:
                if start_ms <= iso_to_ms(str(h["at"])) < end_ms:
                    acc.add(h)
    return acc.summary()
