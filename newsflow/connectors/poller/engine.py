"""The poll engine: schedules and polls a set of feeds with per-feed state and per-domain
politeness (asyncio; usable without Bytewax)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import orjson

from newsflow.connectors.http_fetch import HttpFetcher
from newsflow.connectors.poller.config import Clock, PollerConfig, system_clock_ms
from newsflow.connectors.poller.records import KafkaRecord, PollEvent
from newsflow.core.hashing import bytes_id, shard_of
from newsflow.feeds.urls import registrable_domain
from newsflow.model.records import RawPayload
from newsflow.polling.registry import FeedSpec
from newsflow.polling.rules import (
    conditional_headers,
    decide_poll,
    domain_backoff_remaining_ms,
    reliability_score,
    update_domain_backoff,
)
from newsflow.polling.safety import redact_message, redact_url
from newsflow.polling.state import (
    DomainState,
    FeedState,
    FetchKind,
    FetchOutcome,
    evolve,
    reconcile_state,
)
from newsflow.wire.codec import encode_raw, health_key, poll_health_record
from newsflow.wire.contracts import headers_for

log = logging.getLogger("newsflow.poller")


def feed_partition(feed: FeedSpec, partitions: int) -> int:
    """Source partition of a feed: stable hash of its registry URL's registrable domain."""
    return shard_of(registrable_domain(feed.url) or feed.id, max(partitions, 1))


