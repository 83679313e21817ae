"""The messages that travel between the dataflow's steps: frozen, typed, one class per kind.

::

    parse ──ToShard(ParsedArticle | HealthReport | Tick)──► dedup shard
    parse ──Output──► sinks (dead letters, feed-health)
    dedup ──Deduped | HealthReport | Tick──► story shard
    story shard ──ScoredArticle | HealthReport | ShardWatermark──► articles sink, digests
    story shard ──StoryUpdate──► stories sink
    digests ──Output──► sinks

Keys travel as Bytewax keys, never inside these values; where a downstream step must know
which upstream key a message came from, the wiring wraps it in :class:`FromShard`. Between
keyed steps, the messages one activation sends to one key travel as one
:class:`~newsflow.runtime.pickling.Batch`: Bytewax pays ~100 us of CPU per message that crosses
processes, whatever its size.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from newsflow.model.records import Article, DedupInfo
from newsflow.runtime.pickling import fast_pickle

if TYPE_CHECKING:
    from newsflow.dedup.story_features import StoryFeatures
    from newsflow.dedup.story_state import StoryView
    from newsflow.digest.entries import DigestEntry

#: a topic record as JSON-ready fields (built only in ``newsflow.wire``)
JsonRecord = dict[str, Any]


@fast_pickle
@dataclass(frozen=True, slots=True)
class Output:
    """A finished record for a sink: topic, idempotent key, serialized value."""

    topic: str
    key: bytes
    value: bytes



@fast_pickle
@dataclass(frozen=True, slots=True)
class ParsedArticle:
    """A normalized article; ``seq`` is its position in the replayable input, ``epoch`` its
    partition's event-time bucket before the payload it came from (``newsflow.core.alignment``)."""

    seq: str
    article: Article
    epoch: int = -1
    #: event time of its feed's previous poll that showed the feed (None: none in the window,
    #: e.g. the feed's first poll): the article is scored as of that poll at the latest
    #: (``newsflow.scoring.importance.scored_as_of``)
    previous_poll_ms: int | None = None


@fast_pickle
@dataclass(frozen=True, slots=True)
class HealthReport:
    """A parse-side ``feed-health`` record, routed in input order to the digest's health report.

    Every story shard gets it (its feed's reliability scores articles in all of them); only the
    copy with ``report`` set goes on to the digest's health report."""

    seq: str
    record: JsonRecord
    report: bool = True
    epoch: int = -1


@fast_pickle
@dataclass(frozen=True, slots=True)
class Tick:
    """A source's event time moved into ``bucket`` (``watermark // tick_ms``; ``END``: the source
    ended): every item of that source with an epoch ``< bucket`` was sent before. ``source`` is
    the upstream key (an input partition, a dedup shard), filled in by the wiring."""

    bucket: int
    watermark: int
    source: str = ""


@fast_pickle
@dataclass(frozen=True, slots=True)
class ToShard:
    """A parse output addressed to one dedup shard (the key of the next step)."""

    shard: str
    item: ParsedArticle | HealthReport | Tick


@fast_pickle
@dataclass(frozen=True, slots=True)
class Deduped:
    """An article with its exact-dedup decision (layers 1-2)."""

    seq: str
    article: Article
    info: DedupInfo
    epoch: int = -1
    #: the article's story features (``newsflow.dedup.story_features.featurize``), computed by the shard
    features: StoryFeatures | None = None
    #: :attr:`ParsedArticle.previous_poll_ms`
    previous_poll_ms: int | None = None


@fast_pickle
@dataclass(frozen=True, slots=True)
class ScoredArticle:
    """An ``articles`` record: story, importance and topic assigned; on the way to the digest
    steps, with its compact digest ``entry`` (``newsflow.digest.entries``) built once."""

    record: JsonRecord
    entry: DigestEntry | None = None
    #: the body without its feed document's boilerplate (``Article.story_text``) when it had
    #: some: what the digest entry reads (its TF-IDF terms and summary), never emitted
    story_text: str | None = None


