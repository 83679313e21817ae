"""Dedup layers 3-5 and online story ids: pure domain code (no Bytewax, no Kafka).

Spec: 000 Step 3 Layers 3-5 and the dispositions; 001 "Deduplication Strategies" and the
"Dedup Decision Matrix"; 003 (Jaro-Winkler alternative). Four pieces, so that a dataflow can
shard the state by key:

1. :func:`featurize` — stateless: article -> compact :class:`StoryFeatures` (title words, LSH
   band keys of the title word-set MinHash and of the body-shingle MinHash, b-bit body
   signature, SimHash, first-sentence keys, entity keys, story-matching terms, publisher, time).
2. :class:`BandIndex` — the keyed state of ONE band/bucket shard: bucket key -> recent refs,
   kept in event-time slabs so that expiry drops whole slabs (no per-entry timers).
3. :func:`decide` — pure: the decision matrix of 001 applied to an article and its candidates
   -> (disposition, layer, matched_ref).
4. :class:`StoryAssigner` — composes them in one process (tests, offline eval, single-key
   fallback) and gives every article a stable ``story_id``, the story's member count and its
   number of distinct publishers. Beyond the seed it can match an article to the *centroid* of
   an open story (TF-IDF over title + URL-slug terms with IDF learned online from the window):
   layer ``"story"``, disposition ``same_event``; see ``bench/README-stories.md`` for why.

Event time only: "now" is always passed in; all state expires ``window_ms`` (72 h) after the
event time of its slab. Hashes are stable (xxh3/sha1), never Python's ``hash()``.
"""

from __future__ import annotations

import math
from array import array
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from functools import lru_cache
from itertools import pairwise, repeat
from operator import mul
from typing import Any, NamedTuple, Protocol

import xxhash

from newsflow.core.hashing import shard_of, stable_id
from newsflow.dedup.similarity import (
    compress_signature,
    first_sentences,
    first_sentences_overlap,
    hamming,
    lsh_band_keys_bulk,
    minhash_signatures,
    sentence_key,
    signature_jaccard,
    simhash64_batch,
    title_jaccard,
    title_jaro_winkler,
    title_overlap_coefficient,
)
from newsflow.feeds.tiers import BUILTIN_TIERS, SourceTiers
from newsflow.model.vocab import Disposition
from newsflow.runtime.pickling import fast_pickle, from_columns, set_slots, to_columns
from newsflow.text.demonyms import DEMONYMS
from newsflow.text.entities import (
    capitalized_phrases,
    entity_keys,
    entity_overlap,
    extract_entities,
    is_title_case,
)
from newsflow.text.titles import (
    content_tokens,
    episode_keys,
    normalize_title,
    url_slug_tokens,
    word_shingles,
)

__all__ = [
    "PRESETS",
    "SEED",
    "TUNED",
    "ArticleLike",
    "BandIndex",
    "Decision",
    "StoryAssigner",
    "StoryAssignment",
    "StoryConfig",
    "StoryFeatures",
    "StoryInput",
    "StoryPostings",
    "StoryState",
    "decide",
    "featurize",
    "featurize_batch",
    "key_shard",
    "match_story_centroid",
    "story_id_for",
    "title_similarity",
]

HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS

# Dispositions: newsflow.model.vocab.Disposition; layers: model.DedupInfo.layer ("story" = centroid match).


# --- configuration ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StoryConfig:
    """Thresholds of layers 3-5 and of story matching. Presets: :data:`SEED`, :data:`TUNED`."""

    name: str = "tuned"
    #: event-time window of all state (000 Step 3: "all articles from the past 72 hours")
    window_ms: int = 72 * HOUR_MS
    #: granularity of expiry: state lives between window_ms and window_ms + slab_ms
    slab_ms: int = 12 * HOUR_MS
    # Layer 3 — title similarity over the normalized word sets
    #: "jaccard" (000/001), "overlap" (overlap coefficient, peer) or "jaro_winkler" (003)
    title_measure: str = "jaccard"
    title_threshold: float = 0.85  # 000: titles of >= 5 words
    title_threshold_short: float = 0.95  # 000: titles of < 5 words
    short_title_words: int = 5
    # Layer 4 — content fingerprints of the body
    #: "minhash" (128 perms, LSH b=16 r=8, confirm >= 0.7) or "simhash" (Hamming <= 3)
    content_measure: str = "minhash"
    minhash_threshold: float = 0.7
    simhash_max_hamming: int = 3
    num_perm: int = 128
    lsh_bands: int = 16
    lsh_rows: int = 8
    #: body shingles: k-word shingles
    body_shingle_words: int = 3
    #: body words fingerprinted (the lead of the body): bounded work per item whatever its size
    #: (a 20 MB body took 34 s / 7 GB uncapped); near-duplicates agree on their first words
    max_body_words: int = 2_000
    #: 001: "if 2+ of the first 3 non-trivial sentences match" -> near-duplicate (0 = off)
    min_sentence_matches: int = 2
    # Layer 5 — entity overlap within 24 h
    entity_threshold: float = 0.8
    #: fewer entity keys than this on either side: Layer 5 does not fire (too little evidence)
    entity_min_keys: int = 2
    same_event_ms: int = 24 * HOUR_MS
    use_entity_layer: bool = True
    # Story matching to a story centroid (beyond the seed; off in SEED)
    story_match: bool = False
    #: cosine of the article's TF-IDF vector with the story centroid
    story_threshold: float = 0.08
    #: threshold for a story of n members: story_threshold * n ** -story_threshold_decay
    #: (a big story's centroid is broader, so its members' cosines are lower)
    story_threshold_decay: float = 0.0
    #: "centroid": cosine with the members' summed vector; "average": the mean cosine with
    #: the members (average link: dot / member count), which an incoherent story cannot
    #: inflate (the norm of a sum of dissimilar vectors grows only like sqrt(count))
    story_score: str = "centroid"
    #: and the mean cosine with the members must reach this (0 = off): a large story's lower
    #: centroid threshold (``story_threshold_decay``) then cannot let an incoherent story grow
    story_min_average: float = 0.0
    #: a term in more than this share of the window's documents is generic ("coronavirus",
    #: "live updates"); the cosine without generic terms must reach ``story_min_specific``
    story_generic_df: float = 1.0
    story_min_specific: float = 0.0
    #: distinct non-generic concepts an article must share with a story (a shared bigram and
    #: its two words are one concept): one shared name ("climate change", "Orange County",
    #: "Cinco de Mayo") is a topic, not an event
    story_min_concepts: int = 0
    #: Adaptive story threshold (0 = off): the Bayes threshold of "same story" depends on the
    #: prior, i.e. on how redundant the stream is. An aggregator-like stream (UCI: every event
    #: covered by dozens of outlets) has many cross-publisher title near-duplicates (Layer 3,
    #: fixed seed thresholds, ~10 % of articles); a reader's own feeds (the labelled real day)
    #: ~0.2 %. The share r of such near-duplicates among the window's articles (per shard,
    #: event-time slabs) sets the threshold: ``story_threshold`` while r <= redundancy_low,
    #: ``story_threshold_dense`` when r >= redundancy_high, log-linear in between. Past the
    #: middle, the sparse-stream guards (``story_min_concepts``, ``same_publisher_factor``)
    #: are off: on a redundant stream a story is a broad cluster and one name is evidence.
    story_threshold_dense: float = 0.0
    #: a story whose only publisher is the article's own needs threshold x this: one outlet's
    #: recurring series ("Live updates", "Your Wednesday Briefing", "The latest illustrations
    #: from ...") share words and boilerplate descriptions across different events
    same_publisher_factor: float = 1.0
    #: a Layer 3/4 near-duplicate of the SAME publisher's other article (another GUID and URL)
    #: puts the article in that article's story; off: the centroid decides (series items)
    follow_same_publisher_duplicates: bool = True
    redundancy_low: float = 0.01
    redundancy_high: float = 0.05
    #: story_idle_ms on a redundant stream (0: the same). On the labelled real day follow-ups
    #: come up to ~36 h apart; on UCI (times floored to the day) a story open into the next
    #: day attracts that day's articles wrongly (B-cubed 0.749 vs 0.767 on 60k rows)
    story_idle_ms_dense: int = 0
    #: story_threshold_decay on a redundant stream (negative: the same): an aggregator's big
    #: stories (UCI: ~56 headlines a story-day) have broad centroids that a new rewording
    #: meets at a lower cosine; on a reader's own feeds a decay lets blobs grow
    story_threshold_decay_dense: float = -1.0
    #: late merges on a redundant stream (0 = off): when an article passes the threshold of
    #: two open stories whose centroids have at least this cosine, the other story is merged
    #: into the one it joins (later articles find one story; records already emitted keep
    #: their ids)
    story_merge_dense: float = 0.0
    #: a story is a late-merge candidate when the article's cosine with it reaches this share
    #: of its threshold (1: only stories the article passes)
    story_merge_reach: float = 1.0
    #: weight of the prior (pseudo-articles at redundancy_low) in the redundancy estimate
    redundancy_min_articles: int = 200
    #: the prior is the remembered rate of expired slabs (up to redundancy_min_articles
    #: pseudo-articles), not always the low rate: a gap longer than the window keeps the regime
    redundancy_memory: bool = False
    #: a story accepts new members while its last member is younger than this (event time)
    story_idle_ms: int = 12 * HOUR_MS
    #: an article whose title names a calendar day ("TV Patrol North Luzon - April 16, 2020")
    #: does not join a story whose titles *from the same publisher* name only other days: one
    #: outlet's programme or column episodes share every other word
    #: (:func:`~newsflow.text.titles.title_dates`); other outlets' dates ("franchise expires
    #: May 4") are about the event, not an episode, and do not count
    story_date_veto: bool = False
    #: on a sparse stream, an article whose title and description lead name people, places
    #: or organisations does not join a story whose members named others, none of them
    #: (:func:`name_keys`): "attempted murder of a police officer" in West Hendon and in
    #: Singapore, quakes near Simi Valley and near Calexico, five "climate change" explainers
    story_name_veto: bool = False
    #: on a sparse stream, a story whose members named at least ``story_name_min_shared`` of
    #: the article's rare sure names (name keys in at most ``story_name_rare_df`` of the
    #: window's documents: "Neil Ferguson", "Angela Merkel", not "Trump") needs the threshold x
    #: this: columns and reactions that share few words with the news share its names
    story_name_boost: float = 1.0
    story_name_rare_df: float = 0.005
    story_name_min_shared: int = 2
    #: weight of title bigrams and of URL-slug words relative to a title word
    bigram_weight: float = 1.0
    slug_weight: float = 0.5
    #: words of the body lead added to the story terms (000 Step 5 uses title + first 200 words)
    body_term_words: int = 0
    body_term_weight: float = 0.3
    #: centroid terms kept per story (the heaviest); bounds state and scoring cost
    centroid_max_terms: int = 128
    #: a near-duplicate of an article whose story is closed joins an open story instead
    reopen_closed_stories: bool = False
    # Bounds that keep the cost per article flat as the window grows
    #: refs kept per bucket per slab (most recent); 8 = 32 measured the same on UCI
    max_bucket: int = 8
    #: open stories kept per term in the story postings (most recently refreshed); 16, 32
    #: and 128 measured the same on UCI
    max_postings: int = 16
    #: candidates compared per article (most shared keys first)
    max_candidates: int = 48


