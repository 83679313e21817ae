"""Digest parameters: the defaults of docs/rules.md#topics-and-digests.
"""

from __future__ import annotations

from dataclasses import dataclass

from newsflow.digest.schedule import SectionLimits

# --------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DigestConfig:
    min_importance: float = 15.0
    top_threshold: float = 70.0
    noteworthy_threshold: float = 40.0
    eps: float = 0.4  # DBSCAN cosine distance
    min_samples: int = 2
    n_topics: int | None = None  # fixed number of topics -> Agglomerative Ward
    title_weight: int = 2
    body_words: int = 200
    time_basis: str = "published"  # window membership by "published" or "fetched" time
    limits: SectionLimits | None = None  # None: the digest type's limits
    summary_words: tuple[int, int] | None = None  # None: the digest type's
    emerging_min: int = 3
    trend_change: float = 0.5
    topic_index_size: int = 200
    ward_max_points: int = 1000
    group_by_story: bool = True
    exact_max: int = 12_000  # exact DBSCAN neighbourhoods up to this many points
    block_size: int = 3000  # above exact_max: exact inside k-means blocks of this size
    svd_dims: int = 100
    related_max: int = 5
    article_ids_max: int = 50


DEFAULT_DIGEST_CONFIG = DigestConfig()
