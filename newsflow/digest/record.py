"""The shape of a ``digests.v1`` record as assembly builds it (``schemas/digests.v1.json``): typed
dictionaries, so every step that fills one in is checked; at the sink it is JSON as it is."""

from __future__ import annotations

from typing import NotRequired, TypedDict

from newsflow.model.vocab import Trend


class Lead(TypedDict):
    article_id: str
    title: str
    url: str | None
    publisher: str
    feed_id: str
    tier: str | None
    published_at: str
    score: float


class Related(TypedDict):
    article_id: str
    title: str
    publisher: str
    url: str | None
    score: float


class Item(TypedDict):
    label: str
    trend: Trend | None
    score: float
    entity: str | None
    terms: list[str]
    lead: Lead
    summary: str
    summary_words: int
    related_count: int
    related_sources: list[str]
    related: list[Related]
    article_ids: list[str]
    story_ids: list[str]
    size: int
    topic_key: str
    #: a profile's digest, or live relevance: the lead's relevance
    relevance: NotRequired[float | None]


class Section(TypedDict):
    name: str
    items: list[Item]
    empty_reason: NotRequired[str]


class IndexTopic(TypedDict):
    """A multi-article topic of the window, as the next window's trends match it."""

    key: str
    label: str
    size: int
    score: float
    trend: Trend | None
    term_hashes: list[str]
    story_ids: list[str]


class Check(TypedDict):
    check: str
    ok: bool
    action: str | None


class FeedRow(TypedDict):
    feed_id: str
    polls: int
    successful: int
    errors: int
    success_rate: float | None
    last_status: str | None
    reliability: float | None
    alert: str | None
    unhealthy: bool


class FeedHealth(TypedDict):
    """The Feed Health Report of a window (``newsflow.digest.health``), with the window's
    article counts and trends (added by assembly)."""

    feeds_polled: int
    feeds_seen: int
    polls: int
    successful: int
    errors: int
    success_rate: float | None
    unhealthy_feeds: list[str]
    feeds: list[FeedRow]
    new_articles: NotRequired[int]
    duplicates_removed: NotRequired[int]
    emerging_topics: NotRequired[list[str]]
    declining_topics: NotRequired[list[str]]


class ProfileTerm(TypedDict):
    term: str
    weight: float


class DigestProfile(TypedDict):
    id: str
    top_terms: list[ProfileTerm]


class Digest(TypedDict):
    schema: str
    schema_version: int
    digest_id: str
    digest_type: str
    title: str
    window_start: str
    window_end: str
    generated_at: str
    final: bool
    timezone: str
    article_count: int
    duplicates_removed: int
    selected_count: int
    cluster_count: int
    clustering: str
    sections: list[Section]
    feed_health: FeedHealth
    topic_index: list[IndexTopic]
    self_checks: list[Check]
    #: a profile's digest: the profile and its top terms
    profile: NotRequired[DigestProfile]


class DigestMemory(TypedDict):
    """What a digest keeps for the next window of its type (:func:`~newsflow.digest.trends.digest_memory`)."""

    digest_id: str | None
    window_end: str | None
    topic_index: list[IndexTopic]


#: the previous window of a type, as trends read it: its digest or its memory
Previous = Digest | DigestMemory