#: The seed values of 000/001: Jaccard 0.85 / 0.95 short, MinHash 0.7, entity overlap 0.8.
SEED = StoryConfig(name="seed")

#: Defaults chosen from measurements on the UCI month (bench/README-stories.md).
TUNED = StoryConfig(
    name="tuned",
    # Layer 3 keeps the seed's word-set Jaccard 0.85 / 0.95: it decides the near_duplicate
    # disposition; on UCI it adds nothing to story quality either way (README-stories.md)
    title_measure="jaccard",
    title_threshold=0.85,
    title_threshold_short=0.95,
    # Layer 5 off: the headline-only entity heuristic lowered B-cubed F1 (0.784 vs 0.791 on
    # 60k rows) and halved the speed; grouping comes from the story centroid instead
    use_entity_layer=False,
    story_match=True,
    reopen_closed_stories=True,
    max_candidates=16,
    # (bench/README-stories.md, "Real feeds"): a reader's own feeds are mostly
    # singletons, an aggregator (UCI) is every event covered dozens of times. The story
    # threshold follows the stream's redundancy (cross-publisher title near-duplicates):
    # 0.22 on a sparse stream, 0.06 (the UCI optimum) on a redundant one.
    story_threshold=0.22,
    # 0.08 on a redundant stream since the stories topic relabels merges (0.06 before):
    # tighter fragments that the late merges below join (README-stories.md, "merges")
    story_threshold_dense=0.08,
    redundancy_low=0.004,
    redundancy_high=0.02,
    # the prior of the redundancy estimate is the rate remembered from expired slabs: UCI's
    # 3-4 day gaps empty the window, and re-learning the regime each time fragmented the
    # first stories after each gap (whole-flow B-cubed 0.744 -> 0.759, README-stories.md)
    redundancy_memory=True,
    # a redundant stream's big stories are broad: threshold x size^-0.1 (UCI 0.7586 -> 0.7628;
    # the real day never reaches the dense regime: identical)
    story_threshold_decay_dense=0.1,
    # late merges on a redundant stream: an article that passes two open stories whose
    # centroids agree merges them (cosine >= 0.3: UCI 0.7628 -> 0.7740 as emitted); a story
    # it reaches half the threshold for is a candidate too. The stories topic relabels a
    # merged story's members (merged_into), so merging pays twice: with 0.2 / reach 0.5 /
    # dense threshold 0.08, UCI whole flow 0.7740 -> 0.7767 as emitted and 0.7967 -> 0.8164
    # as the stories topic has them; the real day never reaches the dense regime
    story_merge_dense=0.2,
    story_merge_reach=0.5,
    # descriptions count (their first 30 content words at half a title word's weight), the
    # outlet's own name does not
    body_term_words=30,
    body_term_weight=0.5,
    # follow-ups of one event come up to ~36 h apart on real feeds; 12 h on a redundant stream
    story_idle_ms=36 * HOUR_MS,
    story_idle_ms_dense=12 * HOUR_MS,
    # sparse-stream guards: one outlet's series is not a story, one shared name is a theme
    follow_same_publisher_duplicates=False,
    same_publisher_factor=1.2,
    story_min_concepts=2,
    # episodes of one programme differ by the day in their titles
    story_date_veto=True,
    # two events that share words but name different people or places are two stories; the
    # same rare names (two keys: a person's full name) halve the threshold
    story_name_veto=True,
    story_name_boost=0.5,
)

#: The earlier default: story centroid >= 0.06 everywhere, tuned on UCI headlines only.
HEADLINES_2014 = replace(
    TUNED, name="headlines-2014", story_threshold=0.06, story_threshold_dense=0.0,
    body_term_words=0, story_idle_ms=12 * HOUR_MS, story_idle_ms_dense=0, redundancy_memory=False,
    story_threshold_decay_dense=-1.0, story_merge_dense=0.0,
    follow_same_publisher_duplicates=True, same_publisher_factor=1.0, story_min_concepts=0,
    story_date_veto=False, story_name_veto=False, story_name_boost=1.0,
)

PRESETS: dict[str, StoryConfig] = {
    "seed": SEED,
    "tuned": TUNED,
    "seed-jaro-winkler": replace(SEED, name="seed-jaro-winkler", title_measure="jaro_winkler",
                                 title_threshold=0.85, title_threshold_short=0.85),
    "seed-simhash": replace(SEED, name="seed-simhash", content_measure="simhash"),
    "seed-overlap": replace(SEED, name="seed-overlap", title_measure="overlap",
                            title_threshold=0.6, title_threshold_short=0.95),
    "tuned-entities": replace(TUNED, name="tuned-entities", use_entity_layer=True),
    "tuned-overlap": replace(TUNED, name="tuned-overlap", title_measure="overlap",
                             title_threshold=0.6, title_threshold_short=0.95),
    "story-only": replace(TUNED, name="story-only", title_threshold=2.0,
                          title_threshold_short=2.0),
    "headlines-2014": HEADLINES_2014,
}


# --- features -----------------------------------------------------------------------------


class ArticleLike(Protocol):
    """What :func:`featurize` reads (``newsflow.model.Article`` has all of it)."""

    article_id: str
    title: str
    publisher: str
    published_ms: int
    body_text: str


class StoryInput(NamedTuple):
    """A minimal article for tests and the offline eval (UCI rows have no body)."""

    article_id: str
    title: str
    url: str | None
    publisher: str
    published_ms: int
    body_text: str = ""
    canonical_url: str | None = None


@fast_pickle
@dataclass(frozen=True, slots=True)
class StoryFeatures:
    """Compact, picklable features of one article: all that layers 3-5 and stories need."""

    ref: str  # article_id
    publisher: str
    time_ms: int
    words: tuple[str, ...]  # normalized title words (Layer 3 word set), in order
    title_keys: tuple[int, ...]  # LSH band keys of the title word-set MinHash
    body_keys: tuple[int, ...] = ()  # LSH band keys of the body-shingle MinHash
    body_sig: bytes = b""  # b-bit (16) MinHash of the body, b"" when no body
    simhash: int = 0  # SimHash of the body, 0 when no body
    sentences: tuple[int, ...] = ()  # keys of the first 3 non-trivial sentences
    entities: tuple[str, ...] = ()  # entity keys (sorted)
    terms: tuple[tuple[str, float], ...] = ()  # story-matching terms of the title and URL, tf weights
    dates: tuple[str, ...] = ()  # calendar days the title names ("M-D"), for the date veto
    names: tuple[str, ...] = ()  # name keys of title + lead, sure ones (the name veto)
    name_words: tuple[str, ...] = ()  # the same with capitalized sentence-initial words
    body_terms: tuple[tuple[str, float], ...] = ()  # story-matching terms of the summary/body lead

    @property
    def title_norm(self) -> str:
        return " ".join(self.words)


@lru_cache(maxsize=4096)
def _publisher_terms(publisher: str) -> frozenset[str]:
    """The story terms of a publisher's own name (a description naming its outlet)."""
    return frozenset(content_tokens(normalize_title(publisher).split())) if publisher else frozenset()


def featurize(article: Any, config: StoryConfig = TUNED) -> StoryFeatures:
    """Stateless features of an article (``Article`` or :class:`StoryInput`).

    Title: 000 Step 3 normalization -> word set -> MinHash(128) -> LSH band keys (b=16, r=8),
    "Found through LSH over title shingles". Body (when present): 3-word shingles ->
    MinHash(128) -> band keys + a 256-byte b-bit signature to confirm Jaccard >= 0.7; SimHash
    64; first-3-sentence keys (001). Entities of title (+ body lead) for Layer 5. Story terms:
    title words (stop words dropped, plurals folded) + title bigrams + URL-slug words.
    """
    return featurize_batch([article], config)[0]


def _story_text(a: Any) -> str:
    text = getattr(a, "story_text", None)  # (an Article pickled before the field: None)
    return (getattr(a, "body_text", "") or "") if text is None else text