class PollEngine:
    """Polls a set of feeds with per-feed state and per-domain politeness.

    ``poll_feed`` never raises for network trouble; ``states``/``domains`` always hold the
    latest state (the Bytewax partition decides what gets snapshotted).
    """

    def __init__(
        self,
        feeds: Iterable[FeedSpec],
        config: PollerConfig | None = None,
        *,
        clock: Clock = system_clock_ms,
        fetcher: HttpFetcher | None = None,
        states: Mapping[str, FeedState] | None = None,
        domains: Mapping[str, DomainState] | None = None,
        semaphore: asyncio.Semaphore | None = None,
    ) -> None:
        self.config = config or PollerConfig()
        self.policy = self.config.policy
        self.clock = clock
        self._own_fetcher = fetcher is None
        self.fetcher = fetcher or HttpFetcher(self.config.fetch, policy=self.policy)
        now = clock()
        saved = states or {}
        self.feeds: dict[str, FeedSpec] = {}
        self.states: dict[str, FeedState] = {}
        for f in feeds:
            self.feeds[f.id] = f
            self.states[f.id] = reconcile_state(saved.get(f.id), f.id, f.url, interval_s=f.interval_s,
                                                feed_type=f.feed_type, policy=self.policy, now_ms=now)
        self.domains: dict[str, DomainState] = dict(domains or {})
        self.in_flight: set[str] = set()
        self._sem = semaphore
        self._domain_sems: dict[str, asyncio.Semaphore] = {}
        self._last_blob_sweep_ms = -(2**62)

    # -- scheduling ------------------------------------------------------------------------
    def domain_of(self, feed_id: str) -> str:
        return registrable_domain(self.states[feed_id].url) or feed_id

    def due(self, now_ms: int, *, force: bool = False) -> list[FeedSpec]:
        """Feeds to poll now (``force``: ignore their schedule, not their domain's backoff)."""
        out: list[tuple[int, str]] = []
        for fid, st in self.states.items():
            if fid in self.in_flight or st.dead or st.next_poll_ms is None:
                continue
            if not force and st.next_poll_ms > now_ms:
                continue
            if domain_backoff_remaining_ms(self.domains.get(self.domain_of(fid)), now_ms) > 0:
                continue
            out.append((st.next_poll_ms, fid))
        out.sort()
        return [self.feeds[fid] for _, fid in out]

    def poll_now(self, feed_id: str, now_ms: int) -> bool:
        """Make ``feed_id`` due now (also a dead one: the operator asked); False if unknown or
        already being polled."""
        st = self.states.get(feed_id)
        if st is None or feed_id in self.in_flight:
            return False
        self.states[feed_id] = evolve(st, next_poll_ms=now_ms, dead=False)
        return True

    def next_wakeup_ms(self) -> int | None:
        """Earliest time a feed may become due (respecting domain backoff); None: never."""
        best: int | None = None
        for fid, st in self.states.items():
            if fid in self.in_flight or st.dead or st.next_poll_ms is None:
                continue
            d = self.domains.get(self.domain_of(fid))
            t = max(st.next_poll_ms, d.backoff_until_ms if d else 0)
            best = t if best is None else min(best, t)
        return best

    # -- polling ---------------------------------------------------------------------------
    def _global_sem(self) -> asyncio.Semaphore:
        if self._sem is None:
            self._sem = asyncio.Semaphore(self.config.concurrency)
        return self._sem

    def _domain_sem(self, domain: str) -> asyncio.Semaphore:
        sem = self._domain_sems.get(domain)
        if sem is None:
            sem = self._domain_sems[domain] = asyncio.Semaphore(self.config.per_domain_concurrency)
        return sem

    async def poll_feed(self, feed: FeedSpec) -> PollEvent:
        fid = feed.id
        self.in_flight.add(fid)
        try:
            async with self._global_sem():
                dom = self.domain_of(fid)
                async with self._domain_sem(dom):
                    now = self.clock()
                    if domain_backoff_remaining_ms(self.domains.get(dom), now) > 0:
                        return PollEvent(fid, "deferred", (), now)
                    state = self.states[fid]
                    try:
                        outcome = await self.fetcher.fetch(state.url, conditional_headers(state),
                                                           auth_url=feed.url)
                    except Exception as e:  # the fetcher should not raise; never let one feed
                        log.exception("fetch of %s failed unexpectedly", fid)  # stop the others
                        outcome = FetchOutcome(FetchKind.PROTOCOL_ERROR, redact_url(state.url),
                                               error=f"unexpected {type(e).__name__}")
                    return self.apply(feed, state, outcome, self.clock(), dom)
        finally:
            self.in_flight.discard(fid)

    def _store_blob(self, body: bytes, now_ms: int) -> str:
        assert self.config.blob_dir is not None
        h = bytes_id(body, 16)
        path = Path(self.config.blob_dir) / h[:2] / h
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".tmp{os.getpid()}")
            tmp.write_bytes(body)
            tmp.replace(path)
        with contextlib.suppress(OSError):  # the mtime is the poll time: a re-served body stays
            os.utime(path, (now_ms / 1000, now_ms / 1000))
        return path.resolve().as_uri()

    def expire_blobs(self, now_ms: int) -> int:
        """Delete stored bodies (and leftover temp files) not polled for ``blob_ttl_s``."""
        if self.config.blob_dir is None:
            return 0
        self._last_blob_sweep_ms = now_ms
        horizon = now_ms / 1000 - self.config.blob_ttl_s
        removed = 0
        for path in Path(self.config.blob_dir).glob("*/*"):
            try:
                if path.is_file() and not path.is_symlink() and path.stat().st_mtime < horizon:
                    path.unlink()
                    removed += 1
            except OSError:  # another worker removed it first
                continue
        return removed

    def apply(self, feed: FeedSpec, state: FeedState, outcome: FetchOutcome, now_ms: int,
              domain: str) -> PollEvent:
        """Decide (pure rules), update state, build the records of one poll."""
        if (self.config.blob_dir is not None
                and now_ms - self._last_blob_sweep_ms >= self.config.blob_sweep_s * 1000):
            self.expire_blobs(now_ms)
        body_ref: str | None = None
        body = outcome.body
        limit = self.config.max_inline_body_bytes
        if body is not None and len(body) > limit and self.config.blob_dir is None:
            outcome = replace(outcome, kind=FetchKind.TOO_LARGE, body=None,
                              error=f"body of {len(body)} bytes over the inline limit of "
                                    f"{limit} and no blob_dir")
        verdict = decide_poll(state, outcome, now_ms, self.policy)
        self.states[feed.id] = verdict.state
        dstate = self.domains.get(domain) or DomainState(domain)
        self.domains[domain] = update_domain_backoff(
            dstate, rate_limited=verdict.rate_limited, retry_after_s=verdict.retry_after_s,
            server_trouble=verdict.server_trouble, success=verdict.success, now_ms=now_ms,
            policy=self.policy)
        records: list[KafkaRecord] = []
        topics = self.config.topics
        with_body = verdict.emit_body and outcome.body is not None
        inline: bytes | None = outcome.body if with_body else None
        if inline is not None and len(inline) > self.config.max_inline_body_bytes:
            body_ref, inline = self._store_blob(inline, now_ms), None
        h = outcome.headers
        # every poll reaches the flow: one without a body (failed, refused, unchanged) says
        # how it went in poll_status / error, so the flow's feed health counts it
        raw = RawPayload(
            feed_id=feed.id,
            url=redact_url(state.url),
            fetched_at_ms=now_ms,
            status=outcome.status or 0,
            body=inline,
            etag=h.get("etag"),
            last_modified=h.get("last-modified"),
            content_type=h.get("content-type"),
            final_url=outcome.final_url,
            publisher=feed.publisher,
            tier=feed.tier,
            category=feed.category,
            language=feed.language,
            body_ref=body_ref,
            # 30-day poll success ratio: the flow's authority score multiplies by it
            reliability=reliability_score(verdict.state.daily, now_ms,
                                          self.policy.reliability_window_days),
            poll_status=None if with_body else str(verdict.status),
            error=None if with_body else _poll_error(verdict.message or outcome.error, verdict.alerts, outcome.status),
        )
        key, value = encode_raw(raw)
        records.append(KafkaRecord(topics.raw, key, value, now_ms, headers=headers_for("raw")))
        health = poll_health_record(verdict, outcome, now_ms, self.policy, domain=domain)
        records.append(KafkaRecord(topics.feed_health, health_key("poller", feed.id), orjson.dumps(health), now_ms,
                                   headers=headers_for("feed_health")))
        if verdict.alerts:
            log.warning("feed %s: %s", feed.id, health["alert"])
        return PollEvent(feed.id, verdict.status, tuple(records), now_ms, alert=health["alert"],
                         http_status=outcome.status, response_ms=health["response_ms"])

    async def poll_round(self, *, force: bool = False) -> list[PollEvent]:
        """Poll every due feed once, concurrently (bounded); returns the events in feed order."""
        due = self.due(self.clock(), force=force)
        return list(await asyncio.gather(*(self.poll_feed(f) for f in due)))

    async def aclose(self) -> None:
        if self._own_fetcher:
            await self.fetcher.aclose()


def _poll_error(message: str | None, alerts: Sequence[str], status: int | None) -> str | None:
    """What went wrong with a poll sent without a body (redacted); None when nothing did."""
    text = message or "; ".join(alerts) or (f"HTTP {status}" if status is not None and status >= 400 else None)
    return redact_message(text)


__all__ = ["PollEngine", "feed_partition"]
