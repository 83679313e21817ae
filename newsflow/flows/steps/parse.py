"""The parse step's logic: one input partition's raw messages -> records for the sinks and items
for the dedup shards; the partition's event-time clock (ticks, clock jumps), poison messages
(``newsflow.connectors.inflight``) and the re-poll memory.
"""

from __future__ import annotations

from collections.abc import Iterable

from bytewax.operators import StatefulLogic

from newsflow.config import Settings
from newsflow.connectors.files import END_OF_PARTITION, UNREADABLE, BodyRefError, resolve_body_ref
from newsflow.connectors.inflight import InflightJournals
from newsflow.core.alignment import END
from newsflow.core.eventclock import FUTURE_FETCHED_AT, JumpCandidate, judge_fetched_at
from newsflow.core.exactbytes import exact_size
from newsflow.core.snapshot import Snapshot, make_snapshot, restore
from newsflow.core.timeutil import ms_to_iso
from newsflow.dedup.exact import dedup_shard_key
from newsflow.feeds.normalize import RepollMemory, make_deadletter, normalize_payload
from newsflow.feeds.poll_outcome import bodiless_poll_result, poll_error_fields
from newsflow.flows import metrics
from newsflow.flows.isolation import envelope_head
from newsflow.flows.keys import (
    placed_shard_keys,
    shard_keys,
)
from newsflow.flows.outputs import deadletter_output
from newsflow.model.messages import (
    HealthReport,
    Output,
    ParsedArticle,
    ParseOutput,
    Tick,
    ToShard,
)
from newsflow.model.records import RawPayload
from newsflow.wire.codec import (
    EnvelopeError,
    decode_raw,
    dumps,
    health_key,
    health_record,
)

STEP_PARSE = "parse"


TICK_FEED_ID = "__tick__"


