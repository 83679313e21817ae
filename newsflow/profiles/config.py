"""Profile configuration: named profiles built from explicit subscriptions.

The frozen dataclasses the profile steps use; the ``profiles`` section of the one
configuration tree (``newsflow.config.ProfilesSettings``: the ``--config`` TOML file and
``NEWSFLOW_PROFILES__...`` variables) builds them. TOML form::

    [profiles.rates]          # optional; the defaults are documented on ProfileRates
    read = 0.2

    [profiles.profile.science]
    digests = ["morning_brief", "evening_recap"]  # asks for its own digests (profile:type:start)
    categories = ["science"]
    publishers = ["Nature"]
    [profiles.profile.science.topics]
    space = { keywords = ["nasa", "rocket", "orbit"], weight = 1.0 }
"""

from __future__ import annotations

from dataclasses import dataclass, field

DEFAULT_PROFILE = "default"
WEEK_MS = 7 * 24 * 3_600_000


@dataclass(frozen=True, slots=True)
class TopicSubscription:
    """A topic the reader follows: keywords (phrases; every stem counts) with one weight."""

    name: str
    keywords: tuple[str, ...]
    weight: float = 1.0


@dataclass(frozen=True, slots=True)
class ProfileSpec:
    """One named profile: explicit subscriptions and the digest types it wants for itself."""

    name: str
    topics: tuple[TopicSubscription, ...] = ()
    categories: tuple[str, ...] = ()
    publishers: tuple[str, ...] = ()
    #: weight of a subscribed category / publisher meta term
    meta_weight: float = 1.0
    #: digest types (``morning``, ``rolling``, ...) delivered for this profile; empty: none
    digests: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.topics or self.categories or self.publishers)


@dataclass(frozen=True, slots=True)
class ProfileRates:
    """Learning rates (Rocchio-style steps on L2-normalized article vectors).

    A ``read`` adds ``read`` x the article vector (more with dwell time: x ``1 + dwell_bonus``
    when the reader stayed ``dwell_full_s`` or longer, linearly in between), ``save`` adds
    ``save`` x it; ``skip`` subtracts ``skip`` x it, ``hide`` ``hide`` x it. Every weight not
    engaged by an interaction decays by ``decay_per_week`` (10 %) per week of event time since
    it was last engaged, towards 0 (neutral): docs/rules.md#interest-profiles."""

    read: float = 0.20
    save: float = 0.40
    skip: float = 0.10
    hide: float = 0.40
    dwell_full_s: float = 60.0
    dwell_bonus: float = 0.5
    decay_per_week: float = 0.10
    #: terms kept per profile (largest |weight| first): bounded state
    max_terms: int = 2000
    #: article vectors kept for joining interactions (event time after the article's fetch)
    article_ttl_ms: int = 7 * 24 * 3_600_000
    #: and at most this many per profile key (oldest dropped first)
    max_articles: int = 200_000

    def step(self, action: str, dwell_s: float | None) -> float:
        """Signed step of an action: positive toward the article, negative away."""
        if action == "read":
            bonus = 0.0
            if dwell_s is not None and self.dwell_full_s > 0:
                bonus = self.dwell_bonus * min(1.0, max(0.0, dwell_s) / self.dwell_full_s)
            return self.read * (1.0 + bonus)
        if action == "save":
            return self.save
        if action == "skip":
            return -self.skip
        if action == "hide":
            return -self.hide
        msg = f"unknown action {action!r}"
        raise ValueError(msg)


@dataclass(frozen=True, slots=True)
class ProfilesConfig:
    profiles: tuple[ProfileSpec, ...] = (ProfileSpec(DEFAULT_PROFILE),)
    rates: ProfileRates = field(default_factory=ProfileRates)
    #: the ``default`` profile's live relevance goes into every scored article record (a
    #: ``default`` profile is configured); otherwise records keep the scoring step's relevance
    live_relevance: bool = False
    #: an article fetched at ``f`` is scored with the default profile as of ``f - lag``: the
    #: interactions' clock (reader events, heartbeats) may trail the articles' by this much
    #: before an article waits for it (live latency)
    relevance_lag_ms: int = 60_000

    def get(self, name: str) -> ProfileSpec | None:
        for p in self.profiles:
            if p.name == name:
                return p
        return None

    @property
    def names(self) -> list[str]:
        return [p.name for p in self.profiles]

    @property
    def with_digests(self) -> list[ProfileSpec]:
        return [p for p in self.profiles if p.digests]
