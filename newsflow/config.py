"""The configuration tree: one strict object for the whole pipeline and the poller.

Sources, lowest to highest priority: the defaults below, one TOML file (``--config FILE`` or
``NEWSFLOW_CONFIG``), then ``NEWSFLOW_<SECTION>__<KEY>`` environment variables (``__`` between
levels, case-insensitive; lists and tables as JSON, ``kafka.brokers`` also as ``a:9092,b:9092``)::

    # newsflow.toml                         # the same as environment variables
    [dedup]
    window_hours = 48                       # NEWSFLOW_DEDUP__WINDOW_HOURS=48
    [digests]
    tz = "Europe/Berlin"                    # NEWSFLOW_DIGESTS__TZ=Europe/Berlin
    [poller.fetch]
    timeout_s = 20                          # NEWSFLOW_POLLER__FETCH__TIMEOUT_S=20

Strict: an unknown key or variable, a value of the wrong type (in the file, ``"64"`` is not a
number) or an invalid value (a range, a time zone zoneinfo does not know) stops the command
before it starts, with a :class:`ConfigError` that names the key or the variable.

The pure step packages keep their own frozen dataclasses (``StoryConfig``, ``ScoreConfig``,
``TopicConfig``, ``DigestConfig``, ``FetchConfig``, ``PollPolicy``); each section here builds
its dataclass with ``to_config()``, and its defaults are read from that dataclass, so every
default is defined once. ``Settings()`` is the defaults only: it reads neither files nor the
environment (:func:`load_settings` does).
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, get_type_hints
from zoneinfo import ZoneInfo, available_timezones

import orjson
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)
from pydantic_settings import EnvSettingsSource, NoDecode

from newsflow.clustering.topics import TopicConfig
from newsflow.connectors.http_fetch import FetchConfig
from newsflow.dedup.stories import PRESETS, TUNED, StoryConfig
from newsflow.digest.config import DigestConfig
from newsflow.feeds.normalize import NormalizeConfig
from newsflow.feeds.tiers import BUILTIN_TIERS, NO_TABLE, SourceTiers, load_source_tiers
from newsflow.polling.state import PollPolicy
from newsflow.profiles.config import (
    DEFAULT_PROFILE,
    ProfileRates,
    ProfilesConfig,
    ProfileSpec,
    TopicSubscription,
)
from newsflow.scoring.importance import COMPONENTS, TIER_SCORES, InterestProfile, ScoreConfig

ENV_PREFIX = "NEWSFLOW_"
ENV_DELIMITER = "__"
#: ``NEWSFLOW_*`` variables that are not configuration keys (inputs of entry points, dev tools)
RESERVED_ENV = frozenset({
    "NEWSFLOW_CONFIG",  # the configuration file itself
    "NEWSFLOW_INPUT", "NEWSFLOW_OUT", "NEWSFLOW_UNTIL_EOF",  # newsflow.flows.entry
    "NEWSFLOW_SHARED",  # tests: the shared data directory
    "NEWSFLOW_KAFKA_VERSION", "NEWSFLOW_KAFKA_LIBS", "NEWSFLOW_CACHE_DIR", "NEWSFLOW_KAFKA_CDS",  # kafka_local.py
})
HOUR_MS = 3_600_000


class ConfigError(ValueError):
    """A configuration mistake, as one line naming the key or environment variable."""


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)


def _hours(ms: int) -> float:
    return ms / HOUR_MS


def _ms(hours: float) -> int:
    return round(hours * HOUR_MS)


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
        return _ms(self.clock_jump_tolerance_hours)

    def live(self) -> FlowSettings:
        """These settings with the live tick (``newsflow run``)."""
        return self.model_copy(update={"tick_seconds": self.live_tick_seconds})


_N = NormalizeConfig()


class NormalizeSettings(Section):
    """Step 2: parsing and normalization (builds ``NormalizeConfig``)."""

    #: a date more than this far after the fetch time is not trusted (004: future-date gate)
    future_tolerance_seconds: int = Field(_N.future_tolerance_ms // 1000, ge=0)
    #: words per minute for reading time (000 Step 2)
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
    """Step 3, layers 1-2 (GUID + content hash, canonical URL)."""

    #: event-time window of dedup state (000 Step 3: 72 h)
    window_hours: float = Field(72.0, gt=0, le=24 * 365)
    #: dedup state shards (keys), spread over workers; each expires on event time
    shards: int = Field(8, ge=1, le=4096)
    #: emit a record when a feed re-serves an unchanged item on a later poll (normally counted)
    emit_repolls: bool = False

    @property
    def window_ms(self) -> int:
        return _ms(self.window_hours)


# ------------------------------------------------------------------------------ stories
_S = TUNED


class StorySettings(Section):
    """Step 3, layers 3-5, and story ids (builds ``StoryConfig``). ``preset`` picks a measured
    set of defaults (``newsflow.dedup.stories.PRESETS``); keys set beside it override it."""

    #: story state keys: stories are assigned per feed category, hashed into this many keys
    shards: int = Field(8, ge=1, le=1024)
    preset: Literal["seed", "tuned", "seed-jaro-winkler", "seed-simhash", "seed-overlap",
                    "tuned-entities", "tuned-overlap", "story-only", "headlines-2014"] = "tuned"
    window_hours: float = Field(_hours(_S.window_ms), gt=0)
    slab_hours: float = Field(_hours(_S.slab_ms), gt=0)
    title_measure: Literal["jaccard", "overlap", "jaro_winkler"] = _S.title_measure  # type: ignore[assignment]
    title_threshold: float = Field(_S.title_threshold, ge=0, le=2)
    title_threshold_short: float = Field(_S.title_threshold_short, ge=0, le=2)
    short_title_words: int = Field(_S.short_title_words, ge=0)
    content_measure: Literal["minhash", "simhash"] = _S.content_measure  # type: ignore[assignment]
    minhash_threshold: float = Field(_S.minhash_threshold, ge=0, le=1)
    simhash_max_hamming: int = Field(_S.simhash_max_hamming, ge=0, le=64)
    num_perm: int = Field(_S.num_perm, ge=16)
    lsh_bands: int = Field(_S.lsh_bands, ge=1)
    lsh_rows: int = Field(_S.lsh_rows, ge=1)
    body_shingle_words: int = Field(_S.body_shingle_words, ge=1)
    min_sentence_matches: int = Field(_S.min_sentence_matches, ge=0)
    entity_threshold: float = Field(_S.entity_threshold, ge=0, le=1)
    entity_min_keys: int = Field(_S.entity_min_keys, ge=0)
    same_event_hours: float = Field(_hours(_S.same_event_ms), gt=0)
    use_entity_layer: bool = _S.use_entity_layer
    story_match: bool = _S.story_match
    story_threshold: float = Field(_S.story_threshold, ge=0, le=1)
    story_threshold_decay: float = Field(_S.story_threshold_decay, ge=0)
    story_idle_hours: float = Field(_hours(_S.story_idle_ms), gt=0)
    bigram_weight: float = Field(_S.bigram_weight, ge=0)
    slug_weight: float = Field(_S.slug_weight, ge=0)
    body_term_words: int = Field(_S.body_term_words, ge=0)
    body_term_weight: float = Field(_S.body_term_weight, ge=0)
    centroid_max_terms: int = Field(_S.centroid_max_terms, ge=1)
    reopen_closed_stories: bool = _S.reopen_closed_stories
    max_bucket: int = Field(_S.max_bucket, ge=1)
    max_postings: int = Field(_S.max_postings, ge=1)
    max_candidates: int = Field(_S.max_candidates, ge=1)
    #: body words fingerprinted by MinHash/SimHash (a bound on bad input)
    max_body_words: int = Field(_S.max_body_words, ge=1)
    # story matching options (see StoryConfig in newsflow/dedup/stories.py)
    story_score: Literal["centroid", "average"] = _S.story_score  # type: ignore[assignment]
    story_min_average: float = Field(_S.story_min_average, ge=0, le=1)
    story_generic_df: float = Field(_S.story_generic_df, ge=0, le=1)
    story_min_specific: float = Field(_S.story_min_specific, ge=0)
    story_min_concepts: int = Field(_S.story_min_concepts, ge=0)
    #: the threshold when the stream is redundant (0 = story_threshold always)
    story_threshold_dense: float = Field(_S.story_threshold_dense, ge=0, le=1)
    same_publisher_factor: float = Field(_S.same_publisher_factor, ge=0)
    follow_same_publisher_duplicates: bool = _S.follow_same_publisher_duplicates
    redundancy_low: float = Field(_S.redundancy_low, ge=0, le=1)
    redundancy_high: float = Field(_S.redundancy_high, ge=0, le=1)
    #: story_idle_hours when the stream is redundant (0 = story_idle_hours always)
    story_idle_dense_hours: float = Field(_hours(_S.story_idle_ms_dense), ge=0)
    redundancy_min_articles: int = Field(_S.redundancy_min_articles, ge=0)
    #: the redundancy prior remembers the rate of expired slabs (a gap keeps the regime)
    redundancy_memory: bool = _S.redundancy_memory
    #: story_threshold_decay on a redundant stream (negative: story_threshold_decay)
    story_threshold_decay_dense: float = Field(_S.story_threshold_decay_dense, ge=-1)
    #: late merges of open stories on a redundant stream: centroid cosine (0 = off)
    story_merge_dense: float = Field(_S.story_merge_dense, ge=0, le=1)
    #: a story is a late-merge candidate when the article reaches this share of its threshold
    story_merge_reach: float = Field(_S.story_merge_reach, ge=0, le=1)
    #: a dated title does not join a story whose titles from its publisher name other days
    story_date_veto: bool = _S.story_date_veto
    #: sparse stream: no story whose members named only other people / places than the article
    story_name_veto: bool = _S.story_name_veto
    #: sparse stream: threshold x this for a story sharing story_name_min_shared of the
    #: article's rare names (in at most story_name_rare_df of the window's documents); 1 = off
    story_name_boost: float = Field(_S.story_name_boost, gt=0, le=1)
    story_name_rare_df: float = Field(_S.story_name_rare_df, ge=0, le=1)
    story_name_min_shared: int = Field(_S.story_name_min_shared, ge=1)

    @model_validator(mode="before")
    @classmethod
    def _preset_defaults(cls, data: Any) -> Any:
        """Keys not given take the preset's value (the field defaults are the "tuned" preset)."""
        if not isinstance(data, Mapping) or data.get("preset") in (None, "tuned"):
            return data
        preset = PRESETS.get(str(data["preset"]))
        if preset is None:
            return data  # the Literal reports it
        base = _story_fields(preset)
        return {**{k: v for k, v in base.items() if k in cls.model_fields}, **data}

    @model_validator(mode="after")
    def _check(self) -> StorySettings:
        if self.lsh_bands * self.lsh_rows > self.num_perm:
            msg = f"lsh_bands * lsh_rows ({self.lsh_bands * self.lsh_rows}) exceeds num_perm ({self.num_perm})"
            raise ValueError(msg)
        return self

    def to_config(self) -> StoryConfig:
        d = self.model_dump(exclude={"shards", "preset"})
        for name in ("window", "slab", "same_event", "story_idle"):
            d[f"{name}_ms"] = _ms(d.pop(f"{name}_hours"))
        d["story_idle_ms_dense"] = _ms(d.pop("story_idle_dense_hours"))
        # the preset is the base: a StoryConfig field the tree does not list keeps its value
        return dataclasses.replace(PRESETS[self.preset], **d)