def featurize_batch(articles: Sequence[Any], config: StoryConfig = TUNED,
                    families: SourceTiers | None = None) -> list[StoryFeatures]:
    """:func:`featurize` of many articles, MinHash computed in one numpy pass (use it in a
    batch operator: same result as featurize one by one, several times faster). An article's
    publisher is its publisher family (:meth:`~newsflow.feeds.tiers.SourceTiers.family` of
    ``families``, default the built-in table): a story's publishers are
    organisations, not feeds ("NYT U.S." and "NYT World" are one; a CNN video and a CNN
    article are one)."""
    family = (BUILTIN_TIERS if families is None else families).family
    n = len(articles)
    pubs = [getattr(a, "publisher", "") or "" for a in articles]
    words = [tuple(normalize_title(a.title or "", p).split()) for a, p in zip(articles, pubs, strict=True)]
    title_keys = lsh_band_keys_bulk(minhash_signatures(words, config.num_perm),
                                    config.lsh_bands, config.lsh_rows, "t").tolist()
    # the body without its feed document's boilerplate (Article.story_text) when it had some
    bodies = [_story_text(a) for a in articles]
    cap = config.max_body_words
    body_words = [normalize_title(b[: cap * 16]).split()[:cap] if b else [] for b in bodies]
    body_shingles = [word_shingles(w, config.body_shingle_words) if w else [] for w in body_words]
    with_body = [i for i in range(n) if body_shingles[i]]
    body_keys: dict[int, tuple[int, ...]] = {}
    body_sigs: dict[int, bytes] = {}
    if with_body:
        # (body shingles are runs of words, mostly seen once: hashed without the title words' memo)
        sigs = minhash_signatures([body_shingles[i] for i in with_body], config.num_perm, cached=False)
        keys = lsh_band_keys_bulk(sigs, config.lsh_bands, config.lsh_rows, "b").tolist()
        for j, i in enumerate(with_body):
            body_keys[i] = tuple(keys[j])
            body_sigs[i] = compress_signature(sigs[j])
    simhashes = simhash64_batch(body_shingles)
    names_on = config.story_name_veto or config.story_name_boost != 1.0
    out = []
    for i, a in enumerate(articles):
        body = bodies[i]
        ents: list[str] = []
        if config.use_entity_layer:  # Layer 5 off: skip the ~20 µs extraction
            ents = extract_entities(a.title or "")
            if body:
                ents += extract_entities(body[:400])
        toks = content_tokens(words[i])
        tf: dict[str, float] = {}
        for t in toks:
            tf[t] = tf.get(t, 0.0) + 1.0
        if config.bigram_weight:
            bw = config.bigram_weight
            for x, y in pairwise(toks):
                k = x + "_" + y
                tf[k] = tf.get(k, 0.0) + bw
        if config.slug_weight:
            url = getattr(a, "canonical_url", None) or getattr(a, "url", None)
            sw = config.slug_weight
            for t in content_tokens(url_slug_tokens(url)):
                tf[t] = tf.get(t, 0.0) + sw
        btf: dict[str, float] = {}
        if config.body_term_words and body_words[i]:
            bw = config.body_term_weight
            lead = content_tokens(body_words[i][: config.body_term_words * 2])
            own = _publisher_terms(pubs[i])  # "... by Sydney Morning Herald artist ...": no evidence
            for t in lead[: config.body_term_words]:
                if t not in own:
                    btf[t] = btf.get(t, 0.0) + bw
        out.append(StoryFeatures(
            ref=a.article_id,
            publisher=family(pubs[i], getattr(a, "canonical_url", None) or getattr(a, "url", None)),
            time_ms=int(a.published_ms),
            words=words[i],
            title_keys=tuple(title_keys[i]) if words[i] else (),
            body_keys=body_keys.get(i, ()),
            body_sig=body_sigs.get(i, b""),
            simhash=simhashes[i],
            sentences=tuple(sentence_key(x) for x in first_sentences(body)) if body else (),
            entities=tuple(sorted(entity_keys(ents))),
            terms=tuple(sorted(tf.items())),
            body_terms=tuple(sorted(btf.items())),
            dates=episode_keys(a.title or "") if config.story_date_veto else (),
            **(_names(a.title or "", body, pubs[i]) if names_on else {}),
        ))
    return out


def name_keys(title: str, lead: str) -> tuple[frozenset[str], frozenset[str]]:
    """What an article names, as single-word keys (:func:`entity_keys`): ``(sure, loose)``.

    *Sure* names are the :func:`capitalized_phrases` of the title (unless it is in Headline
    Title Case, where capitals say nothing) and of the description's first 400 characters.
    *Loose* names add the capitalized words those leave out at the start of a sentence
    ("Disney suffers 90 per cent profit drop": a name or not) and a Title Case title's phrases. Two sides name the same thing
    when one side's sure names meet the other side's loose ones. A people's name is its
    place's ("German" -> ``germany``, :data:`~newsflow.text.demonyms.DEMONYMS`).

    >>> sure, loose = name_keys("Disney suffers 90 per cent profit drop", "")
    >>> sorted(sure), sorted(loose)
    ([], ['disney'])
    >>> sure, _ = name_keys("Man arrested", "An attack on a police officer in West Hendon, north west London")
    >>> sorted(sure)
    ['hendon', 'london', 'west']
    """
    lead = lead[:400]
    initial: list[str] = []
    head = capitalized_phrases(title, skipped=initial)
    sure = capitalized_phrases(lead, skipped=initial)
    if is_title_case(title.split()):
        initial += head
    else:
        sure += head
    keys = _places(entity_keys(p.lower() for p in sure))
    return keys, keys | _places(entity_keys(p.lower() for p in initial))


def _places(keys: frozenset[str]) -> frozenset[str]:
    """Name keys with a people's name as its place's ("german" -> "germany")."""
    if keys.isdisjoint(DEMONYMS):
        return keys
    return frozenset(DEMONYMS.get(k, k) for k in keys)


def _names(title: str, lead: str, publisher: str) -> dict[str, tuple[str, ...]]:
    """:func:`name_keys` without the outlet's own name ("CNN's Anderson Cooper reports")."""
    sure, loose = name_keys(title, lead)
    own = _publisher_terms(publisher)
    return {"names": tuple(sorted(sure - own)), "name_words": tuple(sorted(loose - own))}


def story_terms(features: StoryFeatures) -> Sequence[tuple[str, float]]:
    """The article's story terms with their tf weights: title and URL terms, and the summary
    lead's (a word in both sums both weights), sorted."""
    if not features.body_terms:
        return features.terms
    tf = dict(features.terms)
    for t, w in features.body_terms:
        tf[t] = tf.get(t, 0.0) + w
    return sorted(tf.items())


def entity_index_keys(features: StoryFeatures) -> list[int]:
    """Bucket keys of the Layer 5 candidate index: one per entity key."""
    return [xxhash.xxh3_64_intdigest(b"e\x00" + e.encode("utf-8", "surrogatepass"))
            for e in features.entities]


def index_keys(features: StoryFeatures, config: StoryConfig) -> list[int]:
    """All bucket keys an article is indexed (and looked up) under: title bands, body bands,
    and (when Layer 5 is on) entity keys."""
    keys = list(features.title_keys) + list(features.body_keys)
    if config.use_entity_layer:
        keys += entity_index_keys(features)
    return keys


def key_shard(key: int, shards: int) -> int:
    """Stable shard of a bucket key (the routing a keyed dataflow uses: ``str(shard)``)."""
    return key % shards if shards > 1 else 0


# --- keyed state: one band/bucket shard ---------------------------------------------------


#: the layout tag of a state pickled by its own ``__getstate__`` (before: ``(None, slots)``)
_PACKED_V1 = 1


def _narrow(a: array[int]) -> tuple[str, bytes]:
    """(typecode, bytes) of non-negative ints in the narrowest unsigned array that holds them."""
    top = max(a, default=0)
    code = "B" if top < 1 << 8 else "H" if top < 1 << 16 else "I" if top < 1 << 32 else "Q"
    return code, (a if a.typecode == code else array(code, a)).tobytes()


