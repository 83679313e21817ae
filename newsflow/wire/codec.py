"""Wire format of every topic: JSON (orjson) objects with a ``schema`` name and version.

Bytes (feed bodies, original bad input) travel base64-encoded. ``encode_*`` return
``(key, value)`` byte pairs ready for Kafka; the key is the topic's documented message key.
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any

import orjson

from newsflow.core.hashing import stable_id
from newsflow.core.timeutil import ms_to_iso
from newsflow.feeds.tiers import BUILTIN_TIERS, SourceTiers
from newsflow.model.records import (
    ARTICLE_SCHEMA_VERSION,
    DEADLETTER_SCHEMA_VERSION,
    FEED_HEALTH_SCHEMA_VERSION,
    RAW_SCHEMA_VERSION,
    Article,
    DeadLetter,
    DedupInfo,
    RawPayload,
)
from newsflow.model.vocab import Disposition
from newsflow.polling.rules import PollVerdict, reliability_score
from newsflow.polling.safety import redact_message, redact_url
from newsflow.polling.state import FeedState, FetchKind, FetchOutcome, PollPolicy
from newsflow.wire.envelope import EnvelopeError, check_envelope

__all__ = ["EnvelopeError", "decode_raw", "encode_raw", "story_record"]

if TYPE_CHECKING:
    from newsflow.dedup.story_state import StoryView

#: largest accepted envelope (bytes of JSON): a body of ``normalize.max_payload_bytes`` (16 MiB)
#: as base64 plus headers; anything larger is dead-lettered before it is parsed
MAX_ENVELOPE_BYTES = 16 * 1024 * 1024 * 4 // 3 + 65_536


def raw_to_dict(p: RawPayload) -> dict[str, Any]:
    return {
        "schema": "feeds.raw",
        "schema_version": RAW_SCHEMA_VERSION,
        "poll_id": p.poll_id,
        "feed_id": p.feed_id,
        "url": p.url,
        "final_url": p.final_url,
        "fetched_at": ms_to_iso(p.fetched_at_ms),
        "status": p.status,
        "etag": p.etag,
        "last_modified": p.last_modified,
        "content_type": p.content_type,
        "publisher": p.publisher,
        "tier": p.tier,
        "category": p.category,
        "language": p.language,
        "body_b64": base64.b64encode(p.body).decode("ascii") if p.body is not None else None,
        "body_ref": p.body_ref,
        "reliability": p.reliability,
        # a poll without a body (failed, refused, not modified): only when set
        **({"poll_status": p.poll_status} if p.poll_status is not None else {}),
        **({"error": p.error} if p.error is not None else {}),
    }


def encode_raw(p: RawPayload) -> tuple[bytes, bytes]:
    return p.feed_id.encode(), orjson.dumps(raw_to_dict(p))


def decode_raw(value: bytes | str, *, max_bytes: int = MAX_ENVELOPE_BYTES) -> RawPayload:
    """Parse a ``feeds.raw`` envelope, checking every field's type and range (see
    :mod:`newsflow.wire.envelope`); raises :class:`EnvelopeError` with a ``reason``."""
    if len(value) > max_bytes:
        msg = f"envelope of {len(value)} bytes is larger than {max_bytes}"
        raise EnvelopeError(msg, "envelope_too_large")
    try:
        d = orjson.loads(value)
    except orjson.JSONDecodeError as e:
        msg = f"not JSON: {e}"
        raise EnvelopeError(msg) from e
    if not isinstance(d, dict):
        msg = "envelope is not a JSON object"
        raise EnvelopeError(msg)
    fetched = check_envelope(d)
    b64 = d.get("body_b64")
    body: bytes | None = None
    if b64 is not None:
        try:
            body = base64.b64decode(b64, validate=True)
        except (ValueError, TypeError) as e:
            msg = f"body_b64 is not base64: {str(e)[:200]}"
            raise EnvelopeError(msg) from e
    return RawPayload(
        feed_id=d["feed_id"],
        url=d["url"],
        fetched_at_ms=fetched,
        status=d.get("status", 200),
        body=body,
        etag=d.get("etag"),
        last_modified=d.get("last_modified"),
        content_type=d.get("content_type"),
        final_url=d.get("final_url"),
        publisher=d.get("publisher"),
        tier=d.get("tier"),
        category=d.get("category"),
        language=d.get("language"),
        body_ref=d.get("body_ref"),
        reliability=d.get("reliability"),
        poll_status=d.get("poll_status"),
        error=d.get("error"),
    )


def deadletter_to_dict(d: DeadLetter) -> dict[str, Any]:
    return {
        "schema": "deadletter",
        "schema_version": DEADLETTER_SCHEMA_VERSION,
        "dl_id": d.dl_id,
        "stage": d.stage,
        "reason": d.reason,
        "detail": d.detail,
        "feed_id": d.feed_id,
        "fetched_at": d.fetched_at,
        "item_index": d.item_index,
        "original_b64": base64.b64encode(d.original).decode("ascii"),
        **({"original_size": d.original_size} if d.original_size is not None else {}),
    }


def article_record(a: Article, info: DedupInfo, seq: str, extra: dict[str, Any] | None = None,
                   families: SourceTiers | None = None) -> dict[str, Any]:
    """The ``articles`` v1 record of an article and the dedup decision about it."""
    if info.revision_no:  # a revision, or a later version of a syndicated copy
        key = f"{a.article_id}#r{info.revision_no}"
    elif info.disposition == Disposition.EXACT_DUPLICATE and info.duplicate_of == a.article_id:
        key = f"{a.article_id}#p{a.fetched_ms}"  # a re-poll (only when emit_repolls is on)
    else:
        key = a.article_id
    rec: dict[str, Any] = {
        "schema": "articles",
        "schema_version": ARTICLE_SCHEMA_VERSION,
        "key": key,
        "article_id": a.article_id,
        "seq": seq,
        "feed_id": a.feed_id,
        "publisher": a.publisher,
        "tier": a.tier,
        "guid": a.guid,
        "url": a.url,
        "canonical_url": a.canonical_url,
        "title": a.title,
        "author": a.author,
        "published_at": a.published_at,
        "date_uncertain": a.date_uncertain,
        "date_source": a.date_source,
        "fetched_at": a.fetched_at,
        "body_html": a.body_html,
        "body_text": a.body_text,
        "categories": list(a.categories),
        "media": a.media,
        "word_count": a.word_count,
        "reading_time_min": a.reading_time_min,
        "partial_content": a.partial_content,
        "content_hash": a.content_hash,
        "feed_format": a.feed_format,
        "language": a.language,
        "category": a.category,
        "disposition": info.disposition,
        "dedup_layer": info.layer,
        "duplicate_of": info.duplicate_of,
        "changed": list(info.changed),
        "revision_no": info.revision_no,
        "preferred": info.preferred,
        "seen_in": info.seen_in,
        # publisher families (``families``, default the built-in table), not feeds
        "publishers_seen": len({(families or BUILTIN_TIERS).family(s.publisher, s.url) for s in info.seen_in}),
    }
    if a.truncated:
        rec["truncated"] = True
    if extra:
        rec.update(extra)
    return rec


# --------------------------------------------------------------------------------------------
# feed-health: one record per parsed payload (source "flow") or per poll (source "poller")
# --------------------------------------------------------------------------------------------


def _health_head(
    record_id: str, feed_id: str, source: str, at_ms: int, status: str, *, poll_id: str | None = None
) -> dict[str, Any]:
    """The fields every ``feed-health`` v1 record starts with, in their wire order."""
    head: dict[str, Any] = {
        "schema": "feed-health",
        "schema_version": FEED_HEALTH_SCHEMA_VERSION,
        "record_id": record_id,
    }
    if poll_id is not None:
        head["poll_id"] = poll_id
    head["feed_id"] = feed_id
    head["source"] = source
    head["at"] = ms_to_iso(at_ms)
    head["status"] = status
    return head


def health_key(source: str, feed_id: str) -> bytes:
    """Kafka key of a ``feed-health`` record: ``<source>:<feed_id>`` (``poller:`` or ``flow:``),
    so the compacted topic keeps the latest record of each source for each feed.

    >>> health_key("flow", "npr-news")
    b'flow:npr-news'
    """
    return f"{source}:{feed_id}".encode()


def health_record(
    feed_id: str, at_ms: int, status: str, *, source: str = "flow", **fields: Any
) -> dict[str, Any]:
    """The flow's ``feed-health`` record of one parsed payload; ``record_id`` (a stable hash of
    source, feed, time and status) makes re-emits idempotent."""
    rid = stable_id(source, feed_id, str(at_ms), status)
    return {**_health_head(rid, feed_id, source, at_ms, status), **fields}


def health_counters(state: FeedState) -> dict[str, Any]:
    """The per-feed counters of a poller health record (docs/rules.md#feed-health: success and
    failure counts, average response time, last success, 304 ratio)."""
    avg = state.response_ms_total / state.response_count if state.response_count else None
    return {
        "total_polls": state.total_polls,
        "successful_polls": state.ok_polls,
        "failed_polls": state.failed_polls,
        "not_modified_polls": state.not_modified_polls,
        "not_modified_ratio": (state.not_modified_polls / state.ok_polls) if state.ok_polls else None,
        "http_errors": state.http_errors,
        "timeouts": state.timeouts,
        "parse_failures": state.parse_failures,
        "rate_limited": state.rate_limited,
        "consecutive_errors": state.consecutive_errors,
        "consecutive_parse_failures": state.consecutive_parse_failures,
        "consecutive_timeouts": state.consecutive_timeouts,
        "consecutive_unchanged": state.consecutive_unchanged,
        "avg_response_ms": round(avg, 1) if avg is not None else None,
        "last_success_at": ms_to_iso(state.last_success_ms) if state.last_success_ms is not None else None,
        "new_items_per_poll": round(state.new_items_per_poll, 3),
    }


def poll_health_record(
    verdict: PollVerdict,
    outcome: FetchOutcome,
    now_ms: int,
    policy: PollPolicy | None = None,
    *,
    domain: str | None = None,
) -> dict[str, Any]:
    """The poller's ``feed-health`` record (source ``poller``) of one poll; URLs and messages
    redacted (no credentials in topics)."""
    p = policy or PollPolicy()
    st = verdict.state
    scan = verdict.scan
    flags = [f for f, on in (("dead", st.dead), ("unhealthy", st.unhealthy), ("slow", st.slow),
                             ("silent", st.silent)) if on]
    poll_id = f"{st.feed_id}@{now_ms}"
    return {
        **_health_head(f"poller:{poll_id}", st.feed_id, "poller", now_ms, verdict.status,
                       poll_id=poll_id),
        "url": redact_url(outcome.url),
        "final_url": redact_url(outcome.final_url) if outcome.final_url else None,
        "http_status": outcome.status,
        "response_ms": round(outcome.elapsed_ms, 1) if outcome.kind is FetchKind.RESPONSE else None,
        "attempts": outcome.attempts,
        "items": scan.items if scan is not None and scan.ok else None,
        "new_items": verdict.new_items,
        "undated": scan.undated if scan is not None and scan.ok else None,
        "feed_format": scan.feed_format if scan is not None else None,
        "counters": health_counters(st),
        "reliability": reliability_score(st.daily, now_ms, p.reliability_window_days),
        "interval_s": round(st.interval_s, 1),
        "next_poll_at": ms_to_iso(st.next_poll_ms) if st.next_poll_ms is not None else None,
        "retry_after_s": verdict.retry_after_s,
        "flags": flags,
        "domain": domain,
        "alert": "; ".join(verdict.alerts) if verdict.alerts else None,
        "message": redact_message(verdict.message),
    }


def story_record(v: StoryView) -> dict[str, Any]:
    """The ``stories`` v1 record of a story's current state (key: ``story_id``)."""
    from newsflow.model.records import STORY_SCHEMA_VERSION

    return {
        "schema": "stories",
        "schema_version": STORY_SCHEMA_VERSION,
        "story_id": v.story_id,
        "status": v.status,
        "updated_at": ms_to_iso(v.updated_ms),
        "first_seen": ms_to_iso(v.first_ms),
        "last_seen": ms_to_iso(v.last_ms),
        "member_count": v.member_count,
        "members": list(v.members),
        "publishers": list(v.publishers),
        "publisher_count": len(v.publishers),
        "tiers": list(v.tiers),
        "phase": v.phase,
        "lead": {
            "article_id": v.lead.article_id,
            "title": v.lead.title,
            "canonical_url": v.lead.canonical_url,
            "publisher": v.lead.publisher,
            "importance": v.lead.importance,
        },
        "label": v.label,
        "importance": v.importance,
        "peak_importance": v.peak_importance,
        **({"merged_into": v.merged_into} if v.merged_into else {}),
    }