def _story_fields(c: StoryConfig) -> dict[str, Any]:
    d = dataclasses.asdict(c)
    d.pop("name")
    for name in ("window", "slab", "same_event", "story_idle"):
        d[f"{name}_hours"] = _hours(d.pop(f"{name}_ms"))
    d["story_idle_dense_hours"] = _hours(d.pop("story_idle_ms_dense"))
    return d


# ------------------------------------------------------------------------------ scoring
_C = ScoreConfig()
_W = dict(zip(COMPONENTS, _C.weights, strict=True))


class ScoreWeights(Section):
    """000 Step 4: importance = weighted sum of five 0-100 components (the weights sum to 1)."""

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
    """Step 4: importance (builds ``ScoreConfig``)."""

    #: recency decay: exp(-lambda * hours) (001's recency table)
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
    #: also compute 004's keyword severity profile on every scored article
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
            weights=tuple(getattr(self.weights, c) for c in COMPONENTS),  # type: ignore[arg-type]
            tier_scores=dict(self.tier_scores), unknown_tier_score=self.unknown_tier_score,
            relevance_default=self.relevance_default,
            profile=InterestProfile.from_terms(self.interests) if self.interests else None,
            title_weight=self.title_weight, body_words=self.body_words,
            severity=SeverityProfile() if self.severity else None, ndigits=self.ndigits,
        )