class BandIndex:
    """Keyed state of one band/bucket shard: bucket key -> recent (ref, event time).

    Entries live in event-time *slabs* of ``slab_ms``; :meth:`expire` drops every slab whose
    end is older than ``now_ms - window_ms`` (so an entry lives between ``window_ms`` and
    ``window_ms + slab_ms``) — O(1) per slab, no per-entry timers. Each bucket keeps at most
    ``max_bucket`` refs per slab (the most recent), so a hot key ("Obama", a generic headline)
    cannot make a lookup slow: the cost per article is flat however large the window.
    """

    __slots__ = ("_packs", "_slabs", "max_bucket", "slab_ms", "window_ms")

    def __init__(self, window_ms: int = 72 * HOUR_MS, slab_ms: int = 12 * HOUR_MS,
                 max_bucket: int = 32) -> None:
        self.window_ms = window_ms
        self.slab_ms = slab_ms
        self.max_bucket = max_bucket
        #: slab number -> {bucket key -> [(ref, time_ms), ...]}; a bucket of one entry holds the
        #: entry itself, not a list of one (most buckets: 64 bytes less each, ~30 MB on 100k UCI)
        self._slabs: dict[int, dict[int, list[tuple[Any, int]] | tuple[Any, int]]] = {}
        #: slab number -> its packed layout as last pickled, dropped when the slab changes: a
        #: recovery snapshot every epoch packs only the slabs written since (most inserts go to
        #: the latest of the window's six or seven slabs)
        self._packs: dict[int, tuple[Any, ...]] = {}

    def lookup(self, keys: Iterable[int], now_ms: int | None = None,
               since_ms: int | None = None) -> list[tuple[Any, int]]:
        """(ref, time) of every entry in the buckets of ``keys``: one item per shared key, so
        callers can count shared bands (order: by slab, then unspecified). Entries older than
        the window relative to ``now_ms`` (or older than ``since_ms`` when given) are
        skipped."""
        out: list[tuple[Any, int]] = []
        if since_ms is None and now_ms is not None:
            since_ms = now_ms - self.window_ms
        keyset = set(keys)
        first = None if since_ms is None else since_ms // self.slab_ms
        for s in sorted(self._slabs):
            if first is not None and s < first:
                continue
            slab = self._slabs[s]
            hit = slab.keys() & keyset
            if not hit:
                continue
            if since_ms is not None and s == first:  # the slab straddling the cutoff
                for k in hit:
                    v = slab[k]
                    if isinstance(v, list):
                        out.extend(e for e in v if e[1] >= since_ms)
                    elif v[1] >= since_ms:
                        out.append(v)
            else:
                for k in hit:
                    v = slab[k]
                    if isinstance(v, list):
                        out.extend(v)
                    else:
                        out.append(v)
        return out

    def insert(self, keys: Iterable[int], ref: Any, time_ms: int, unique: bool = False) -> None:
        """Add ``ref`` to the buckets of ``keys`` in the slab of ``time_ms``. ``unique``: skip
        a bucket that already holds ``ref`` in that slab (story postings)."""
        s = time_ms // self.slab_ms
        slab = self._slabs.setdefault(s, {})
        self._packs.pop(s, None)
        entry = (ref, time_ms)
        cap = self.max_bucket
        for k in keys:
            got = slab.get(k)
            if got is None:
                slab[k] = entry
                continue
            if isinstance(got, list):
                if unique and any(e[0] == ref for e in got):
                    continue
                lst = got
            else:  # one entry so far
                if unique and got[0] == ref:
                    continue
                lst = [got]
                slab[k] = lst
            lst.append(entry)
            if len(lst) > cap:
                del lst[0]

    def lookup_and_insert(self, keys: Sequence[int], ref: Any, time_ms: int,
                          now_ms: int | None = None) -> list[tuple[Any, int]]:
        """Candidates for ``ref`` (entries already present), then index ``ref`` itself."""
        found = self.lookup(keys, now_ms)
        self.insert(keys, ref, time_ms)
        return found

    def expire(self, now_ms: int) -> int:
        """Drop slabs that ended before ``now_ms - window_ms``; returns entries dropped."""
        cutoff = now_ms - self.window_ms
        dropped = 0
        for s in [s for s in self._slabs if (s + 1) * self.slab_ms <= cutoff]:
            dropped += sum(len(v) if isinstance(v, list) else 1 for v in self._slabs.pop(s).values())
            self._packs.pop(s, None)
        return dropped

    def __len__(self) -> int:
        return sum(len(v) if isinstance(v, list) else 1 for slab in self._slabs.values() for v in slab.values())

    def snapshot(self) -> tuple[Any, ...]:
        """Compact, immutable, picklable state (for Bytewax ``snapshot()``)."""
        return (self.window_ms, self.slab_ms, self.max_bucket,
                tuple((s, tuple((k, tuple(v) if isinstance(v, list) else (v,)) for k, v in slab.items()))
                      for s, slab in sorted(self._slabs.items())))

    @classmethod
    def restore(cls, snap: tuple[Any, ...]) -> BandIndex:
        window_ms, slab_ms, max_bucket, slabs = snap
        idx = cls(window_ms, slab_ms, max_bucket)
        idx._slabs = {s: {k: v[0] if len(v) == 1 else list(v) for k, v in items} for s, items in slabs}
        return idx

    def __getstate__(self) -> tuple[Any, ...]:
        """Pickled (recovery snapshots) as arrays per slab, not one int and one tuple per
        bucket entry: the bucket keys (``uint64``), each bucket's length (0: a bare entry), the
        indices of its entries, and the slab's distinct entries as refs and ``int64`` times
        (the 100k UCI replay's story step at its end: 3.37 -> 2.48 MB, 16 keys per article).
        Entries shared by several buckets stay shared; dict order is kept, so a restored index
        looks up as the live one. Keys outside ``uint64`` (never made by this module) keep the
        layout of before."""
        try:
            return self._packed()
        except (OverflowError, TypeError):
            return (None, {k: getattr(self, k) for k in BandIndex.__slots__ if k != "_packs"})

    def _packed(self) -> tuple[Any, ...]:
        slabs = []
        packs = self._packs
        for s, slab in self._slabs.items():
            p = packs.get(s)
            if p is None:
                p = packs[s] = self._pack_slab(s, slab)
            slabs.append(p)
        return (_PACKED_V1, self.window_ms, self.slab_ms, self.max_bucket, slabs)

    @staticmethod
    def _pack_slab(s: int, slab: dict[int, list[tuple[Any, int]] | tuple[Any, int]]) -> tuple[Any, ...]:
        """One slab's packed layout (see :meth:`__getstate__`)."""
        at: dict[int, int] = {}
        ents: list[tuple[Any, int]] = []
        lens = array("I")
        idx = array("I")
        for v in slab.values():
            group = v if isinstance(v, list) else (v,)
            lens.append(len(v) if isinstance(v, list) else 0)
            for e in group:
                i = at.get(id(e))
                if i is None:
                    i = at[id(e)] = len(ents)
                    ents.append(e)
                idx.append(i)
        return (s, array("Q", slab).tobytes(), *_narrow(lens), *_narrow(idx), [e[0] for e in ents],
                array("q", [e[1] for e in ents]).tobytes())

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        self._packs = {}
        if state[0] is None:  # pickled before __getstate__: (None, {slot: value})
            set_slots(self, state)
            return
        _, self.window_ms, self.slab_ms, self.max_bucket, packed = state
        self._slabs = {}
        self._packs = {p[0]: p for p in packed}  # each slab as it was packed, until it changes
        for s, kb, lt, lb, it, ib, refs, tb in packed:
            times, lens, idx = array("q"), array(lt), array(it)
            times.frombytes(tb)
            lens.frombytes(lb)
            idx.frombytes(ib)
            keys = array("Q")
            keys.frombytes(kb)
            ents = list(zip(refs, times, strict=True))
            slab: dict[int, list[tuple[Any, int]] | tuple[Any, int]] = {}
            j = 0
            for k, n in zip(keys, lens, strict=True):
                if n:
                    slab[k] = [ents[i] for i in idx[j:j + n]]
                    j += n
                else:
                    slab[k] = ents[idx[j]]
                    j += 1
            self._slabs[s] = slab


# --- decisions ----------------------------------------------------------------------------


class Decision(NamedTuple):
    disposition: Disposition
    layer: str | None  # title | content | entity | story | None
    matched_ref: str | None
    score: float = 0.0


def title_layer_changes(new: StoryFeatures, old: StoryFeatures | None) -> list[str]:
    """The ``changed`` fields of a title-layer revision (a new item of the same publisher whose
    title matches a recent item's and whose body does not): ``title`` when the normalized titles
    differ, and always ``body`` (that is what made it a revision, not a near duplicate)."""
    return (["title"] if old is None or old.words != new.words else []) + ["body"]


def title_similarity(a: StoryFeatures, b: StoryFeatures, config: StoryConfig) -> float:
    """Layer 3 similarity of two normalized titles with the configured measure."""
    if config.title_measure == "jaro_winkler":
        return title_jaro_winkler(a.title_norm, b.title_norm)
    if config.title_measure == "overlap":
        return title_overlap_coefficient(a.words, b.words)
    return title_jaccard(a.words, b.words)


def title_threshold_for(a: StoryFeatures, b: StoryFeatures, config: StoryConfig) -> float:
    """000 Step 3 Layer 3: >= 0.85 when the title has >= 5 words, >= 0.95 when shorter (the
    shorter of the two titles decides, so a short title cannot match a long one cheaply)."""
    n = min(len(set(a.words)), len(set(b.words)))
    return config.title_threshold if n >= config.short_title_words else config.title_threshold_short


def content_match(a: StoryFeatures, b: StoryFeatures, config: StoryConfig) -> tuple[bool, float]:
    """Layer 4: body fingerprints agree (MinHash Jaccard >= 0.7, or SimHash Hamming <= 3), or
    2+ of the first 3 sentences match (001). ``(False, 0)`` when either body is missing."""
    if not a.body_sig or not b.body_sig:
        return False, 0.0
    if config.content_measure == "simhash":
        d = hamming(a.simhash, b.simhash)
        ok = d <= config.simhash_max_hamming
        score = 1.0 - d / 64.0
    else:
        score = signature_jaccard(a.body_sig, b.body_sig)
        ok = score >= config.minhash_threshold
    if not ok and config.min_sentence_matches:
        ok = first_sentences_overlap(a.sentences, b.sentences) >= config.min_sentence_matches
    return ok, score


