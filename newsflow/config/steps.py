"""The sections of the pipeline's steps: the flow, parsing, dedup, stories, scoring, topics
and digests. Each builds its step's frozen dataclass with ``to_config()``; its defaults are read
from that dataclass, so every default is defined once."""

from __future__ import annotations

import dataclasses
import difflib
from typing import Any, Literal
from zoneinfo import ZoneInfo, available_timezones

from pydantic import Field, field_validator, model_validator

from newsflow.clustering.topics import TopicConfig
from newsflow.config.base import Section, dataclass_kwargs, section_from, to_ms
from newsflow.dedup.story_config import StoryConfig
from newsflow.digest.config import DigestConfig
from newsflow.feeds.normalize import NormalizeConfig
from newsflow.feeds.tiers import BUILTIN_TIERS, NO_TABLE, SourceTiers, load_source_tiers
from newsflow.scoring.importance import COMPONENTS, TIER_SCORES, InterestProfile, ScoreConfig

__all__ = [
    "DedupSettings",
    "DigestSettings",
    "FlowSettings",
    "NormalizeSettings",
    "ScoreWeights",
    "ScoringSettings",
    "StorySettings",
    "TopicSettings",
]


# ------------------------------------------------------------------------------ flow, parsing
class FlowSettings(Section):
    """The dataflow's execution."""

    #: event-time ticks go to every shard when the watermark crosses this granularity (file
    #: replays); items are released downstream on ticks
    tick_seconds: float = Field(60.0, gt=0, le=86_400)
    #: the same for ``newsflow run`` on Kafka (live): a tick per second of event time bounds the
    #: poll -> article latency (measured p99 0.56 s vs 59 s with 60 s ticks: bench/bench_latency.py)
    live_tick_seconds: float = Field(1.0, gt=0, le=86_400)
    #: worker threads (``run``) / workers (``demo``)
    workers: int = Field(1, ge=1, le=256)
    #: input partitions of a file replay (feeds split between them, balanced by bytes): the
    #: parse step runs one per partition, so this bounds how many workers parse in parallel.
    #: Outputs depend on it (the merge order), never on the number of workers or processes
    file_partitions: int = Field(4, ge=1, le=256)
    #: raw messages an input partition (of a file replay, or of ``feeds.raw`` on Kafka) hands the
    #: flow per read; outputs never depend on it. Small reads let the steps of several processes
    #: overlap: with 256 per file read the steps of a replay ran in turn (all parsing, then
    #: dedup, then stories: py-spy), and ``npr-ars-wgrz`` on 2 processes took 1.11x the time of
    #: 16 (4 pairs; 1 process: the same time); 2 processes catching up on it from a 3-partition
    #: ``feeds.raw`` took 1.41x as long with 1,000 per Kafka read (3 pairs)
    read_batch: int = Field(16, ge=1, le=100_000)
    #: Bytewax epoch: how often state is snapshotted (with recovery) and sinks flushed
    epoch_seconds: float = Field(5.0, gt=0, le=3600)
    # bounds on bad input at the flow's edges
    #: the only directory a ``body_ref`` (``file://``) may be read from: the poller's
    #: ``<state-dir>/blobs`` (blob files expire on the poller side); "" refuses every body_ref
    blob_dir: str = ""
    #: a payload whose ``fetched_at`` is more than this ahead of its partition's watermark is
    #: dead-lettered (``future_fetched_at``): one bad message can't move event time (live: a
    #: second feed confirming the jump within this tolerance accepts it, a real gap in the stream;
    #: a file replay accepts every gap its later payloads go on from: ``newsflow.core.eventclock``)
    clock_jump_tolerance_hours: float = Field(24.0, gt=0)
    #: largest output record (bytes of JSON), under Kafka's default 1 MB ``message.max.bytes``:
    #: long text fields are cut (``truncated: true``), else the record becomes a dead letter
    max_record_bytes: int = Field(900_000, ge=10_000)
    #: validate every output record against its topic schema before the sink (a violation
    #: becomes a ``schema_violation`` dead letter); the size check runs always. Off by default:
    #: jsonschema costs ~1.6 ms per article record vs ~2 us for the size check
    validate_outputs: bool = False
    #: a raw message that killed this many processes while it was parsed (out of memory, a
    #: crash in C code) is dead-lettered (``poison_message``) instead of parsed again; needs a
    #: recovery directory (``newsflow.connectors.inflight``)
    poison_after_crashes: int = Field(2, ge=1, le=100)
    #: generation-0 threshold of Python's cyclic garbage collector in a flow process (0:
    #: Python's default, 700): with the default, ~7-13 % of a replay went to collections that
    #: walk the window's state (``newsflow.core.gctune``)
    gc_young_threshold: int = Field(50_000, ge=0, le=10_000_000)
    #: choose key names that put the flow's shard, digest and input keys on chosen workers
    #: (``newsflow.runtime.placement``); false: plain key names, placed by Bytewax's hash. The
    #: same bytes either way; changing it needs a new recovery directory (keys are renamed)
    placement: bool = True

    @property
    def tick_ms(self) -> int:
        return round(self.tick_seconds * 1000)

    @property
    def clock_jump_tolerance_ms(self) -> int:
        return to_ms(self.clock_jump_tolerance_hours)

    def live(self) -> FlowSettings:
        """These settings with the live tick (``newsflow run``)."""
        return self.model_copy(update={"tick_seconds": self.live_tick_seconds})


