"""Vocabularies shared by several steps, as ``StrEnum``: one definition per word list.

A ``StrEnum`` member *is* its string: it compares equal to it, hashes like it, formats as it, and
``orjson`` writes it as the plain string, so records and record ids are the same bytes as with
bare strings:

>>> HealthStatus.NOT_MODIFIED == "not_modified"
True
>>> import orjson
>>> orjson.dumps({"status": HealthStatus.NOT_MODIFIED})
b'{"status":"not_modified"}'
"""

from __future__ import annotations

from enum import StrEnum

__all__ = [
    "FAILED_POLL_STATUSES",
    "SUCCESS_STATUSES",
    "UNHEALTHY_STATUSES",
    "Disposition",
    "HealthStatus",
    "StoryPhase",
    "Trend",
]


class Disposition(StrEnum):
    """``disposition`` of an ``articles`` record: what dedup and the story step decided about
    the article (``schemas/articles.v1.json``; a test checks that both list the same words)."""

    UNIQUE = "unique"  # a new article
    EXACT_DUPLICATE = "exact_duplicate"  # the same GUID or canonical URL, unchanged
    REVISION = "revision"  # the same item, edited (``changed`` says what)
    NEAR_DUPLICATE = "near_duplicate"  # another item with (nearly) the same title or content
    SAME_EVENT = "same_event"  # another article about the story's event


class HealthStatus(StrEnum):
    """``status`` of a ``feed-health`` record (``schemas/feed-health.v1.json``; a test checks
    that both list the same words), docs/rules.md#feed-statuses."""

    OK = "ok"
    NOT_MODIFIED = "not_modified"  # 304, or the same body again
    EMPTY = "empty"  # a feed without items (or no body)
    ALL_UNDATED = "all_undated"  # every item without a trustworthy date
    PARTIAL_UNDATED = "partial_undated"
    TIMEOUT = "timeout"
    HTTP_ERROR = "http_error"
    PARSE_ERROR = "parse_error"
    HTML_INSTEAD_OF_FEED = "html_instead_of_feed"
    RATE_LIMITED = "rate_limited"  # 429 / 503 with Retry-After
    DEAD = "dead"  # 410 Gone
    SILENT_ZERO = "silent_zero"  # no new items for far longer than the feed's rhythm
    REDIRECTED = "redirected"  # in schema v1; not emitted (redirects are followed, see alerts)
    BLOCKED = "blocked"  # scheme or address refused by the safety policy
    TOO_LARGE = "too_large"


class StoryPhase(StrEnum):
    """``phase`` of a ``stories`` record (``schemas/stories.v1.json``; a test checks that both
    list the same words), decided by ``newsflow.scoring.importance.story_phase`` at event time
    (docs/rules.md#story-phases)."""

    BREAKING = "breaking"  # 1 mention
    DEVELOPING = "developing"  # 2-5 mentions, first seen less than 2 h ago
    SUSTAINED = "sustained"  # otherwise
    FADING = "fading"  # silent for 24 h, or below half its peak importance


class Trend(StrEnum):
    """``trend`` of a digest item and of a ``topic_index`` topic (``schemas/digests.v1.json``,
    where it may also be null; a test checks that both list the same words): a topic against
    the topic it continues in the previous window of its type (docs/rules.md#trends)."""

    EMERGING = "EMERGING"  # no match in the previous window, and enough articles now
    TRENDING = "TRENDING"  # at least 50 % more articles than the matched topic
    FADING = "FADING"  # the matched topic had 2 or more, this one at most half as many


#: A poll that delivered the feed: counts as *successful* for the reliability score
#: (docs/rules.md#feed-health: successful polls / total polls). A rate-limited, blocked or HTML answer delivered no feed.
SUCCESS_STATUSES: frozenset[HealthStatus] = frozenset({
    HealthStatus.OK,
    HealthStatus.NOT_MODIFIED,
    HealthStatus.EMPTY,
    HealthStatus.ALL_UNDATED,
    HealthStatus.PARTIAL_UNDATED,
    HealthStatus.SILENT_ZERO,
})

#: A poll that delivered no feed (the poller's failed_polls).
FAILED_POLL_STATUSES: frozenset[HealthStatus] = frozenset({
    HealthStatus.TIMEOUT,
    HealthStatus.HTTP_ERROR,
    HealthStatus.PARSE_ERROR,
    HealthStatus.HTML_INSTEAD_OF_FEED,
    HealthStatus.RATE_LIMITED,
    HealthStatus.DEAD,
    HealthStatus.BLOCKED,
    HealthStatus.TOO_LARGE,
})

#: The digest's Feed Health Report counts these as errors: the failed polls, plus a feed that
#: answers but whose items are all undated or that fell silent (docs/rules.md#feed-statuses).
UNHEALTHY_STATUSES: frozenset[HealthStatus] = FAILED_POLL_STATUSES | {
    HealthStatus.ALL_UNDATED,
    HealthStatus.SILENT_ZERO,
}