def decide(features: StoryFeatures, candidates: Sequence[StoryFeatures],
           config: StoryConfig) -> Decision:
    """The 001 Dedup Decision Matrix for layers 3-5 against candidate articles.

    In order (cheapest, most certain first; the best-scoring candidate of the first layer that
    fires wins, ties to the earliest then smallest ref, so the result is order-free):

    - Layer 3 "Title similarity >= threshold": ``near_duplicate`` (layer ``title``) — except
      "Title similarity >= 0.85 + content fingerprint mismatch" from the *same publisher*,
      which is the matrix's ``revision`` (an updated article).
    - Layer 4 "Content fingerprint match": ``near_duplicate`` (layer ``content``).
    - Layer 5 "Entity overlap >= 80% + within 24h": ``same_event`` (layer ``entity``).
    - otherwise ``unique``.
    """
    best: tuple[float, int, str, StoryFeatures] | None = None
    fw = set(features.words)
    measure = config.title_measure
    for c in candidates:
        if c.ref == features.ref or not fw or not c.words:
            continue
        cw = set(c.words)
        inter = len(fw & cw)
        if measure == "jaro_winkler":
            s = title_jaro_winkler(features.title_norm, c.title_norm)
        elif inter == 0:
            continue
        elif measure == "overlap":
            s = inter / min(len(fw), len(cw))
        else:
            s = inter / (len(fw) + len(cw) - inter)
        short = min(len(fw), len(cw)) < config.short_title_words
        if s >= (config.title_threshold_short if short else config.title_threshold) and (
            best is None or (-s, c.time_ms, c.ref) < (-best[0], best[1], best[2])
        ):
            best = (s, c.time_ms, c.ref, c)
    if best is not None:
        c = best[3]
        if features.body_sig and c.body_sig and features.publisher == c.publisher:
            same, _ = content_match(features, c, config)
            if not same:
                return Decision(Disposition.REVISION, "title", c.ref, best[0])
        return Decision(Disposition.NEAR_DUPLICATE, "title", c.ref, best[0])

    if features.body_sig:
        best = None
        for c in candidates:
            if c.ref == features.ref:
                continue
            ok, s = content_match(features, c, config)
            if ok and (best is None or (-s, c.time_ms, c.ref) < (-best[0], best[1], best[2])):
                best = (s, c.time_ms, c.ref, c)
        if best is not None:
            return Decision(Disposition.NEAR_DUPLICATE, "content", best[2], best[0])

    if config.use_entity_layer and len(features.entities) >= config.entity_min_keys:
        best = None
        for c in candidates:
            if c.ref == features.ref or len(c.entities) < config.entity_min_keys:
                continue
            if abs(features.time_ms - c.time_ms) > config.same_event_ms:
                continue
            s = entity_overlap(features.entities, c.entities)
            if s >= config.entity_threshold and (
                best is None or (-s, c.time_ms, c.ref) < (-best[0], best[1], best[2])
            ):
                best = (s, c.time_ms, c.ref, c)
        if best is not None:
            return Decision(Disposition.SAME_EVENT, "entity", best[2], best[0])
    return Decision(Disposition.UNIQUE, None, None, 0.0)


# --- stories ------------------------------------------------------------------------------


def story_id_for(first_article_id: str) -> str:
    """A new story's id, derived from its first article's id (stable across runs/workers)."""
    return "s" + stable_id("story", first_article_id)


#: loose name keys a story keeps
MAX_NAMES = 256


@fast_pickle
@dataclass(slots=True)
class StoryState:
    """Keyed state of one story (key: ``story_id``)."""

    story_id: str
    first_ref: str
    first_ms: int
    last_ms: int
    count: int = 0
    publishers: set[str] = field(default_factory=set)
    #: sum of the members' unit TF-IDF vectors, the heaviest ``centroid_max_terms`` terms
    centroid: dict[str, float] = field(default_factory=dict)
    norm: float = 0.0
    #: calendar days named by the members' titles, per publisher (sorted "publisher|M-D" keys;
    #: the date veto)
    dates: tuple[str, ...] = ()
    #: what the members named (:func:`name_keys`, sure / loose; the name veto); no more are
    #: added once ``MAX_NAMES`` loose keys are kept (a big story vetoes less, never more)
    names: frozenset[str] = frozenset()
    name_words: frozenset[str] = frozenset()

    def add(self, publisher: str, time_ms: int, vec: Mapping[str, float], max_terms: int,
            dates: tuple[str, ...] = (), names: tuple[str, ...] = (),
            name_words: tuple[str, ...] = ()) -> None:
        """Add a member: count, publisher, times, title days, names, and its unit vector to
        the centroid sum. The centroid is pruned to its ``max_terms`` heaviest terms when it
        reaches twice that (amortized O(1) per term)."""
        self.count += 1
        if name_words:
            self.add_names(names, name_words)
        if dates:
            self.add_dates(tuple(f"{publisher}|{d}" for d in dates))
        if publisher:
            self.publishers.add(publisher)
        if time_ms > self.last_ms:
            self.last_ms = time_ms
        if time_ms < self.first_ms:
            self.first_ms = time_ms
        c = self.centroid
        sq = self.norm * self.norm
        for t, w in vec.items():
            old = c.get(t, 0.0)
            new = old + w
            c[t] = new
            sq += new * new - old * old
        if len(c) >= 2 * max_terms:
            keep = sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))[:max_terms]
            self.centroid = dict(keep)
            sq = sum(w * w for _, w in keep)
        self.norm = math.sqrt(max(sq, 0.0))

    def add_dates(self, dates: tuple[str, ...]) -> None:
        old = self.day_keys()
        if not set(dates) <= set(old):
            self.dates = tuple(sorted({*old, *dates}))

    def add_names(self, names: Iterable[str], name_words: Iterable[str]) -> None:
        old, old_words = self.name_keys()
        if len(old_words) < MAX_NAMES and not (old_words.issuperset(name_words) and old.issuperset(names)):
            self.names, self.name_words = old | frozenset(names), old_words | frozenset(name_words)

    def name_keys(self) -> tuple[frozenset[str], frozenset[str]]:
        """``(sure, loose)`` names of the members (a state pickled before the fields: none)."""
        return getattr(self, "names", frozenset()), getattr(self, "name_words", frozenset())

    def names_other(self, names: tuple[str, ...], name_words: tuple[str, ...]) -> bool:
        """Whether an article naming ``names`` (sure) / ``name_words`` (loose) names only
        other things than this story's members: both sides have sure names, and neither
        side's sure names meet the other's loose ones."""
        sure, loose = self.name_keys()
        if not names or not sure:
            return False
        return loose.isdisjoint(names) and sure.isdisjoint(name_words)

    def day_keys(self) -> tuple[str, ...]:
        """The title days (a state pickled before the field has none)."""
        return getattr(self, "dates", ())

    def other_days(self, publisher: str, dates: tuple[str, ...]) -> bool:
        """Whether a title of ``publisher`` naming ``dates`` is another episode than this
        story's: the story has titles of that publisher naming days, and none of them is one of
        ``dates`` (:func:`~newsflow.text.titles.episode_keys`: a day with a programme's name is
        another episode than the same day with another name; a day without one matches any)."""
        if not dates:
            return False
        head = publisher + "|"
        own = [k[len(head):].partition("@") for k in self.day_keys() if k.startswith(head)]
        if not own:
            return False
        for d in dates:
            day, _, name = d.partition("@")
            if any(o_day == day and (not name or not o_name or name == o_name) for o_day, _, o_name in own):
                return False
        return True

    def snapshot(self) -> tuple[Any, ...]:
        return (self.story_id, self.first_ref, self.first_ms, self.last_ms, self.count,
                tuple(sorted(self.publishers)),
                tuple((t, round(w, 5)) for t, w in self.centroid.items()), self.day_keys(),
                *(tuple(sorted(k)) for k in self.name_keys()))

    @classmethod
    def restore(cls, snap: tuple[Any, ...]) -> StoryState:
        sid, first_ref, first_ms, last_ms, count, pubs, cent = snap[:7]
        st = cls(sid, first_ref, first_ms, last_ms, count, set(pubs), dict(cent))
        st.norm = math.sqrt(sum(w * w for w in st.centroid.values()))
        if len(snap) > 7:
            st.dates = tuple(snap[7])
        if len(snap) > 9:
            st.names, st.name_words = frozenset(snap[8]), frozenset(snap[9])
        return st


