"""The newsflow dataflow: raw payloads -> parse/normalize -> exact dedup -> digest -> topics.

Reads top to bottom like the pipeline diagram. Only wiring lives here: the logic is in the
pure ``newsflow.*`` modules. Step ids are constants because recovery state is keyed by them.

Event time: the parse step keeps a per-input-partition watermark = max ``fetched_at`` seen and,
whenever it crosses a ``tick_ms`` boundary, broadcasts a tick to every dedup shard. Shards expire
state and close digest windows on those ticks only -- never on the wall clock -- so a replay
gives identical output, and windows close on quiet streams as soon as a heartbeat envelope
(``feed_id="__tick__"``) moves event time on.

Determinism with several workers: the parse step is keyed by input partition, so each
partition's items reach every shard in input order; the digest key receives exactly one
proposal per shard per window and assembles them in a total order.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterable
from typing import Any

import bytewax.operators as op
from bytewax.dataflow import Dataflow, Stream
from bytewax.operators import StatefulLogic

from flows import metrics
from newsflow.codec import (
    EnvelopeError,
    article_record,
    deadletter_to_dict,
    decode_raw,
    dumps,
    health_record,
)
from newsflow.dedup import DedupShard, dedup_shard_key
from newsflow.model import Article, DeadLetter
from newsflow.normalize import make_deadletter, normalize_payload
from newsflow.quick_digest import DIGEST_TYPE, assemble_digest, shard_candidates, window_of
from newsflow.settings import Settings

STEP_PARSE = "parse"
STEP_DEDUP = "dedup"
STEP_DIGEST = "digest"
TICK_FEED_ID = "__tick__"
DIGEST_KEY = "digest"

#: (topic, key bytes, value bytes): what every branch of the flow produces for the sinks
Out = tuple[str, bytes, bytes]


def shard_keys(settings: Settings) -> list[str]:
    return [f"dd{i:03d}" for i in range(settings.dedup_shards)]


# ---------------------------------------------------------------- parse + event-time clock
def parse_step(settings: Settings) -> Callable[[Any, tuple[str, bytes]], tuple[Any, list[Any]]]:
    """Mapper of the keyed ``parse`` step: one raw message -> tagged outputs, plus ticks."""
    keys = shard_keys(settings)
    t = settings.topics

    def mapper(state: tuple[int, int] | None, item: tuple[str, bytes]) -> tuple[Any, list[Any]]:
        wm, bucket = state or (0, -1)
        seq, value = item
        out: list[Any] = []
        try:
            payload = decode_raw(value)
        except EnvelopeError as e:
            dl = make_deadletter("envelope", "bad_envelope", str(e), value if isinstance(value, bytes) else b"",
                                 feed_id=None, fetched_ms=None, item_index=None)
            metrics.DEADLETTERS.labels("envelope", "bad_envelope").inc()
            out.append(("O", _dl_out(t.deadletter, dl)))
            return (wm, bucket), out
        metrics.PAYLOADS.labels(str(payload.status)).inc()
        if payload.feed_id != TICK_FEED_ID:
            res = normalize_payload(payload, settings)
            for a in res.articles:
                out.append(("S", dedup_shard_key(a, settings.dedup_shards), ("A", f"{seq}:{a.item_index:05d}", a)))
            for dl in res.deadletters:
                metrics.DEADLETTERS.labels(dl.stage, dl.reason).inc()
                if dl.reason == "no_title_no_body":
                    metrics.MALFORMED.labels(payload.feed_id).inc()
                out.append(("O", _dl_out(t.deadletter, dl)))
            h = health_record(
                payload.feed_id, payload.fetched_at_ms, res.status, url=payload.final_url or payload.url,
                http_status=payload.status, items=res.items, malformed=res.malformed, undated=res.undated,
                feed_format=res.feed_format, bozo=res.bozo,
            )
            out.append(("O", (t.feed_health, payload.feed_id.encode(), dumps(h))))
        if payload.fetched_at_ms > wm:
            wm = payload.fetched_at_ms
            b = wm // settings.tick_ms
            if b > bucket:
                bucket = b
                out.extend(("S", k, ("T", wm)) for k in keys)
        return (wm, bucket), out

    return mapper


def _dl_out(topic: str, dl: DeadLetter) -> Out:
    return (topic, dl.dl_id.encode(), dumps(deadletter_to_dict(dl)))


# ---------------------------------------------------------------- dedup shard (layers 1-2)
class DedupLogic(StatefulLogic[Any, Any, Any]):
    """One dedup shard: :class:`DedupShard` + closing the digest windows it contributes to."""

    def __init__(self, settings: Settings, resume: Any, recovery: bool) -> None:
        self.s = settings
        self.recovery = recovery
        if resume is None:
            self.shard = DedupShard(settings.dedup_window_ms, settings.emit_repolls)
            self.next_close: int | None = None
        else:
            self.shard, self.next_close = pickle.loads(resume) if isinstance(resume, bytes) else resume

    def on_item(self, value: Any) -> tuple[Iterable[Any], bool]:
        if value[0] == "A":
            _, seq, a = value
            a: Article
            info = self.shard.process(a)
            if info is None:
                metrics.REPOLLS.inc()
                return (), StatefulLogic.RETAIN
            if self.next_close is not None and a.fetched_ms < self.next_close:
                metrics.LATE.inc()
            metrics.ARTICLES.labels(info.disposition).inc()
            rec = article_record(a, info, seq)
            return [("O", (self.s.topics.articles, rec["key"].encode(), dumps(rec)))], StatefulLogic.RETAIN
        wm = value[1]
        self.shard.advance(wm)
        W = self.s.digest_window_ms
        if self.next_close is None:
            self.next_close = window_of(wm, W)
        out = []
        while self.next_close + W <= wm:
            out.append(self._proposal(self.next_close, final=True))
            self.next_close += W
        return out, StatefulLogic.RETAIN

    def _proposal(self, ws: int, *, final: bool) -> Any:
        clusters = self.shard.clusters_first_seen_in(ws, ws + self.s.digest_window_ms)
        return ("P", ws, final, shard_candidates(clusters, self.s.digest_shard_top_k))

    def on_eof(self) -> tuple[Iterable[Any], bool]:
        # end of a finite input: propose the still-open window(s) so replays end with a digest
        if self.next_close is None:
            return (), StatefulLogic.RETAIN
        out = []
        ws = self.next_close
        while ws <= self.shard.watermark:
            out.append(self._proposal(ws, final=False))
            ws += self.s.digest_window_ms
        return out, StatefulLogic.RETAIN

    def snapshot(self) -> Any:
        state = (self.shard, self.next_close)
        # with recovery on, freeze the state now (it keeps mutating after this call)
        return pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL) if self.recovery else state


# ---------------------------------------------------------------- first digest (one key)
class DigestLogic(StatefulLogic[Any, Any, Any]):
    """Merges one proposal per shard per window into a ``digests`` record."""

    def __init__(self, settings: Settings, resume: Any) -> None:
        self.s = settings
        self.pending: dict[tuple[int, bool], list[Any]] = dict(resume or {})

    def _emit(self, ws: int, final: bool) -> Out:
        props = self.pending.pop((ws, final))
        d = assemble_digest(ws, self.s.digest_window_ms, props, self.s.digest_max_items, final=final)
        metrics.DIGESTS.labels(DIGEST_TYPE).inc()
        return (self.s.topics.digests, d["digest_id"].encode(), dumps(d))

    def on_item(self, value: Any) -> tuple[Iterable[Any], bool]:
        _, ws, final, prop = value
        self.pending.setdefault((ws, final), []).append(prop)
        if final and len(self.pending[(ws, final)]) == self.s.dedup_shards:
            return [self._emit(ws, final)], StatefulLogic.RETAIN
        return (), StatefulLogic.RETAIN

    def on_eof(self) -> tuple[Iterable[Any], bool]:
        out = []
        for ws, final in sorted(self.pending):
            props = self.pending[(ws, final)]
            if not final and not any(p[1] for p in props):
                del self.pending[(ws, final)]  # an empty, still-open window: nothing to report
                continue
            out.append(self._emit(ws, final))
        return out, StatefulLogic.RETAIN

    def snapshot(self) -> Any:
        return {k: list(v) for k, v in self.pending.items()}


# ---------------------------------------------------------------- wiring
def newsflow_steps(
    raw: Stream[tuple[str, tuple[str, bytes]]], settings: Settings, *, recovery: bool = False
) -> Stream[Out]:
    """All steps from keyed raw messages ``(partition, (seq, bytes))`` to ``(topic, key, value)``."""
    parsed = op.stateful_flat_map(STEP_PARSE, raw, parse_step(settings))
    direct = op.filter_map("parse_outputs", parsed, lambda kv: kv[1][1] if kv[1][0] == "O" else None)
    to_shards = op.filter_map("to_shards", parsed, lambda kv: (kv[1][1], kv[1][2]) if kv[1][0] == "S" else None)
    deduped = op.stateful(STEP_DEDUP, to_shards, lambda resume: DedupLogic(settings, resume, recovery))
    dedup_out = op.filter_map("dedup_outputs", deduped, lambda kv: kv[1][1] if kv[1][0] == "O" else None)
    proposals = op.filter_map("proposals", deduped, lambda kv: (DIGEST_KEY, kv[1]) if kv[1][0] == "P" else None)
    digests = op.stateful(STEP_DIGEST, proposals, lambda resume: DigestLogic(settings, resume))
    digest_out = op.map("digest_outputs", digests, lambda kv: kv[1])
    return op.merge("all_outputs", direct, dedup_out, digest_out)


def file_flow(input_path: str, out_dir: str, settings: Settings | None = None, *, recovery: bool = False) -> Dataflow:
    """Raw-payload archive (file or directory) -> ``<out_dir>/<topic>.jsonl``; no Kafka."""
    from connectors.files import RawArchiveSource, JsonlTopicSink

    settings = settings or Settings()
    flow = Dataflow("newsflow_files")
    src = op.input("raw_in", flow, RawArchiveSource(input_path))
    keyed = op.map("key_by_partition", src, lambda item: ("p" + item[0].split(":", 1)[0], item))
    outs = newsflow_steps(keyed, settings, recovery=recovery)
    t = settings.topics
    topics = [t.articles, t.digests, t.feed_health, t.deadletter]
    op.output("files_out", op.map("to_files", outs, lambda o: (o[0], o[2])), JsonlTopicSink(out_dir, topics))
    return flow


def kafka_flow(
    brokers: list[str], settings: Settings | None = None, *, tail: bool = True,
    recovery: bool = False, add_config: dict[str, str] | None = None,
) -> Dataflow:
    """``feeds.raw`` on Kafka -> the four output topics on Kafka."""
    from connectors.kafka import kafka_raw_input, kafka_outputs

    settings = settings or Settings()
    flow = Dataflow("newsflow_kafka")
    keyed = kafka_raw_input(flow, brokers, settings, tail=tail, add_config=add_config)
    outs = newsflow_steps(keyed, settings, recovery=recovery)
    kafka_outputs(outs, brokers, settings, add_config=add_config)
    return flow