@fast_pickle
@dataclass(frozen=True, slots=True)
class MergedArticle:
    """An ``articles`` record emitted again, same ``key``, because its story merged into another
    (``story_id`` is now the story it joined): the compacted ``articles`` topic keeps this one.
    Only the ``articles`` output takes it: the digests follow the merge through
    :class:`StoryMerge`, and nothing learns from an article twice."""

    record: JsonRecord


@fast_pickle
@dataclass(frozen=True, slots=True)
class StoryUpdate:
    """The current state of one story (changed or expired): its ``stories`` record is built at
    the sink (``newsflow.wire.codec.story_record``)."""

    story: StoryView


@fast_pickle
@dataclass(frozen=True, slots=True)
class StoryMerge:
    """A late merge (dense regime): story ``gone`` joined story ``into``; ``at_ms`` is the event
    (fetch) time by which the story shard knew it. The digests treat ``gone``'s articles as
    ``into``'s in the windows that end after ``at_ms`` (the ``stories`` topic's ``merged_into``)."""

    gone: str
    into: str
    at_ms: int


@fast_pickle
@dataclass(frozen=True, slots=True)
class ShardWatermark:
    """A story shard released everything up to ``watermark``."""

    watermark: int


@fast_pickle
@dataclass(frozen=True, slots=True)
class FromShard:
    """A story shard's output with the shard's key, for the single-key digests step."""

    shard: str
    message: ScoredArticle | HealthReport | ShardWatermark | StoryMerge


#: what a dedup shard receives / emits, what a story shard emits
ShardInput = ParsedArticle | HealthReport | Tick
DedupOutput = Deduped | HealthReport | Tick
StoryOutput = ScoredArticle | MergedArticle | HealthReport | ShardWatermark | StoryUpdate | StoryMerge
ParseOutput = Output | ToShard


# ---------------------------------------------------------------- interest profiles
@fast_pickle
@dataclass(frozen=True, slots=True)
class Interaction:
    """A reader's interaction, checked: ``target`` is ``"article"`` or ``"story"``;
    ``at_ms`` is its event time, raised to its input partition's watermark (deterministic order)."""

    seq: str
    profile_id: str
    target: str
    target_id: str
    action: str
    at_ms: int
    dwell_s: float | None = None
    raw: bytes = b""


@fast_pickle
@dataclass(frozen=True, slots=True)
class InteractionClock:
    """The interactions input partition ``partition`` has read everything up to ``watermark``."""

    partition: str
    watermark: int


@fast_pickle
@dataclass(frozen=True, slots=True)
class ArticleVector:
    """An article's profile vector (``newsflow.profiles.vectors``), broadcast to profile keys."""

    article_id: str
    story_id: str | None
    fetched_ms: int
    terms: tuple[tuple[int, float], ...]
    names: tuple[tuple[int, str], ...]


@fast_pickle
@dataclass(frozen=True, slots=True)
class ProfileAt:
    """A profile's weights as of event time ``as_of`` (a digest window's end; ``None``: the
    latest, at the end of a finite input), with its top terms for display."""

    profile: str
    as_of: int | None
    weights: tuple[tuple[int, float], ...]
    top_terms: tuple[tuple[str, float], ...]


@fast_pickle
@dataclass(frozen=True, slots=True)
class ProfileClock:
    """A profile applied every interaction before ``watermark``."""

    profile: str
    watermark: int


@fast_pickle
@dataclass(frozen=True, slots=True)
class ProfileVersion:
    """A profile's state after the interactions up to and at ``from_ms``: every term's weight and
    the event time it was last engaged (``None``: not learning yet), so its value at any later
    time follows (decay). Valid for event times after ``from_ms`` until the next version."""

    profile: str
    from_ms: int
    terms: tuple[tuple[int, float, int | None], ...]


ProfileInput = Interaction | InteractionClock | ArticleVector | FromShard
ProfileOutput = Output | ProfileAt | ProfileClock | ProfileVersion