class StoryPostings:
    """Keyed state of one postings shard: term -> the open stories that contain it.

    ``term -> {story_id: event time of the story's last member with that term}``, insertion
    ordered so the least recently refreshed story is evicted first when a term holds more than
    ``max_stories`` (hot terms like "apple" cannot make a lookup slow). Only stories touched
    within ``idle_ms`` are returned; :meth:`expire` (once per slab of event time) sweeps out
    older entries, so the state holds only open stories. A sweep skips a term whose entries
    are all newer by a lower bound of their times (``_low``, not pickled: rebuilt on load), and
    reads only the terms whose bound lies in an hour the sweep reaches (``_due``): not every
    term of the shard each time.
    """

    __slots__ = ("_due", "_low", "_post", "idle_ms", "max_stories")

    def __init__(self, idle_ms: int = 12 * HOUR_MS, max_stories: int = 32) -> None:
        self.idle_ms = idle_ms
        self.max_stories = max_stories
        self._post: dict[str, dict[str, int]] = {}
        #: term -> at most the oldest time of its entries (a refresh only raises an entry's time)
        self._low: dict[str, int] = {}
        #: hour -> terms whose ``_low`` was set in that hour (every term is in the list of its
        #: bound's hour; a term whose bound moved since may still be listed in another)
        self._due: dict[int, list[str]] = {}

    def lookup(self, terms: Iterable[str], now_ms: int) -> dict[str, list[str]]:
        """Open stories per term (terms without any are left out)."""
        since = now_ms - self.idle_ms
        post = self._post
        out: dict[str, list[str]] = {}
        for t in terms:
            d = post.get(t)
            if d:
                sids = [sid for sid, ms in d.items() if ms > since]
                if sids:
                    out[t] = sids
        return out

    def add(self, terms: Iterable[str], story_id: str, time_ms: int) -> None:
        post = self._post
        low = self._low
        cap = self.max_stories
        due = None
        for t in terms:
            d = post.get(t)
            if d is None:
                post[t] = {story_id: time_ms}
                low[t] = time_ms
                if due is None:
                    due = self._due.setdefault(time_ms // HOUR_MS, [])
                due.append(t)
                continue
            if time_ms < low[t]:
                if low[t] // HOUR_MS != time_ms // HOUR_MS:
                    self._due.setdefault(time_ms // HOUR_MS, []).append(t)
                low[t] = time_ms
            old = d.pop(story_id, None)
            d[story_id] = time_ms if old is None or time_ms > old else old
            if len(d) > cap:
                del d[next(iter(d))]

    def expire(self, now_ms: int) -> int:
        """Drop entries of stories idle for ``idle_ms`` or more; returns entries dropped."""
        since = now_ms - self.idle_ms
        dropped = 0
        post = self._post
        low = self._low
        due = self._due
        top = since // HOUR_MS  # hours below it lie wholly before ``since``, its own partly
        for h in sorted(h for h in due if h <= top):
            for t in due.pop(h):
                b = low.get(t)
                if b is None or b // HOUR_MS != h:
                    continue  # gone, or listed again in its bound's hour
                if b > since:  # every entry is newer: nothing to drop (stays listed here)
                    due.setdefault(h, []).append(t)
                    continue
                d = post[t]
                if d:
                    oldest = min(d.values())
                    if oldest > since:  # nothing to drop: the dict (and its order) stays
                        low[t] = oldest
                        due.setdefault(oldest // HOUR_MS, []).append(t)
                        continue
                keep = {sid: ms for sid, ms in d.items() if ms > since}
                dropped += len(d) - len(keep)
                if keep:
                    post[t] = keep
                    low[t] = b = min(keep.values())
                    due.setdefault(b // HOUR_MS, []).append(t)
                else:
                    del post[t], low[t]
        return dropped

    def __len__(self) -> int:
        return sum(len(d) for d in self._post.values())

    def snapshot(self) -> tuple[Any, ...]:
        return (self.idle_ms, self.max_stories,
                tuple((t, tuple(d.items())) for t, d in self._post.items()))

    @classmethod
    def restore(cls, snap: tuple[Any, ...]) -> StoryPostings:
        idle_ms, cap, items = snap
        p = cls(idle_ms, cap)
        p._post = {t: dict(d) for t, d in items}
        p._reindex()
        return p

    def __getstate__(self) -> tuple[Any, ...]:
        """Pickled without ``_low`` (rebuilt on load)."""
        return (_PACKED_V1, self.idle_ms, self.max_stories, self._post)

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        if state[0] is None:  # pickled before __getstate__: (None, {slot: value})
            set_slots(self, state)
        else:
            _, self.idle_ms, self.max_stories, self._post = state
        self._reindex()

    def _reindex(self) -> None:
        # (a term without entries, as a state restored from before may hold, is swept out)
        self._low = {t: min(d.values(), default=_NO_TIME) for t, d in self._post.items()}
        self._due = {}
        for t, b in self._low.items():
            self._due.setdefault(b // HOUR_MS, []).append(t)


#: below any event time: a term with this bound is read by the next sweep
_NO_TIME = -(1 << 62)


def match_story_centroid(vec: Mapping[str, float], postings: Mapping[str, Iterable[str]],
                         stories: Mapping[str, StoryState], now_ms: int,
                         config: StoryConfig,
                         generic: AbstractSet[str] = frozenset(),
                         threshold: float | None = None,
                         publisher: str | None = None,
                         passing: list[StoryState] | None = None,
                         dates: tuple[str, ...] = (),
                         names: tuple[tuple[str, ...], tuple[str, ...]] = ((), ()),
                         rare_names: AbstractSet[str] = frozenset(),
                         ) -> tuple[StoryState | None, float]:
    """Best open story for a unit TF-IDF vector ``vec``.

    ``postings`` maps each term of ``vec`` to the stories indexed under it; the dot product
    with each story's centroid is accumulated term by term (only shared terms cost anything),
    then divided by the centroid norm (cosine). A story is open while its last member is less
    than ``story_idle_ms`` old. Returns the best story when its cosine >= ``story_threshold``;
    ties go to the older story, then the smaller id (order-free). With ``dates`` (the days the
    article's title names), a story whose titles name only other days is not a match; with
    ``names`` (the article's sure and loose :func:`name_keys`) and ``story_name_veto``, a story
    whose members named only other things (:meth:`StoryState.names_other`) is not either; a
    story whose members named ``story_name_min_shared`` of ``rare_names`` (the article's rare
    sure names) needs the threshold x ``story_name_boost``."""
    dots: dict[str, float] = {}
    spec: dict[str, float] = {}
    concepts: dict[str, int] = {}
    count_concepts = config.story_min_concepts > 0
    cents: dict[str, dict[str, float]] = {}
    cents_get, dots_get, spec_get, stories_get = cents.get, dots.get, spec.get, stories.get
    for t, sids in postings.items():  # in the order of vec's terms
        w = vec.get(t)
        if w is None:
            continue
        specific = t not in generic  # (per term, not per story: the same sums in the same order)
        one = -1 if "_" in t else 1
        for sid in sids:
            c = cents_get(sid)
            if c is None:
                st = stories_get(sid)
                if st is None:
                    continue
                c = cents[sid] = st.centroid
            cw = c.get(t)
            if cw is not None:
                p = w * cw
                dots[sid] = dots_get(sid, 0.0) + p
                if specific:
                    spec[sid] = spec_get(sid, 0.0) + p
                    if count_concepts:
                        concepts[sid] = concepts.get(sid, 0) + one
    best: StoryState | None = None
    best_s = 0.0
    base = config.story_threshold if threshold is None else threshold
    decay = config.story_threshold_decay
    average = config.story_score == "average"
    min_avg = config.story_min_average
    same_pub = config.same_publisher_factor
    min_spec = config.story_min_specific
    reach = config.story_merge_reach if passing is not None else 1.0
    name_veto = config.story_name_veto and bool(names[0])
    boost, min_shared = config.story_name_boost, config.story_name_min_shared
    if boost == 1.0 or len(rare_names) < min_shared:
        rare_names = frozenset()
    for sid, dot in dots.items():
        st = stories[sid]
        if now_ms - st.last_ms >= config.story_idle_ms or st.norm <= 0.0:
            continue
        s = dot / st.count if average and st.count else dot / st.norm
        thr = base * st.count ** -decay if decay else base
        if same_pub != 1.0 and publisher is not None and len(st.publishers) == 1 and \
                publisher in st.publishers:
            thr *= same_pub
        # most stories that share a term are far: dropped before the boost and the vetoes
        # (which only drop), when below the lowest threshold the boost could give
        if s < (thr * boost if boost < 1.0 else thr) * (reach if reach < 1.0 else 1.0):
            continue
        if rare_names and len(st.name_keys()[0] & rare_names) >= min_shared:
            thr *= boost
        near = s < thr and reach < 1.0 and s >= thr * reach  # near enough to be merged, not joined
        if s < thr and not near:
            continue
        if dates and st.other_days(publisher or "", dates):
            continue
        if name_veto and st.names_other(*names):
            continue
        if near:
            passing.append(st)  # type: ignore[union-attr]
            continue
        if min_avg and dot < min_avg * st.count:
            continue
        if min_spec and spec.get(sid, 0.0) < min_spec * st.norm:
            continue
        if count_concepts and concepts.get(sid, 0) < config.story_min_concepts:
            continue
        if passing is not None:
            passing.append(st)
        if s > best_s or (best is not None and s == best_s and
                          (st.first_ms, st.story_id) < (best.first_ms, best.story_id)):
            best, best_s = st, s
    return best, best_s


def _centroid_cosine(a: StoryState, b: StoryState) -> float:
    if a.norm <= 0.0 or b.norm <= 0.0:
        return 0.0
    small, big = (a.centroid, b.centroid) if len(a.centroid) <= len(b.centroid) else (b.centroid, a.centroid)
    # (the same products summed in the same order as a generator would, without its frames)
    dot: float = sum(map(mul, small.values(), map(big.get, small, repeat(0.0))))
    return dot / (a.norm * b.norm)


class StoryAssignment(NamedTuple):
    """What the assigner decided for one article (one record per input, duplicates included)."""

    ref: str
    story_id: str
    disposition: Disposition
    layer: str | None
    matched_ref: str | None  # article matched (layers 3-5) or the story's first article (story)
    score: float
    story_size: int
    story_publishers: int
    new_story: bool


class _Redundancy:
    """Articles and cross-publisher title near-duplicates over the window, per slab.

    Expired slabs are not forgotten entirely: they fold into a bounded memory of the stream's
    rate (at most ``redundancy_min_articles`` pseudo-articles, so the window still decides
    within its own span) that stands in for the fixed cautious prior. A stream that was
    redundant and goes quiet for longer than the window (UCI has 3-4 day gaps; a flow stopped
    over a weekend) resumes in the regime it had, instead of re-learning it from scratch and
    fragmenting the first stories of the day (bench/README-stories.md)."""

    __slots__ = ("_slabs", "dups", "mem_dups", "mem_n", "n", "slab_ms", "window_ms")

    def __init__(self, window_ms: int, slab_ms: int) -> None:
        self.window_ms, self.slab_ms = window_ms, slab_ms
        self.n = 0
        self.dups = 0
        #: memory of expired slabs: pseudo-articles and their near-duplicates (floats)
        self.mem_n = 0.0
        self.mem_dups = 0.0
        self._slabs: dict[int, list[int]] = {}

    def add(self, time_ms: int, near_duplicate: bool) -> None:
        slab = self._slabs.setdefault(time_ms // self.slab_ms, [0, 0])
        slab[0] += 1
        self.n += 1
        if near_duplicate:
            slab[1] += 1
            self.dups += 1

    def expire(self, now_ms: int, memory: int = 0) -> None:
        """Drop slabs older than the window; with ``memory`` > 0 fold them into the memory
        of the rate, scaled to at most ``memory`` pseudo-articles (oldest slab first)."""
        cutoff = now_ms - self.window_ms
        for s in sorted(s for s in self._slabs if (s + 1) * self.slab_ms <= cutoff):
            n, d = self._slabs.pop(s)
            self.n -= n
            self.dups -= d
            if memory > 0 and n:
                mn, md = self.mem_n + n, self.mem_dups + d
                if mn > memory:
                    md *= memory / mn
                    mn = float(memory)
                self.mem_n, self.mem_dups = mn, md

    def level(self, config: StoryConfig) -> float:
        """How redundant the stream is: 0 (r <= redundancy_low) to 1
        (r >= redundancy_high), log-linear in between."""
        if not config.story_threshold_dense:
            return 0.0
        lo, hi = config.redundancy_low, config.redundancy_high
        # smoothed: redundancy_min_articles pseudo-articles at the remembered rate of expired
        # slabs (filled up at the low rate), so a young stream starts sparse (the cautious
        # regime) until its own near-duplicates say otherwise
        m = config.redundancy_min_articles
        mn = getattr(self, "mem_n", 0.0) if config.redundancy_memory else 0.0
        md = getattr(self, "mem_dups", 0.0) if mn else 0.0
        prior = md + max(m - mn, 0.0) * lo
        r = (self.dups + prior) / (self.n + max(m, mn))
        if r <= lo:
            return 0.0
        if r >= hi:
            return 1.0
        return math.log(r / lo) / math.log(hi / lo)


class _TermStats:
    """Document frequencies over the window (IDF learned online from the stream), per slab."""

    __slots__ = ("_slabs", "df", "n", "slab_ms", "window_ms")

    def __init__(self, window_ms: int, slab_ms: int) -> None:
        self.window_ms, self.slab_ms = window_ms, slab_ms
        self.df: Counter[str] = Counter()
        self.n = 0
        self._slabs: dict[int, tuple[list[int], Counter[str]]] = {}

    def add(self, terms: Iterable[str], time_ms: int) -> None:
        slab = self._slabs.setdefault(time_ms // self.slab_ms, ([0], Counter()))
        slab[0][0] += 1
        self.n += 1
        df, sdf = self.df, slab[1]
        for t in terms:
            df[t] = df.get(t, 0) + 1
            sdf[t] = sdf.get(t, 0) + 1

    def generic(self, terms: Iterable[str], max_df: float) -> set[str]:
        """Those of ``terms`` found in more than ``max_df`` of the window's documents."""
        lim = max_df * self.n
        df = self.df
        return {t for t in terms if df.get(t, 0) > lim}

    def rare(self, terms: Iterable[str], max_df: float) -> frozenset[str]:
        """Those of ``terms`` found in at most ``max_df`` of the window's documents."""
        lim = max_df * self.n
        df = self.df
        return frozenset(t for t in terms if df.get(t, 0) <= lim)

    def idf(self, term: str) -> float:
        return math.log((self.n + 1) / (self.df.get(term, 0) + 0.5))

    def add_and_weigh(self, terms: Sequence[tuple[str, float]], time_ms: int) -> dict[str, float]:
        """Count the document, then its unit TF-IDF vector (positive weights only):
        w(t) = tf(t) * log((N + 1) / (df(t) + 0.5)), N and df over the window, this doc
        included."""
        slab = self._slabs.get(time_ms // self.slab_ms)
        if slab is None:
            slab = self._slabs[time_ms // self.slab_ms] = ([0], Counter())
        slab[0][0] += 1
        self.n += 1
        n1 = self.n + 1
        df = self.df
        keys = [t for t, _ in terms]
        df.update(keys)  # Counter.update over an iterable counts in C
        slab[1].update(keys)
        log = math.log
        raw = [(t, w * log(n1 / (df[t] + 0.5))) for t, w in terms]
        sq = 0.0
        for _, x in raw:
            sq += x * x
        if sq <= 0.0:
            return {}
        inv = 1.0 / math.sqrt(sq)
        return {t: x * inv for t, x in raw if x > 0}

    def expire(self, now_ms: int) -> None:
        cutoff = now_ms - self.window_ms
        for s in sorted(s for s in self._slabs if (s + 1) * self.slab_ms <= cutoff):
            count, sdf = self._slabs.pop(s)
            self.n -= count[0]
            df = self.df
            for t, c in sdf.items():
                left = df[t] - c
                if left:
                    df[t] = left
                else:
                    del df[t]

    def snapshot(self) -> tuple[Any, ...]:
        return tuple((s, c[0], tuple(d.items())) for s, (c, d) in sorted(self._slabs.items()))

    def __getstate__(self) -> tuple[Any, ...]:
        """Pickled without ``df`` and ``n``: they are the sums of the slabs' counts, rebuilt on
        load (``df`` was about half of this state in a snapshot)."""
        return (_PACKED_V1, self.window_ms, self.slab_ms, self._slabs)

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        if state[0] is None:  # pickled before __getstate__: (None, {slot: value})
            set_slots(self, state)
            return
        _, self.window_ms, self.slab_ms, self._slabs = state
        self.df = Counter()
        self.n = 0
        for s in sorted(self._slabs):
            count, sdf = self._slabs[s]
            self.n += count[0]
            self.df.update(sdf)


@lru_cache(maxsize=1 << 18)
def _term_key(term: str) -> int:
    """Bucket key of a story-matching term in the story postings (stable xxh3)."""
    return xxhash.xxh3_64_intdigest(b"w\x00" + term.encode("utf-8", "surrogatepass"))


class StoryAssigner:
    """Layers 3-5 + story ids in one process, its state split the way a dataflow keys it.

    - ``band_shards`` :class:`BandIndex` shards, a bucket key routed by :func:`key_shard`;
    - article records (features of the window) and story states keyed by id;
    - story postings (term -> open stories) in :class:`StoryPostings` shards by term;
    - document frequencies for IDF.

    The result does not depend on the number of shards (tested). Call :meth:`assign` in event
    order with ``now_ms`` = the event-time watermark (defaults to the article's own time).
    """

    def __init__(self, config: StoryConfig = TUNED, band_shards: int = 1) -> None:
        self.config = config
        self.band_shards = max(1, band_shards)
        self.bands = [BandIndex(config.window_ms, config.slab_ms, config.max_bucket)
                      for _ in range(self.band_shards)]
        self.postings = [StoryPostings(config.story_idle_ms, config.max_postings)
                         for _ in range(self.band_shards)]
        self.articles: dict[str, StoryFeatures] = {}
        self.story_of: dict[str, str] = {}
        self.stories: dict[str, StoryState] = {}
        self.terms = _TermStats(config.window_ms, config.slab_ms)
        self.redundancy = _Redundancy(config.window_ms, config.slab_ms)
        self._dense_config = replace(
            config, story_min_concepts=0, same_publisher_factor=1.0, story_name_veto=False,
            story_name_boost=1.0,
            story_idle_ms=config.story_idle_ms_dense or config.story_idle_ms,
            story_threshold_decay=(config.story_threshold_decay if config.story_threshold_decay_dense < 0
                                   else config.story_threshold_decay_dense))
        self._article_slabs: dict[int, list[str]] = {}
        #: story merged away -> the story it was merged into (story_merge_dense)
        self.merged: dict[str, str] = {}
        #: merges since the last take_merges(), in order: (merged away, into)
        self.merge_log: list[tuple[str, str]] = []
        self._now = -(1 << 62)
        self._expired_until = -(1 << 62)

    # -- pickling (recovery snapshots)
    def __getstate__(self) -> dict[str, Any]:
        """The attributes, with the window's article features as columns (one list per field,
        in the dict's order): a story shard is pickled every epoch with recovery on, and ~5k
        features pickled one object at a time took 20 of its ~45 ms at the end of 100k UCI
        rows (as columns: ~11)."""
        state = dict(self.__dict__)
        state["articles_columns"] = to_columns(state.pop("articles"), StoryFeatures)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        state = dict(state)
        cols = state.pop("articles_columns", None)
        self.__dict__.update(state)
        if cols is not None:  # (a snapshot of before the columns keeps the dict itself)
            self.articles = from_columns(cols, StoryFeatures)

    # -- event time
    def advance(self, now_ms: int) -> None:
        """Move the event-time clock; expire state once per slab boundary."""
        if now_ms <= self._now:
            return
        self._now = now_ms
        cfg = self.config
        if now_ms - self._expired_until < cfg.slab_ms:
            return
        self._expired_until = now_ms
        for b in self.bands:
            b.expire(now_ms)
        for p in self.postings:
            p.expire(now_ms)
        self.terms.expire(now_ms)
        self.redundancy.expire(now_ms, cfg.redundancy_min_articles if cfg.redundancy_memory else 0)
        cutoff = now_ms - cfg.window_ms
        for s in [s for s in self._article_slabs if (s + 1) * cfg.slab_ms <= cutoff]:
            for ref in self._article_slabs.pop(s):
                self.articles.pop(ref, None)
                self.story_of.pop(ref, None)
        for sid in [sid for sid, st in self.stories.items() if st.last_ms < cutoff]:
            del self.stories[sid]
        if self.merged:
            self.merged = {a: b for a, b in self.merged.items() if b in self.stories}

    def _merge(self, into: StoryState, other: StoryState) -> None:
        """Merge ``other`` into ``into`` (state only: articles already placed keep their ids;
        near-duplicates of them follow ``into`` from now on)."""
        cfg = self.config
        c = into.centroid
        for t, w in other.centroid.items():
            c[t] = c.get(t, 0.0) + w
        if len(c) >= 2 * cfg.centroid_max_terms:
            into.centroid = dict(sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))[:cfg.centroid_max_terms])
        into.norm = math.sqrt(sum(w * w for w in into.centroid.values()))
        into.count += other.count
        into.publishers |= other.publishers
        if other.day_keys():
            into.add_dates(other.day_keys())
        if other.name_keys()[1]:
            into.add_names(*other.name_keys())
        into.first_ms = min(into.first_ms, other.first_ms)
        into.last_ms = max(into.last_ms, other.last_ms)
        del self.stories[other.story_id]
        self.merged[other.story_id] = into.story_id
        self.merge_log.append((other.story_id, into.story_id))
        for a, b in self.merged.items():
            if b == other.story_id:
                self.merged[a] = into.story_id
        posted = [t for t in other.centroid if t in into.centroid]
        if posted:
            self._postings_add(posted, into.story_id, other.last_ms)

    def take_merges(self) -> list[tuple[str, str]]:
        """The merges since the last call, in order: ``(merged-away story, story it joined)``."""
        out, self.merge_log = self.merge_log, []
        return out

    # -- the pipeline
    def _lookup(self, keys: Sequence[int], shards: list[BandIndex],
                since_ms: int | None = None) -> list[tuple[Any, int]]:
        if self.band_shards == 1:
            return shards[0].lookup(keys, self._now, since_ms)
        out: list[tuple[Any, int]] = []
        n = self.band_shards
        for k in keys:  # key order, as the single-shard lookup
            out.extend(shards[key_shard(k, n)].lookup((k,), self._now, since_ms))
        return out

    def _insert(self, keys: Sequence[int], ref: Any, time_ms: int, shards: list[BandIndex],
                unique: bool = False) -> None:
        if self.band_shards == 1:
            shards[0].insert(keys, ref, time_ms, unique)
            return
        n = self.band_shards
        for k in keys:
            shards[key_shard(k, n)].insert((k,), ref, time_ms, unique)

    def candidates(self, features: StoryFeatures) -> list[StoryFeatures]:
        """Candidate articles: those sharing an LSH band key (title or body), most shared
        bands first, then those sharing entity keys (Layer 5), each list bounded by
        ``max_candidates`` so the cost per article does not grow with the window."""
        cfg = self.config
        arts = self.articles
        out: list[StoryFeatures] = []
        seen = {features.ref}
        groups = [list(features.title_keys) + list(features.body_keys)]
        if cfg.use_entity_layer and len(features.entities) >= cfg.entity_min_keys:
            groups.append(entity_index_keys(features))
        for keys in groups:
            if not keys:
                continue
            hits = self._lookup(keys, self.bands)
            if not hits:
                continue
            counts = Counter(ref for ref, _ in hits)
            ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
            n = 0
            for r, _ in ranked:
                if r in seen or r not in arts:
                    continue
                seen.add(r)
                out.append(arts[r])
                n += 1
                if n >= cfg.max_candidates:
                    break
        return out

    def _vector(self, features: StoryFeatures) -> dict[str, float]:
        return self.terms.add_and_weigh(story_terms(features), features.time_ms)

    def _postings_lookup(self, terms: Iterable[str], now_ms: int) -> dict[str, list[str]]:
        if self.band_shards == 1:
            return self.postings[0].lookup(terms, now_ms)
        n = self.band_shards
        out: dict[str, list[str]] = {}
        for t in terms:
            out.update(self.postings[_term_key(t) % n].lookup((t,), now_ms))
        return out

    def _postings_add(self, terms: Sequence[str], sid: str, time_ms: int) -> None:
        if self.band_shards == 1:
            self.postings[0].add(terms, sid, time_ms)
            return
        n = self.band_shards
        for t in terms:
            self.postings[_term_key(t) % n].add((t,), sid, time_ms)

    def assign(self, features: StoryFeatures, now_ms: int | None = None,
               duplicate_of: str | None = None) -> StoryAssignment:
        """Decide and place one article. ``duplicate_of``: the article id that layers 1-2
        (GUID/URL) matched — a revision or exact duplicate keeps that article's story."""
        cfg = self.config
        self.advance(features.time_ms if now_ms is None else now_ms)
        now = self._now
        ref = features.ref

        prior = duplicate_of if duplicate_of in self.story_of else (
            ref if ref in self.story_of else None)
        if prior is not None:
            # Layers 1-2 (or the same article id again): a revision or a copy keeps the story;
            # it is re-indexed under its (possibly edited) title but is not a new member.
            sid = self.story_of[prior]
            if self.merged:  # its story was merged away since: the story it joined
                sid = self.merged.get(sid, sid)
            decision = Decision(Disposition.REVISION if prior == ref else Disposition.EXACT_DUPLICATE,
                                "guid" if prior == ref else "url", prior, 1.0)
            return self._place(features, {}, sid, decision, new=False, member=False)
        vec = self._vector(features) if cfg.story_match else {}

        cands = self.candidates(features)
        decision = decide(features, cands, cfg)
        if cfg.story_threshold_dense:
            near = decision.layer == "title" and decision.disposition == Disposition.NEAR_DUPLICATE and \
                decision.matched_ref is not None and \
                self.articles[decision.matched_ref].publisher != features.publisher
            self.redundancy.add(features.time_ms, near)
        story: StoryState | None = None
        mcfg, thr = cfg, None  # the matching regime of a sparse or a redundant stream
        if cfg.story_threshold_dense:
            x = self.redundancy.level(cfg)
            thr = cfg.story_threshold + x * (cfg.story_threshold_dense - cfg.story_threshold)
            if x >= 0.5:  # a redundant stream: the sparse-stream guards are off
                mcfg = self._dense_config
        follow = decision.matched_ref is not None and (
            cfg.follow_same_publisher_duplicates
            or self.articles[decision.matched_ref].publisher != features.publisher)
        if follow:
            matched_sid = self.story_of.get(decision.matched_ref)  # type: ignore[arg-type]
            if matched_sid is not None and self.merged:
                matched_sid = self.merged.get(matched_sid, matched_sid)
            story = self.stories.get(matched_sid) if matched_sid is not None else None
            if story is not None and cfg.reopen_closed_stories and \
                    now - story.last_ms >= mcfg.story_idle_ms:
                story = None
            if story is not None and story.other_days(features.publisher, features.dates):
                # another episode of a dated series, not a copy of it
                story, decision = None, Decision(Disposition.UNIQUE, None, None, 0.0)
        if story is None and cfg.story_match and vec:
            postings = self._postings_lookup(vec, now)
            generic = (self.terms.generic(vec, cfg.story_generic_df)
                       if cfg.story_min_specific or cfg.story_min_concepts else frozenset())
            merge = cfg.story_merge_dense if mcfg is self._dense_config else 0.0
            passing: list[StoryState] | None = [] if merge else None
            rare: AbstractSet[str] = frozenset()
            if mcfg.story_name_boost != 1.0 and len(features.names) >= mcfg.story_name_min_shared:
                rare = self.terms.rare(features.names, mcfg.story_name_rare_df)
            st, score = match_story_centroid(vec, postings, self.stories, now, mcfg, generic, thr,
                                             features.publisher, passing, features.dates,
                                             (features.names, features.name_words), rare)
            if st is not None and passing:
                for other in sorted(passing, key=lambda o: o.story_id):
                    if other is not st and _centroid_cosine(st, other) >= merge:
                        self._merge(st, other)
            if st is not None:
                story = st
                if decision.matched_ref is None:
                    decision = Decision(Disposition.SAME_EVENT, "story", st.first_ref, score)
        if story is None:
            return self._place(features, vec, story_id_for(ref), decision, new=True)
        return self._place(features, vec, story.story_id, decision, new=False)

    def _place(self, features: StoryFeatures, vec: Mapping[str, float], sid: str,
               decision: Decision, new: bool, member: bool = True) -> StoryAssignment:
        cfg = self.config
        ref = features.ref
        st = self.stories.get(sid)
        if st is None:
            # (a copy of an article whose story expired before the article did: the story
            # starts again with it as its one member, never with none)
            st = self.stories[sid] = StoryState(sid, ref, features.time_ms, features.time_ms)
            new = member = True
        if member:
            st.add(features.publisher, features.time_ms, vec, cfg.centroid_max_terms, features.dates,
                   features.names, features.name_words)
        else:  # a sighting of a known article: counts for distinct publishers only
            if features.publisher:
                st.publishers.add(features.publisher)
            st.last_ms = max(st.last_ms, features.time_ms)
        if cfg.story_match and vec:
            # post (or refresh) the story under this article's terms: an active story stays
            # findable by the words its recent members use
            cent = st.centroid
            posted = [t for t in vec if t in cent]
            if posted:
                self._postings_add(posted, sid, features.time_ms)
        if ref not in self.articles:
            self._article_slabs.setdefault(features.time_ms // cfg.slab_ms, []).append(ref)
        self._insert(index_keys(features, cfg), ref, features.time_ms, self.bands)
        # kept for the window as a candidate: what decide() reads of a candidate, without the
        # band keys and terms only an arriving article needs (a third of the bytes kept)
        f = features
        self.articles[ref] = StoryFeatures(f.ref, f.publisher, f.time_ms, f.words, (), (), f.body_sig,
                                           f.simhash, f.sentences, f.entities, ())
        self.story_of[ref] = sid
        return StoryAssignment(ref, sid, decision.disposition, decision.layer,
                               decision.matched_ref, round(decision.score, 4), st.count,
                               len(st.publishers), new)

    # -- measurement
    def live_articles(self) -> int:
        return len(self.articles)

    def snapshot(self) -> tuple[Any, ...]:
        """Compact picklable state (used to measure bytes per article)."""
        arts = tuple(
            (f.ref, self.story_of.get(f.ref, ""), f.publisher, f.time_ms, " ".join(f.words),
             " ".join(f.entities), f.simhash, f.body_sig, f.sentences)
            for f in self.articles.values()
        )
        return (
            tuple(b.snapshot() for b in self.bands),
            tuple(p.snapshot() for p in self.postings),
            arts,
            tuple(st.snapshot() for st in self.stories.values()),
            self.terms.snapshot(),
        )


def shard_for_story(story_id: str, shards: int) -> int:
    """Shard of a story's state in a keyed dataflow (stable, see ``hashing.shard_of``)."""
    return shard_of(story_id, shards)
