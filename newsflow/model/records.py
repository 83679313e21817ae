"""Typed messages that flow through the pipeline.

Every record written to a topic is one of these frozen dataclasses; ``orjson`` serializes
dataclasses natively, in declaration order, so the bytes of a record are deterministic.
The JSON Schemas in ``schemas/`` describe exactly these shapes (tests check both agree).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from newsflow.model.vocab import Disposition
from newsflow.runtime.pickling import fast_pickle

# Schema versions, one per topic. Bump on any incompatible change and add a new schema file.
RAW_SCHEMA_VERSION = 1
ARTICLE_SCHEMA_VERSION = 1
DIGEST_SCHEMA_VERSION = 1
FEED_HEALTH_SCHEMA_VERSION = 1
DEADLETTER_SCHEMA_VERSION = 1
STORY_SCHEMA_VERSION = 1


@fast_pickle
@dataclass(frozen=True, slots=True)
class RawPayload:
    """One HTTP poll of one feed: the envelope on topic ``feeds.raw`` (key: ``feed_id``).

    ``fetched_at_ms`` is the poller's fetch time, the *only* clock the flow uses.
    """

    feed_id: str
    url: str
    fetched_at_ms: int
    status: int
    body: bytes | None
    etag: str | None = None
    last_modified: str | None = None
    content_type: str | None = None
    final_url: str | None = None
    publisher: str | None = None
    tier: str | None = None  # "T1".."T5"
    category: str | None = None
    language: str | None = None
    body_ref: str | None = None  # where the body is stored when not inline
    reliability: float | None = None  # the feed's 30-day poll success ratio (from the poller)
    #: a poll sent without a body (failed, refused, not modified): the poller's feed-health
    #: status of it (``newsflow.model.vocab.HealthStatus``) and what went wrong
    poll_status: str | None = None
    error: str | None = None

    @property
    def poll_id(self) -> str:
        """Idempotent id of this poll: the same fetch re-sent gives the same id."""
        return f"{self.feed_id}@{self.fetched_at_ms}"


@fast_pickle
@dataclass(frozen=True, slots=True)
class Media:
    url: str
    type: str | None = None
    medium: str | None = None
    width: int | None = None
    height: int | None = None
    source: str = "enclosure"  # enclosure | media_content | media_thumbnail | img


@fast_pickle
@dataclass(frozen=True, slots=True)
class Sighting:
    """Where an article (or a copy of it) has been seen: a feed of a publisher, at a URL."""

    feed_id: str
    publisher: str
    url: str
    fetched_at: str
    article_id: str


@fast_pickle
@dataclass(frozen=True, slots=True)
class Article:
    """A normalized feed item, before dedup decisions (output of ``normalize``)."""

    article_id: str  # stable: blake2b(feed_id, guid)
    feed_id: str
    publisher: str
    tier: str | None
    guid: str
    url: str | None  # URL as found (absolute)
    canonical_url: str | None
    title: str
    author: str | None
    published_at: str  # ISO 8601 UTC, "Z"
    published_ms: int
    date_uncertain: bool
    date_source: str  # dc:date | published | updated | pubDate | fetched_at
    fetched_at: str
    fetched_ms: int
    body_html: str
    body_text: str
    categories: tuple[str, ...]
    media: tuple[Media, ...]
    word_count: int
    reading_time_min: float
    partial_content: bool
    content_hash: str
    feed_format: str  # rss20 | rss10 | atom10 | ...
    language: str | None
    category: str | None  # the feed's category from the registry
    item_index: int  # position in its feed document
    truncated: bool = False  # the body was cut to normalize.max_item_body_chars
    #: the body without its feed document's boilerplate (sentences 3+ of its items share:
    #: ``newsflow.text.boilerplate``), what story features read; None: the body has none.
    #: Internal (not in the ``articles`` record).
    story_text: str | None = None


@fast_pickle
@dataclass(frozen=True, slots=True)
class DedupInfo:
    """What the dedup stage decided about one article."""

    disposition: Disposition
    layer: str | None  # guid | url | title | content | entity | story (None for unique)
    duplicate_of: str | None  # article_id of the stored original
    changed: tuple[str, ...] = ()  # for revisions: which fields changed
    preferred: bool = False  # this copy carries more content and is now the stored version
    seen_in: tuple[Sighting, ...] = field(default_factory=tuple)
    revision_no: int = 0


@fast_pickle
@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A bad input that could not become an article (topic ``deadletter``, key ``dl_id``)."""

    dl_id: str
    stage: str  # envelope | fetch | parse | normalize | encode
    reason: str  # machine-readable code, e.g. "no_title_no_body"
    detail: str
    feed_id: str | None
    fetched_at: str | None
    item_index: int | None
    original: bytes  # the original bytes (base64 on the wire), at most the configured cap
    original_size: int | None = None  # set when ``original`` was cut: the full size in bytes
