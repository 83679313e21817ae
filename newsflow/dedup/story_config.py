"""What an operator sets of the story step: :class:`StoryConfig` (the ``[stories]`` section).

Only what an operator would change is here: the window, the story thresholds and idle times of
a sparse and a redundant stream, the near-duplicate title thresholds, and the bounds on bad
input and state. The values of the one story algorithm that nobody tunes per deployment are
named constants next to the code that uses them (``story_features``, ``story_decision``,
``story_assigner``), each with the reason for its value.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["HOUR_MS", "SLAB_MS", "StoryConfig"]

HOUR_MS = 3_600_000
#: granularity of expiry: state lives between the window and the window + one slab (expiry
#: drops whole slabs, no per-entry timers)
SLAB_MS = 12 * HOUR_MS


@dataclass(frozen=True, slots=True)
class StoryConfig:
    """Layers 3-4 and story matching (docs/user-guide.md, "Stories")."""

    #: event-time window of all state (docs/rules.md#dedup-window)
    window_ms: int = 72 * HOUR_MS
    #: Layer 3: title word-set Jaccard of a near-duplicate (titles of >= 5 words, docs/rules.md#layer-3-title-similarity) ...
    title_threshold: float = 0.85
    #: ... and of a title under 5 words
    title_threshold_short: float = 0.95
    #: cosine of the article's TF-IDF vector with an open story's centroid, on a sparse stream
    #: (a reader's own feeds: mostly singletons) ...
    story_threshold: float = 0.22
    #: ... and on a redundant one (an aggregator: every event covered by dozens of outlets); the
    #: threshold follows the share of cross-publisher title near-duplicates, log-linear between
    story_threshold_dense: float = 0.08
    #: a story accepts new members while its last member is younger than this (event time):
    #: follow-ups of one event come up to ~36 h apart on real feeds ...
    story_idle_ms: int = 36 * HOUR_MS
    #: ... and on a redundant stream, where a story open into the next day attracts that day's
    #: articles wrongly
    story_idle_ms_dense: int = 12 * HOUR_MS
    #: body words fingerprinted (the lead of the body): bounded work per item whatever its size
    #: (a 20 MB body took 34 s / 7 GB uncapped); near-duplicates agree on their first words
    max_body_words: int = 2_000
    #: refs kept per LSH bucket per slab (most recent); 8 = 32 measured the same on UCI
    max_bucket: int = 8
    #: open stories kept per term in the story postings (most recently refreshed); 16, 32
    #: and 128 measured the same on UCI
    max_postings: int = 16
    #: candidate articles compared per article (most shared LSH bands first)
    max_candidates: int = 16