# ------------------------------------------------------------------------------ topics (river)
_T = TopicConfig()


class TopicSettings(Section):
    """Step 5: online topics, river k-means on hashed vectors (builds ``TopicConfig``)."""

    dim: int = Field(_T.dim, ge=2, le=65_536)
    n_clusters: int = Field(_T.n_clusters, ge=1, le=10_000)
    halflife: float = Field(_T.halflife, gt=0, le=1)
    mu: float = _T.mu
    sigma: float = Field(_T.sigma, gt=0)
    seed: int = Field(_T.seed, ge=0)
    title_weight: int = Field(_T.title_weight, ge=0)
    body_words: int = Field(_T.body_words, ge=0)
    label_terms: int = Field(_T.label_terms, ge=0)
    terms_decay_every: int = Field(_T.terms_decay_every, ge=1)

    @field_validator("dim")
    @classmethod
    def _power_of_two(cls, v: int) -> int:
        if v & (v - 1):
            msg = f"dim must be a power of two, got {v}"
            raise ValueError(msg)
        return v

    def to_config(self) -> TopicConfig:
        return TopicConfig(**self.model_dump())


# ------------------------------------------------------------------------------ dataclass sections
def _section_from(cls: type, name: str, *, exclude: tuple[str, ...] = (),
                  base: Any = None, **overrides: tuple[Any, dict[str, Any]]) -> type[Section]:
    """A section whose keys, types and defaults are those of the frozen dataclass ``cls``:
    numbers must be >= 0 unless ``overrides`` gives ``(type, Field kwargs)`` for a key."""
    hints = get_type_hints(cls)
    defaults = base if base is not None else cls()
    spec: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name in exclude:
            continue
        tp, kw = overrides.get(f.name, (hints[f.name], {"ge": 0} if hints[f.name] in (int, float) else {}))
        spec[f.name] = (tp, Field(getattr(defaults, f.name), **kw))
    model = create_model(name, __base__=Section, __doc__=f"Builds ``{cls.__name__}``.", **spec)
    model.__module__ = __name__
    return model