class ParseLogic(StatefulLogic[tuple[str, bytes], ParseOutput, Snapshot]):
    """One input partition: raw message ``(seq, bytes)`` -> records for the sinks and items for
    the dedup shards; keeps the partition's watermark and emits a :class:`Tick` to every shard
    when it crosses a ``tick_ms`` boundary. ``archive``: the input is a file replay, whose order
    is its time order (a gap in it is real: ``newsflow.core.eventclock``); else live (Kafka)."""

    def __init__(self, settings: Settings, resume: Snapshot | None, recovery: bool,
                 inflight_dir: str | None = None, *, archive: bool = False) -> None:
        self.s = settings
        self.recovery = recovery
        self.archive = archive
        self.keys = shard_keys(settings)
        self.placed = placed_shard_keys(settings)
        self.normalize_config = settings.normalize.to_config()
        #: poison messages: what each partition is parsing, on disk beside the recovery snapshots
        self.journals = InflightJournals(inflight_dir) if inflight_dir else None
        st = restore(STEP_PARSE, resume) if resume is not None else {}
        self.wm: int = st.get("watermark", 0)
        self.bucket: int = st.get("bucket", -1)
        #: the last payload rejected for a clock jump (``newsflow.core.eventclock``)
        self.candidate: JumpCandidate | None = st.get("clock_candidate")
        #: each feed's last payload, so re-polls skip parsing / normalization (same output); a
        #: cache, not in snapshots: after a resume each feed's first payload is parsed again
        self.repolls: RepollMemory = st.get("repolls") or RepollMemory()
        #: up to two feed ids seen on this partition (one: a gap is confirmed by that feed)
        self.feeds: list[str] = st.get("feeds", [])
        #: each feed's last poll that showed the feed (200 with items, or 304), event time
        self.polls: dict[str, int] = st.get("polls", {})

    def on_item(self, value: tuple[str, bytes]) -> tuple[Iterable[ParseOutput], bool]:
        seq, raw = value
        if not raw and seq.endswith(":" + END_OF_PARTITION):  # a file partition's last item
            return self._end(), StatefulLogic.RETAIN
        if seq.endswith(":" + UNREADABLE):  # an archive file broke off: what was lost is said
            dl = make_deadletter("envelope", "unreadable_archive", raw.decode("utf-8", "replace"), b"",
                                 feed_id=None, fetched_ms=None, item_index=None)
            metrics.DEADLETTERS.labels("envelope", "unreadable_archive").inc()
            return [deadletter_output(self.s.kafka.topics.deadletter, dl)], StatefulLogic.RETAIN
        if self.journals is None:
            return self._item(seq, raw), StatefulLogic.RETAIN
        journal = self.journals.of(seq)
        crashes = journal.crashes(seq)
        if crashes >= self.s.flow.poison_after_crashes:
            feed_id, fetched_ms = envelope_head(raw)  # (not decoded: that is what may kill)
            dl = make_deadletter("envelope", "poison_message",
                                 f"{crashes} runs died while parsing this message; it is not parsed again",
                                 raw, feed_id=feed_id, fetched_ms=fetched_ms, item_index=None,
                                 max_original=self.s.normalize.max_deadletter_original_bytes)
            metrics.DEADLETTERS.labels("envelope", "poison_message").inc()
            journal.done(seq)
            return [deadletter_output(self.s.kafka.topics.deadletter, dl)], StatefulLogic.RETAIN
        journal.begin(seq)
        out = self._item(seq, raw)
        journal.done(seq)
        return out, StatefulLogic.RETAIN

    def _item(self, seq: str, raw: bytes) -> list[ParseOutput]:
        t = self.s.kafka.topics
        out: list[ParseOutput] = []
        cap = self.s.normalize.max_deadletter_original_bytes
        try:
            payload = decode_raw(raw)
        except EnvelopeError as e:
            dl = make_deadletter("envelope", e.reason, str(e), raw if isinstance(raw, bytes) else b"",
                                 feed_id=None, fetched_ms=None, item_index=None, max_original=cap)
            metrics.DEADLETTERS.labels("envelope", e.reason).inc()
            out.append(deadletter_output(t.deadletter, dl))
            return out
        # one message with a bad clock must not move event time (a second feed confirms a gap)
        if len(self.feeds) < 2 and payload.feed_id not in self.feeds:
            self.feeds.append(payload.feed_id)
        v = judge_fetched_at(payload.fetched_at_ms, payload.feed_id, self.wm, self.candidate,
                             tolerance_ms=self.s.flow.clock_jump_tolerance_ms, seq=seq, held=raw,
                             sole_feed=len(self.feeds) == 1, archive=self.archive)
        self.candidate = v.candidate  # held in the snapshot until confirmed or discarded
        if v.discarded is not None:
            out.append(self._clock_deadletter(v.discarded, payload.fetched_at_ms))
        if v.confirmed is not None:  # the held payload was right after all: it goes first
            out.extend(self._payload(v.confirmed.seq, v.confirmed.held, decode_raw(v.confirmed.held)))
        if not v.accept:
            if v.candidate is None or v.candidate.seq != seq:  # rejected outright (edge clock)
                out.append(self._clock_deadletter(JumpCandidate(payload.fetched_at_ms, payload.feed_id, seq, raw)))
            return out
        out.extend(self._payload(seq, raw, payload))
        return out

    def on_eof(self) -> tuple[Iterable[ParseOutput], bool]:
        return self._end(), StatefulLogic.RETAIN

    def _end(self) -> list[ParseOutput]:
        """This partition sends nothing more: a payload still held is processed (the partition's
        only one) or dead-lettered (an unconfirmed jump), and the shards' merge stops waiting.
        Not with recovery: there the end of a finite input is a pause (a rerun resumes it), and
        an end tick kept in the shards' snapshots would stop their event time for good."""
        if self.recovery:
            return []
        held, self.candidate = self.candidate, None
        out: list[ParseOutput] = []
        if held is not None and (self.wm <= 0 or self.archive):  # nothing contradicted it
            out.extend(self._payload(held.seq, held.held, decode_raw(held.held)))
        elif held is not None:
            out.append(self._clock_deadletter(held))
        out.extend(ToShard(k, Tick(END, self.wm)) for k in self.keys)
        return out

    def _clock_deadletter(self, c: JumpCandidate, next_ms: int | None = None) -> Output:
        """The dead letter of a payload too far ahead; its detail says which guard: in an archive,
        the archive's next payload (fetched at ``next_ms``) went back (a clock fault inside the
        archive, not a gap); live, nothing confirmed the jump (a clock fault at the edge)."""
        head = (f"fetched_at {ms_to_iso(c.fetched_ms)} is more than {self.s.flow.clock_jump_tolerance_ms} ms "
                f"ahead of the partition's event time {ms_to_iso(self.wm)}")
        if self.archive:
            detail = (f"{head}, and the archive's next payload{'' if next_ms is None else ' ' + ms_to_iso(next_ms)} "
                      "went back before it: a clock fault inside the archive, not a gap (a gap is followed by "
                      "payloads at or after it)")
        else:
            detail = (f"{head}, and no other feed confirmed the jump: live input, a clock fault at the edge "
                      "(a replay of an archive with gaps: replay the file, where gaps are real, or raise "
                      "flow.clock_jump_tolerance_hours)")
        dl = make_deadletter("envelope", FUTURE_FETCHED_AT, detail, c.held, feed_id=c.feed_id, fetched_ms=c.fetched_ms,
                             item_index=None, max_original=self.s.normalize.max_deadletter_original_bytes)
        metrics.DEADLETTERS.labels("envelope", FUTURE_FETCHED_AT).inc()
        return deadletter_output(self.s.kafka.topics.deadletter, dl)

    def _payload(self, seq: str, raw: bytes, payload: RawPayload) -> list[ParseOutput]:
        t = self.s.kafka.topics
        out: list[ParseOutput] = []
        metrics.labelled(metrics.PAYLOADS, str(payload.status)).inc()
        if payload.body_ref:
            try:
                payload = resolve_body_ref(payload, self.s.flow.blob_dir or None, self.s.normalize.max_payload_bytes)
            except BodyRefError as e:  # the dead letter holds the envelope, never the target's bytes
                dl = make_deadletter("envelope", e.reason, f"{(payload.body_ref or '')[:300]}: {e}", raw,
                                     feed_id=payload.feed_id, fetched_ms=payload.fetched_at_ms, item_index=None)
                metrics.DEADLETTERS.labels("envelope", e.reason).inc()
                out.append(deadletter_output(t.deadletter, dl))
        if payload.fetched_at_ms > self.wm:
            self.wm = payload.fetched_at_ms
            metrics.labelled(metrics.EVENT_TIME, seq.split(":", 1)[0]).set(self.wm / 1000)
            b = self.wm // self.s.flow.tick_ms
            if b > self.bucket:  # every item of an earlier epoch was sent (the wiring adds the source)
                self.bucket = b
                self.repolls.expire(self.wm, self.s.dedup.window_ms)
                self.polls = expire_polls(self.polls, self.wm - self.s.dedup.window_ms)
                out.extend(ToShard(k, Tick(b, self.wm)) for k in self.keys)
        epoch = self.bucket  # this payload's items: released once every partition ticked past it
        if payload.feed_id != TICK_FEED_ID:
            res = bodiless_poll_result(payload) or normalize_payload(payload, self.normalize_config, self.repolls)
            prev = self.polls.get(payload.feed_id)
            if payload.status == 304 or res.items:
                self.polls[payload.feed_id] = max(payload.fetched_at_ms, prev or 0)
            for a in res.articles:
                out.append(ToShard(self.placed[dedup_shard_key(a, self.s.dedup.shards)],
                                   ParsedArticle(f"{seq}:{a.item_index:05d}", a, epoch, prev)))
            for dl in res.deadletters:
                metrics.DEADLETTERS.labels(dl.stage, dl.reason).inc()
                if dl.reason == "no_title_no_body":
                    metrics.MALFORMED.labels(payload.feed_id).inc()
                out.append(deadletter_output(t.deadletter, dl))
            h = health_record(
                payload.feed_id, payload.fetched_at_ms, res.status, url=payload.final_url or payload.url,
                http_status=payload.status, items=res.items, malformed=res.malformed, undated=res.undated,
                feed_format=res.feed_format, bozo=res.bozo, reliability=payload.reliability,
                **poll_error_fields(payload),
            )
            out.append(Output(t.feed_health, health_key("flow", payload.feed_id), exact_size(dumps(h))))
            # the digest's feed-health report gets it too, in input order, via a dedup shard
            out.append(ToShard(self.keys[0], HealthReport(f"{seq}:~", h, epoch=epoch)))
        return out

    def snapshot(self) -> Snapshot:
        return make_snapshot(STEP_PARSE, {"watermark": self.wm, "bucket": self.bucket,
                                          "clock_candidate": self.candidate,
                                          "feeds": self.feeds, "polls": self.polls},
                             freeze=self.recovery)


def expire_polls(polls: dict[str, int], cutoff_ms: int) -> dict[str, int]:
    """The feeds' last polls without those older than ``cutoff_ms`` (event time)."""
    if all(t >= cutoff_ms for t in polls.values()):
        return polls
    return {f: t for f, t in polls.items() if t >= cutoff_ms}
