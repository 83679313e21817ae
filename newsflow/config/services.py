"""The sections of the services around the flow: the feed poller, interest profiles and
Kafka (the broker, topic names, retention)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, field_validator
from pydantic_settings import NoDecode

from newsflow.config.base import Section, dataclass_kwargs, section_from
from newsflow.connectors.http_fetch import FetchConfig
from newsflow.polling.state import PollPolicy
from newsflow.profiles.config import (
    DEFAULT_PROFILE,
    ProfileRates,
    ProfilesConfig,
    ProfileSpec,
    TopicSubscription,
)

__all__ = [
    "KafkaSettings",
    "PollerSettings",
    "ProfileSettings",
    "ProfilesSettings",
    "RetentionHours",
    "TopicSubscriptionSettings",
    "Topics",
]


# ------------------------------------------------------------------------------ poller
_FetchSettings = section_from(
    FetchConfig, "_FetchSettings", __name__,
    timeout_s=(float, {"gt": 0, "le": 600}), io_timeout_s=(float, {"gt": 0, "le": 600}),
    retries=(int, {"ge": 0, "le": 10}), max_bytes=(int, {"ge": 1024}),
    max_decoded_bytes=(int, {"ge": 1024}), max_connections_per_origin=(int, {"ge": 1}),
)
_PolicySettings = section_from(
    PollPolicy, "_PolicySettings", __name__,
    min_interval_s=(float, {"gt": 0}), max_interval_s=(float, {"gt": 0}),
    jitter_ratio=(float, {"ge": 0, "le": 1}), rhythm_alpha=(float, {"gt": 0, "le": 1}),
    default_feed_type=(str, {"min_length": 1}),
)


class PollerSettings(Section):
    """The feed poller (``connectors.poller.config.poller_config`` builds its ``PollerConfig``;
    topic names from ``kafka``)."""

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
_RatesSettings = section_from(
    ProfileRates, "_RatesSettings", __name__,
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
        return ProfilesConfig(profiles=tuple(ordered), rates=ProfileRates(**dataclass_kwargs(self.rates)),
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