_D = DigestConfig(time_basis="fetched")

_DigestParams = _section_from(
    DigestConfig, "_DigestParams", exclude=("limits", "summary_words"), base=_D,
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
    """Step 6: digests (builds ``DigestConfig`` and the ``DigestSchedule``)."""

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


# ------------------------------------------------------------------------------ poller
_FetchSettings = _section_from(
    FetchConfig, "FetchSettings",
    timeout_s=(float, {"gt": 0, "le": 600}), io_timeout_s=(float, {"gt": 0, "le": 600}),
    retries=(int, {"ge": 0, "le": 10}), max_bytes=(int, {"ge": 1024}),
    max_decoded_bytes=(int, {"ge": 1024}), max_connections_per_origin=(int, {"ge": 1}),
)
_PolicySettings = _section_from(
    PollPolicy, "PolicySettings",
    min_interval_s=(float, {"gt": 0}), max_interval_s=(float, {"gt": 0}),
    jitter_ratio=(float, {"ge": 0, "le": 1}), rhythm_alpha=(float, {"gt": 0, "le": 1}),
    default_feed_type=(str, {"min_length": 1}),
)


class PollerSettings(Section):
    """The feed poller (``connectors.poller.poller_config`` builds its ``PollerConfig``; topic names
    from ``kafka``)."""

    #: concurrent fetches per worker
    concurrency: int = Field(50, ge=1, le=10_000)
    #: concurrent fetches per registrable domain
    per_domain_concurrency: int = Field(2, ge=1, le=100)
    #: Bytewax source partitions (feeds sharded by registrable domain); keep it stable
    partitions: int = Field(4, ge=1, le=1024)
    #: heartbeat tick to every feeds.raw partition every N seconds (0: off). The flow merges the
    #: partitions on event time, so an item waits until every partition has passed its tick: a
    #: quiet partition speaks only through heartbeats, which bound the live latency
    heartbeat_s: float = Field(1.0, ge=0)
    #: bodies larger than this go to ``blob_dir`` (``body_ref``) instead of inline base64
    max_inline_body_bytes: int = Field(700_000, ge=1)
    #: where bodies over the inline limit are stored; unset: they are reported ``too_large``
    blob_dir: str | None = None
    #: longest a partition runs the shared event loop inside one ``next_batch`` (s)
    loop_slice_s: float = Field(0.05, gt=0)
    #: longest an idle partition sleeps before re-checking its schedule (s)
    idle_wakeup_s: float = Field(5.0, gt=0)
    fetch: _FetchSettings = _FetchSettings()  # type: ignore[valid-type]
    policy: _PolicySettings = _PolicySettings()  # type: ignore[valid-type]


def _dump(section: Any) -> dict[str, Any]:
    """A generated section (see :func:`_section_from`) as keyword arguments of its dataclass."""
    return dict(section.model_dump())


# ------------------------------------------------------------------------------ profiles
class TopicSubscriptionSettings(Section):
    """A followed topic: keywords (phrases; every stem counts) with one weight."""

    keywords: list[str] = Field(min_length=1)
    weight: float = 1.0


class ProfileSettings(Section):
    """One named profile (builds ``ProfileSpec``): explicit subscriptions and its own digests."""

    #: topic name -> ``{keywords = [...], weight = W}`` or just a keyword list (weight 1)
    topics: dict[str, TopicSubscriptionSettings | list[str]] = Field(default_factory=dict)
    #: feed categories and publishers followed (``category:`` / ``publisher:`` meta terms)
    categories: list[str] = Field(default_factory=list)
    publishers: list[str] = Field(default_factory=list)
    meta_weight: float = Field(1.0, ge=0)
    #: digest types delivered for this profile (key ``profile:type:window_start``); empty: none
    digests: list[str] = Field(default_factory=list)

    @field_validator("digests")
    @classmethod
    def _types(cls, v: list[str]) -> list[str]:
        from newsflow.digest.schedule import DEFAULT_TYPES

        known = [t.name for t in DEFAULT_TYPES]
        bad = [x for x in v if x not in known]
        if bad:
            msg = f"unknown digest type(s) {', '.join(bad)} (types are {', '.join(known)})"
            raise ValueError(msg)
        return v

    def to_spec(self, name: str) -> ProfileSpec:
        topics = []
        for tname, t in sorted(self.topics.items()):
            sub = t if isinstance(t, TopicSubscriptionSettings) else TopicSubscriptionSettings(keywords=t)
            topics.append(TopicSubscription(tname, tuple(sub.keywords), sub.weight))
        return ProfileSpec(name=name, topics=tuple(topics), categories=tuple(self.categories),
                           publishers=tuple(self.publishers), meta_weight=self.meta_weight,
                           digests=tuple(self.digests))


_PC = ProfilesConfig()
_RatesSettings = _section_from(
    ProfileRates, "ProfileRatesSettings",
    decay_per_week=(float, {"ge": 0, "le": 1}), max_terms=(int, {"ge": 1}), max_articles=(int, {"ge": 1}),
)


class ProfilesSettings(Section):
    """Interest profiles that learn (builds ``ProfilesConfig``)::

        [profiles.rates]                 # NEWSFLOW_PROFILES__RATES__READ=0.3
        read = 0.3
        [profiles.profile.reader]        # NEWSFLOW_PROFILES__PROFILE__READER__DIGESTS='["evening_recap"]'
        digests = ["evening_recap"]
        categories = ["science"]
        [profiles.profile.reader.topics]
        space = { keywords = ["nasa", "orbit"], weight = 2.0 }

    With any profile configured, the flow reads the ``interactions`` topic as a second input
    and profiles learn from it; a configured ``default`` profile also sets the relevance of
    every scored article record."""

    rates: _RatesSettings = _RatesSettings()  # type: ignore[valid-type]
    #: profile name -> its subscriptions (a ``default`` profile, neutral, is added when missing)
    profile: dict[str, ProfileSettings] = Field(default_factory=dict)
    #: with a configured ``default`` profile, an article fetched at ``f`` gets the relevance of
    #: the default profile as of ``f - relevance_lag_seconds`` (the interactions' clock may trail
    #: the articles' by this much before articles wait for it: keep it above the heartbeat)
    relevance_lag_seconds: float = Field(_PC.relevance_lag_ms / 1000, ge=0, le=7 * 86_400)

    @field_validator("profile")
    @classmethod
    def _names(cls, v: dict[str, ProfileSettings]) -> dict[str, ProfileSettings]:
        import re

        bad = [n for n in v if not re.fullmatch(r"[A-Za-z0-9._-]{1,100}", n)]
        if bad:
            msg = f"profile name(s) {', '.join(map(repr, bad))}: use letters, digits, '.', '_', '-'"
            raise ValueError(msg)
        return v

    @property
    def configured(self) -> bool:
        """Any profile configured: the flow reads ``interactions`` and profiles learn."""
        return bool(self.profile)

    @property
    def live_default(self) -> bool:
        """A ``default`` profile is configured: its live relevance goes into every article record."""
        return DEFAULT_PROFILE in self.profile

    def to_config(self) -> ProfilesConfig:
        specs = {name: p.to_spec(name) for name, p in sorted(self.profile.items())}
        specs.setdefault(DEFAULT_PROFILE, ProfileSpec(DEFAULT_PROFILE))
        ordered = [specs.pop(DEFAULT_PROFILE), *specs.values()]
        return ProfilesConfig(profiles=tuple(ordered), rates=ProfileRates(**_dump(self.rates)),
                              live_relevance=self.live_default, relevance_lag_ms=round(self.relevance_lag_seconds * 1000))


# ------------------------------------------------------------------------------ kafka
class Topics(Section):
    """Topic names (the contracts in ``schemas/`` are per topic role, whatever the name)."""

    raw: str = Field("feeds.raw", min_length=1, max_length=249, pattern=r"^[A-Za-z0-9._-]+$")
    articles: str = Field("articles", min_length=1, max_length=249, pattern=r"^[A-Za-z0-9._-]+$")
    digests: str = Field("digests", min_length=1, max_length=249, pattern=r"^[A-Za-z0-9._-]+$")
    feed_health: str = Field("feed-health", min_length=1, max_length=249, pattern=r"^[A-Za-z0-9._-]+$")
    deadletter: str = Field("deadletter", min_length=1, max_length=249, pattern=r"^[A-Za-z0-9._-]+$")
    #: reader interactions (second input; profiles learn from it): ``schemas/interactions.v1.json``
    interactions: str = Field("interactions", min_length=1, max_length=249, pattern=r"^[A-Za-z0-9._-]+$")
    #: the current state of every story (compacted: the latest record per story id)
    stories: str = Field("stories", min_length=1, max_length=249, pattern=r"^[A-Za-z0-9._-]+$")

    def roles(self) -> dict[str, str]:
        """role -> topic name, in pipeline order."""
        return {r: getattr(self, r) for r in type(self).model_fields}


class RetentionHours(Section):
    """How long each topic keeps messages. ``feeds.raw`` must cover a replay of the dedup
    window (72 h) with room for an outage; the compacted topics keep the latest record per key
    for this long."""

    raw: float = Field(7 * 24, gt=0)
    articles: float = Field(30 * 24, gt=0)
    digests: float = Field(90 * 24, gt=0)
    feed_health: float = Field(30 * 24, gt=0)
    deadletter: float = Field(14 * 24, gt=0)
    interactions: float = Field(30 * 24, gt=0)
    stories: float = Field(30 * 24, gt=0)


class KafkaSettings(Section):
    """The broker, the topics newsflow creates, and how long a command waits for the broker."""

    brokers: Annotated[list[str], NoDecode] = Field(default_factory=lambda: ["127.0.0.1:9092"], min_length=1)
    topics: Topics = Topics()
    #: partitions of the topics newsflow creates (``feeds.raw``'s partitions are the flow's
    #: parallelism); existing topics are left as they are
    partitions: int = Field(1, ge=1, le=10_000)
    replication_factor: int = Field(1, ge=1, le=32)
    retention_hours: RetentionHours = RetentionHours()
    #: an unreachable broker is reported after this long (s)
    timeout_s: float = Field(10.0, gt=0, le=300)
    #: a record not acknowledged by Kafka this long after it was produced counts as not
    #: delivered (librdkafka's ``message.timeout.ms`` of every producer: the flow's sinks, the
    #: poller's, ``newsflow produce``): the flow and the poller then stop without committing,
    #: ``produce`` exits 2 with the count it could not deliver
    message_timeout_ms: int = Field(300_000, ge=1000, le=2_147_483_647)
    #: a running flow asks the broker for its cluster id this often (s) and stops with one line
    #: when it is another cluster than the one it started reading (a new, empty cluster at the
    #: same address): reading on would skip the new cluster's records before the old offset
    cluster_check_s: float = Field(30.0, gt=0, le=3600)

    @field_validator("brokers", mode="before")
    @classmethod
    def _split(cls, v: Any) -> Any:
        return [b.strip() for b in v.split(",") if b.strip()] if isinstance(v, str) else v

    @field_validator("brokers")
    @classmethod
    def _host_port(cls, v: list[str]) -> list[str]:
        for b in v:
            host, _, port = b.rpartition(":")
            if not host or not port.isdigit():
                msg = f"broker {b!r} is not HOST:PORT"
                raise ValueError(msg)
        return v


# ------------------------------------------------------------------------------ the tree
class Settings(Section):
    """The whole configuration; every component gets its part from here."""

    flow: FlowSettings = FlowSettings()
    normalize: NormalizeSettings = NormalizeSettings()
    dedup: DedupSettings = DedupSettings()
    stories: StorySettings = StorySettings()
    scoring: ScoringSettings = ScoringSettings()
    topics: TopicSettings = TopicSettings()
    digests: DigestSettings = DigestSettings()
    poller: PollerSettings = PollerSettings()
    kafka: KafkaSettings = KafkaSettings()
    profiles: ProfilesSettings = ProfilesSettings()


#: what old flat keys became (shown in the "unknown key" message)
MOVED = {
    "dedup_window_ms": "dedup.window_hours", "dedup_shards": "dedup.shards",
    "emit_repolls": "dedup.emit_repolls", "story_shards": "stories.shards", "tick_ms": "flow.tick_seconds",
    "live_tick_ms": "flow.live_tick_seconds",
    "digest_tz": "digests.tz", "rolling_minutes": "digests.rolling_minutes",
    "future_tolerance_ms": "normalize.future_tolerance_seconds", "reading_wpm": "normalize.reading_wpm",
    "partial_max_words": "normalize.partial_max_words", "fast_parse": "normalize.fast_parse",
    "blob_dir": "flow.blob_dir", "max_record_bytes": "flow.max_record_bytes",
    "validate_outputs": "flow.validate_outputs", "clock_jump_tolerance_ms": "flow.clock_jump_tolerance_hours",
    "max_payload_bytes": "normalize.max_payload_bytes", "max_items_per_payload": "normalize.max_items_per_payload",
    "max_item_body_chars": "normalize.max_item_body_chars",
    "max_deadletter_original_bytes": "normalize.max_deadletter_original_bytes",
    "kafka_timeout_s": "kafka.timeout_s",
    "poison_after_crashes": "flow.poison_after_crashes",
    "newsflow": "(no [newsflow] table: sections are top-level, e.g. [dedup])",
    "poller.topics": "[kafka.topics] (one set of topic names for the poller and the flow)",
}


# ------------------------------------------------------------------------------ loading
def _paths(model: type[BaseModel], prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every key path of the tree (sections and leaves)."""
    for name, f in model.model_fields.items():
        p = (*prefix, name)
        yield p
        tp = f.annotation
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            yield from _paths(tp, p)


ALL_PATHS = [".".join(p) for p in _paths(Settings)]


def _env_name(path: tuple[str, ...] | str) -> str:
    parts = path.split(".") if isinstance(path, str) else path
    return ENV_PREFIX + ENV_DELIMITER.join(p.upper() for p in parts)


def _suggest(word: str, choices: list[str]) -> str:
    near = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return f" (did you mean {near[0]!r}?)" if near else ""


def _loc(loc: tuple[Any, ...]) -> str:
    return ".".join(str(x) for x in loc if not str(x).startswith(("function-", "tagged-union")))


def _describe(err: Mapping[str, Any], where: str, key: str) -> str:
    msg = str(err["msg"]).removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        last = key.rsplit(".", 1)[-1]
        if key in MOVED or last in MOVED:
            return f"{where}unknown key {key!r}: it is now {MOVED.get(key, MOVED.get(last))}"
        near = difflib.get_close_matches(key, ALL_PATHS + list(MOVED), n=1, cutoff=0.6)
        hint = f" (did you mean {MOVED.get(near[0], near[0])!r}?)" if near else ""
        return f"{where}unknown key {key!r}{hint}"
    got = err.get("input")
    shown = f" = {got!r}" if got is not None and not isinstance(got, dict | list) else ""
    return f"{where}{key}{shown}: {msg}"


def _errors(e: ValidationError, where: str, env_names: Mapping[str, str] | None = None) -> ConfigError:
    out = []
    for err in e.errors():
        key = _loc(err["loc"])
        if env_names is not None:  # name the variable, not the key
            var = next((v for k, v in env_names.items() if key == k or key.startswith(k + ".")), None)
            if var is not None:
                msg = str(err["msg"]).removeprefix("Value error, ")
                got = err.get("input")
                out.append(f"{var}={got!r}: {msg} (key {key})" if isinstance(got, str | int | float)
                           else f"{var}: {msg} (key {key})")
                continue
        out.append(_describe(err, where, key))
    return ConfigError("; ".join(out))


def read_config_file(path: str | Path) -> dict[str, Any]:
    """The TOML file as a dict; a missing file or a syntax error is a :class:`ConfigError`."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        msg = f"config file {str(p)!r} not found"
        raise ConfigError(msg) from None
    except (OSError, UnicodeDecodeError) as e:
        msg = f"config file {str(p)!r} unreadable: {e}"
        raise ConfigError(msg) from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        msg = f"{p}: invalid TOML: {e}"
        raise ConfigError(msg) from None


def read_env(env: Mapping[str, str] | None = None) -> tuple[dict[str, Any], dict[str, str]]:
    """``NEWSFLOW_*`` variables as a nested dict (via pydantic-settings), and key -> variable.

    A ``NEWSFLOW_`` variable that is neither a key of the tree nor in :data:`RESERVED_ENV` is a
    :class:`ConfigError`: a typo never silently does nothing."""
    env = dict(os.environ if env is None else env)
    known = {_env_name(p): p for p in ALL_PATHS}
    names: dict[str, str] = {}
    for var in sorted(env):
        up = var.upper()
        if not up.startswith(ENV_PREFIX) or up in RESERVED_ENV:
            continue
        path = known.get(up)
        if path is None:
            # a key inside a table (NEWSFLOW_SCORING__TIER_SCORES__T1) belongs to that table
            path = next((p for n, p in known.items() if up.startswith(n + ENV_DELIMITER)
                         and isinstance(_field_default(p), dict)), None)
        if path is None:
            guess = _suggest(up, sorted(known))
            msg = f"unknown environment variable {var}{guess} (keys are NEWSFLOW_<SECTION>__<KEY>, e.g. NEWSFLOW_DEDUP__WINDOW_HOURS)"
            raise ConfigError(msg)
        names[path] = var
        default = _field_default(path) if path.count(".") else None
        if isinstance(default, list | tuple | dict | frozenset) and path != "kafka.brokers":
            try:
                orjson.loads(env[var])
            except orjson.JSONDecodeError:
                example = "{\"T1\": 95}" if isinstance(default, dict) else "[1, 2]"
                msg = f"{var}={env[var]!r}: not JSON (lists and tables are JSON, e.g. {example})"
                raise ConfigError(msg) from None
    src = EnvSettingsSource(
        Settings,  # type: ignore[arg-type]  # pydantic-settings reads model_fields only
        env_prefix=ENV_PREFIX, env_nested_delimiter=ENV_DELIMITER, case_sensitive=False,
    )
    src.env_vars = {k.lower(): v for k, v in env.items() if k.upper().startswith(ENV_PREFIX)
                    and k.upper() not in RESERVED_ENV}
    try:
        data = src()
    except Exception as e:  # pydantic-settings' SettingsError: a value that is not valid JSON
        cause = e.__cause__ or e
        msg = f"environment: {e}: {cause}" if cause is not e else f"environment: {e}"
        raise ConfigError(msg) from None
    return data, names


def _field_default(path: str) -> Any:
    model: Any = Settings()
    for part in path.split("."):
        model = getattr(model, part)
    return model


def _deep_merge(a: dict[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(a)
    for k, v in b.items():
        out[k] = _deep_merge(out[k], v) if isinstance(v, Mapping) and isinstance(out.get(k), dict) else v
    return out


def load_settings(path: str | Path | None = None, env: Mapping[str, str] | None = None) -> Settings:
    """Defaults <- the TOML file <- ``NEWSFLOW_*`` environment variables; strict (see module doc).

    ``path=None`` uses ``NEWSFLOW_CONFIG`` if set. Raises :class:`ConfigError`."""
    return load_with_sources(path, env)[0]


def load_with_sources(path: str | Path | None = None, env: Mapping[str, str] | None = None
                      ) -> tuple[Settings, dict[str, str]]:
    """The settings and, for every leaf key, where its value came from: ``default``,
    ``file <path>`` or ``env NEWSFLOW_...``."""
    env_map = os.environ if env is None else env
    if path is None and env_map.get("NEWSFLOW_CONFIG"):
        path = env_map["NEWSFLOW_CONFIG"]
    file_data: dict[str, Any] = {}
    if path is not None:
        file_data = read_config_file(path)
        try:  # the file's types are exact: strict validation (TOML has ints, floats, strings)
            Settings.model_validate_json(orjson.dumps(file_data), strict=True)
        except ValidationError as e:
            raise _errors(e, f"{path}: ") from None
    env_data, env_names = read_env(env_map)
    if env_data:
        try:  # variables are strings: lax validation, errors name the variable
            Settings.model_validate(env_data)
        except ValidationError as e:
            raise _errors(e, "", env_names) from None
    try:
        settings = Settings.model_validate(_deep_merge(file_data, env_data))
    except ValidationError as e:  # only cross-key checks can fail here
        raise _errors(e, f"{path}: " if path else "", env_names) from None
    sources = {}
    file_leaves = set(_leaves(file_data))
    for key in leaf_paths(settings):
        if any(key == n or key.startswith(n + ".") for n in env_names):
            sources[key] = f"env {env_names.get(key) or next(v for n, v in env_names.items() if key.startswith(n + '.'))}"
        elif key in file_leaves or any(x.startswith(key + ".") for x in file_leaves) or _inside(key, file_leaves):
            sources[key] = f"file {path}"
        elif key.startswith("stories.") and settings.stories.preset != "tuned":
            sources[key] = f"preset {settings.stories.preset}"
        else:
            sources[key] = "default"
    return settings, sources


def _inside(key: str, leaves: set[str]) -> bool:
    return any(key.startswith(x + ".") for x in leaves)


def _leaves(d: Mapping[str, Any], prefix: str = "") -> Iterator[str]:
    for k, v in d.items():
        p = f"{prefix}{k}"
        if isinstance(v, Mapping) and v:
            yield from _leaves(v, p + ".")
        else:
            yield p


def leaf_paths(model: BaseModel, prefix: str = "") -> Iterator[str]:
    """Leaf keys, a table's own keys before its sub-tables (the order TOML needs)."""
    names = list(type(model).model_fields)
    for name in names:
        if not isinstance(getattr(model, name), BaseModel):
            yield f"{prefix}{name}"
    for name in names:
        v = getattr(model, name)
        if isinstance(v, BaseModel):
            yield from leaf_paths(v, f"{prefix}{name}.")


def show(settings: Settings, sources: Mapping[str, str]) -> str:
    """The effective configuration as TOML, each value with its source as a comment."""
    lines: list[str] = []
    section = None
    for key in leaf_paths(settings):
        table, _, leaf = key.rpartition(".")
        if table != section:
            lines.append(("" if section is None else "\n") + f"[{table}]")
            section = table
        v: Any = settings
        for part in key.split("."):
            v = getattr(v, part)
        src = sources.get(key, "default")
        lines.append(f"# {leaf} is unset  # {src}" if v is None else f"{leaf} = {_toml_value(v)}  # {src}")
    return "\n".join(lines) + "\n"


def _toml_value(v: Any) -> str:
    if isinstance(v, BaseModel):  # a table of sections (profiles.profile.NAME)
        v = v.model_dump()
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, str):
        return orjson.dumps(v).decode()
    if isinstance(v, Mapping):
        return "{ " + ", ".join(f"{orjson.dumps(str(k)).decode()} = {_toml_value(x)}" for k, x in v.items()) + " }" if v else "{}"
    if isinstance(v, list | tuple | frozenset | set):
        items = sorted(v) if isinstance(v, frozenset | set) else list(v)
        return "[" + ", ".join(_toml_value(x) for x in items) + "]"
    return orjson.dumps(str(v)).decode()