def dumps(obj: Any) -> bytes:
    """Deterministic JSON bytes (dataclasses in declaration order, dict keys as built)."""
    return orjson.dumps(obj)


def interaction_heartbeat(at_ms: int) -> dict[str, Any]:
    """An ``interactions`` v1 heartbeat (key ``__tick__``, one to every partition): nothing in its
    partition before ``at`` is still to come."""
    return {"schema": "interactions", "schema_version": 1, "heartbeat": True, "at": ms_to_iso(at_ms)}


def interaction_record(profile_id: str, action: str, at_ms: int, *, article_id: str | None = None,
                       story_id: str | None = None, dwell_s: float | None = None,
                       interaction_id: str | None = None) -> dict[str, Any]:
    """An ``interactions`` v1 record (what a reader app publishes; key: ``profile_id``)."""
    rec: dict[str, Any] = {"schema": "interactions", "schema_version": 1, "profile_id": profile_id}
    if interaction_id is not None:
        rec["interaction_id"] = interaction_id
    if article_id is not None:
        rec["article_id"] = article_id
    if story_id is not None:
        rec["story_id"] = story_id
    rec["action"] = action
    if dwell_s is not None:
        rec["dwell_s"] = dwell_s
    rec["at"] = ms_to_iso(at_ms)
    return rec