_N = NormalizeConfig()


class NormalizeSettings(Section):
    """Parsing and normalization (builds ``NormalizeConfig``)."""

    #: a date more than this far after the fetch time is not trusted (docs/rules.md#dates)
    future_tolerance_seconds: int = Field(_N.future_tolerance_ms // 1000, ge=0)
    #: words per minute for reading time (docs/rules.md#html-and-text)
    reading_wpm: int = Field(_N.reading_wpm, ge=1, le=2000)
    #: "partialContent" when fewer words than this and the body ends in "..." / "[...]"
    partial_max_words: int = Field(_N.partial_max_words, ge=0)
    #: parse well-formed RSS/Atom with the C ElementTree fast path (identical output, ~10x faster)
    fast_parse: bool = _N.fast_parse
    # bounds on bad input: what is cut is flagged or dead-lettered, never dropped
    #: largest feed body (bytes, inline or from a blob); larger -> dead letter ``payload_too_large``
    max_payload_bytes: int = Field(_N.max_payload_bytes, ge=1024)
    #: items normalized per payload (newest first); the rest -> one ``too_many_items`` dead letter
    max_items_per_payload: int = Field(_N.max_items_per_payload, ge=1)
    #: longest item body used (chars of the raw HTML/text); longer is cut, record ``truncated``
    max_item_body_chars: int = Field(_N.max_item_body_chars, ge=100)
    #: deepest HTML nesting of an item body sanitized (quadratic in it); deeper -> ``html_too_deep``
    max_html_depth: int = Field(_N.max_html_depth, ge=8, le=100_000)
    #: original bytes kept in a dead letter (``original_size`` has the full size)
    max_deadletter_original_bytes: int = Field(_N.max_deadletter_original_bytes, ge=0)
    #: default authority tiers of well-known sources, for feeds without a tier of their own:
    #: "builtin" (``newsflow/feeds/source_tiers.toml``), a path to a table of that format, or ""
    #: (off: such feeds stay without a tier, scored as T4)
    source_tiers: str = "builtin"
    #: a sentence found in this many items of one feed document is boilerplate (a channel's
    #: description under every video): story matching ignores it (0: off)
    boilerplate_min_items: int = Field(_N.boilerplate_min_items, ge=0)

    @field_validator("source_tiers")
    @classmethod
    def _tier_table(cls, v: str) -> str:
        if v and v != "builtin":
            load_source_tiers(v)  # a bad table fails at start-up, with its path
        return v

    def to_config(self) -> NormalizeConfig:
        d = self.model_dump(exclude={"future_tolerance_seconds", "source_tiers"})
        tiers = (BUILTIN_TIERS if self.source_tiers == "builtin"
                 else load_source_tiers(self.source_tiers) if self.source_tiers else None)
        return NormalizeConfig(future_tolerance_ms=self.future_tolerance_seconds * 1000, source_tiers=tiers, **d)

    def families(self) -> SourceTiers:
        """The configured source table's publisher families (the table off: registrable domains
        and platform channel names only)."""
        return self.to_config().source_tiers or NO_TABLE


class DedupSettings(Section):
    """Exact dedup, layers 1-2 (GUID + content hash, canonical URL)."""

    #: event-time window of dedup state (docs/rules.md#dedup-window)
    window_hours: float = Field(72.0, gt=0, le=24 * 365)
    #: dedup state shards (keys), spread over workers; each expires on event time
    shards: int = Field(8, ge=1, le=4096)
    #: emit a record when a feed re-serves an unchanged item on a later poll (normally counted)
    emit_repolls: bool = False

    @property
    def window_ms(self) -> int:
        return to_ms(self.window_hours)


# ------------------------------------------------------------------------------ scoring
_C = ScoreConfig()
_W = dict(zip(COMPONENTS, _C.weights, strict=True))


class ScoreWeights(Section):
    """Importance (docs/rules.md#weights): a weighted sum of five 0-100 components (the weights sum to 1)."""

    authority: float = Field(_W["authority"], ge=0, le=1)
    recency: float = Field(_W["recency"], ge=0, le=1)
    corroboration: float = Field(_W["corroboration"], ge=0, le=1)
    relevance: float = Field(_W["relevance"], ge=0, le=1)
    depth: float = Field(_W["depth"], ge=0, le=1)

    @model_validator(mode="after")
    def _sum_to_one(self) -> ScoreWeights:
        total = sum(getattr(self, c) for c in COMPONENTS)
        if abs(total - 1.0) > 1e-6:
            msg = f"the five weights must sum to 1 (they sum to {total:g})"
            raise ValueError(msg)
        return self


class ScoringSettings(Section):
    """Importance (builds ``ScoreConfig``)."""

    #: recency decay: exp(-lambda * hours) (docs/rules.md#recency)
    lam: float = Field(_C.lam, ge=0, le=10)
    #: penalty on recency when the publication date is uncertain
    uncertain_penalty: float = Field(_C.uncertain_penalty, ge=0, le=1)
    weights: ScoreWeights = ScoreWeights()
    #: authority by tier, 0-100 (keys T1..T5)
    tier_scores: dict[str, float] = Field(default_factory=lambda: dict(TIER_SCORES))
    unknown_tier_score: float = Field(_C.unknown_tier_score, ge=0, le=100)
    #: relevance when no interest profile is set
    relevance_default: float = Field(_C.relevance_default, ge=0, le=100)
    #: an interest profile: phrase -> weight (empty: every article gets relevance_default)
    interests: dict[str, float] = Field(default_factory=dict)
    title_weight: int = Field(_C.title_weight, ge=0)
    body_words: int = Field(_C.body_words, ge=0)
    #: also compute the keyword severity profile (docs/rules.md#severity-profile) on every scored article
    severity: bool = False
    ndigits: int = Field(_C.ndigits, ge=0, le=10)

    @field_validator("tier_scores")
    @classmethod
    def _tiers(cls, v: dict[str, float]) -> dict[str, float]:
        out = {k.upper(): x for k, x in v.items()}  # env var names are case-insensitive
        bad = sorted(k for k in out if k not in TIER_SCORES)
        if bad:
            msg = f"unknown tier(s) {', '.join(bad)} (tiers are {', '.join(TIER_SCORES)})"
            raise ValueError(msg)
        if any(not 0 <= x <= 100 for x in out.values()):
            msg = "tier scores must be between 0 and 100"
            raise ValueError(msg)
        return {**TIER_SCORES, **out}

    def to_config(self) -> ScoreConfig:
        from newsflow.scoring.severity import SeverityProfile

        return ScoreConfig(
            lam=self.lam, uncertain_penalty=self.uncertain_penalty,
            weights=tuple(getattr(self.weights, c) for c in COMPONENTS),
            tier_scores=dict(self.tier_scores), unknown_tier_score=self.unknown_tier_score,
            relevance_default=self.relevance_default,
            profile=InterestProfile.from_terms(self.interests) if self.interests else None,
            title_weight=self.title_weight, body_words=self.body_words,
            severity=SeverityProfile() if self.severity else None, ndigits=self.ndigits,
        )


# ------------------------------------------------------------------------------ topics (river)
_TopicParams = section_from(
    TopicConfig, "_TopicParams", __name__,
    dim=(int, {"ge": 2, "le": 65_536}),
    n_clusters=(int, {"ge": 1, "le": 10_000}),
    halflife=(float, {"gt": 0, "le": 1}),
    mu=(float, {}),
    sigma=(float, {"gt": 0}),
    terms_decay_every=(int, {"ge": 1}),
)


class TopicSettings(_TopicParams):  # type: ignore[misc,valid-type]
    """Online topics, river k-means on hashed vectors (builds ``TopicConfig``)."""

    @field_validator("dim")
    @classmethod
    def _power_of_two(cls, v: int) -> int:
        if v & (v - 1):
            msg = f"dim must be a power of two, got {v}"
            raise ValueError(msg)
        return v

    def to_config(self) -> TopicConfig:
        return TopicConfig(**dataclass_kwargs(self))


# ------------------------------------------------------------------------------ digests
_D = DigestConfig(time_basis="fetched")

_DigestParams = section_from(
    DigestConfig, "_DigestParams", __name__, exclude=("limits", "summary_words"), base=_D,
    time_basis=(Literal["published", "fetched"], {}),
    eps=(float, {"gt": 0, "le": 2}),
    min_samples=(int, {"ge": 1}),
    n_topics=(int | None, {"ge": 1}),
    top_threshold=(float, {"ge": 0, "le": 100}),
    noteworthy_threshold=(float, {"ge": 0, "le": 100}),
    min_importance=(float, {"ge": 0, "le": 100}),
    block_size=(int, {"ge": 2}),
    svd_dims=(int, {"ge": 1}),
)


class DigestSettings(_DigestParams):  # type: ignore[misc,valid-type]
    """Digests (builds ``DigestConfig`` and the ``DigestSchedule``)."""

    #: the readers' time zone (IANA): morning/midday/evening/weekly digests at local times
    tz: str = "UTC"
    #: the rolling digest for monitoring users: every N minutes, covering the last N minutes
    rolling_minutes: int = Field(60, ge=1, le=24 * 60)

    @field_validator("tz")
    @classmethod
    def _zone(cls, v: str) -> str:
        try:
            ZoneInfo(v)
        except (ValueError, KeyError, OSError):
            near = difflib.get_close_matches(v, sorted(available_timezones()), n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            msg = f"unknown time zone {v!r}{hint}"
            raise ValueError(msg) from None
        return v

    def to_config(self) -> DigestConfig:
        return DigestConfig(**self.model_dump(exclude={"tz", "rolling_minutes"}))

    def schedule(self) -> Any:
        """The digest types and windows (``newsflow.digest.schedule.DigestSchedule``)."""
        from newsflow.digest.schedule import DEFAULT_TYPES, DigestSchedule

        types = tuple(dataclasses.replace(t, every_minutes=self.rolling_minutes) if t.kind == "rolling" else t
                      for t in DEFAULT_TYPES)
        return DigestSchedule(tz=self.tz, types=types)


# ------------------------------------------------------------------------------ stories
_StoryParams = section_from(
    StoryConfig, "_StoryParams", __name__,
    hours={"window_ms": "window_hours", "story_idle_ms": "story_idle_hours",
           "story_idle_ms_dense": "story_idle_dense_hours"},
    window_ms=(float, {"gt": 0, "le": 24 * 365}),
    # (above 1 a title never matches: Layer 3 off)
    title_threshold=(float, {"ge": 0, "le": 2}),
    title_threshold_short=(float, {"ge": 0, "le": 2}),
    story_threshold=(float, {"ge": 0, "le": 1}),
    story_threshold_dense=(float, {"gt": 0, "le": 1}),
    story_idle_ms=(float, {"gt": 0}),
    story_idle_ms_dense=(float, {"gt": 0}),
    max_body_words=(int, {"ge": 1}),
    max_bucket=(int, {"ge": 1}),
    max_postings=(int, {"ge": 1}),
    max_candidates=(int, {"ge": 1}),
)


class StorySettings(_StoryParams):  # type: ignore[misc,valid-type]
    """Layers 3-4 and story ids (builds ``StoryConfig``; docs/user-guide.md, "Stories")."""

    #: story state keys: stories are assigned per feed category, hashed into this many keys
    shards: int = Field(8, ge=1, le=1024)

    def to_config(self) -> StoryConfig:
        return StoryConfig(**dataclass_kwargs(self, exclude={"shards"}))
