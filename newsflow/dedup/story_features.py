"""Story features: article -> compact :class:`StoryFeatures` (stateless, pure domain code).

Rules: docs/rules.md#layer-3-title-similarity, docs/rules.md#layer-4-body-fingerprints. Title words and the LSH band keys
of their word-set MinHash, the body-shingle MinHash (band keys and a b-bit signature), the
first-sentence keys, the story-matching terms (title, URL slug, summary lead), the calendar days
a title names and the names of title and lead. Computed once per article where the dedup
shards run (``featurize_batch``), read by :mod:`newsflow.dedup.story_assigner`.

Hashes are stable (xxh3/sha1), never Python's ``hash()``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import pairwise
from typing import Any, NamedTuple, Protocol

from newsflow.dedup.similarity import (
    compress_signature,
    first_sentences,
    lsh_band_keys_bulk,
    minhash_signatures,
    sentence_key,
)
from newsflow.dedup.story_config import StoryConfig
from newsflow.feeds.tiers import BUILTIN_TIERS, SourceTiers
from newsflow.runtime.pickling import fast_pickle
from newsflow.text.demonyms import DEMONYMS
from newsflow.text.entities import capitalized_phrases, entity_keys, is_title_case
from newsflow.text.titles import (
    content_tokens,
    episode_keys,
    normalize_title,
    url_slug_tokens,
    word_shingles,
)

__all__ = [
    "ArticleLike",
    "StoryFeatures",
    "StoryInput",
    "featurize",
    "featurize_batch",
    "index_keys",
    "name_keys",
    "story_terms",
]

#: MinHash permutations of titles and bodies (docs/rules.md#layer-4-body-fingerprints)
NUM_PERM = 128
#: LSH bands x rows of a MinHash (b=16, r=8: a Jaccard-0.7 pair shares a band with p ~0.9)
LSH_BANDS = 16
LSH_ROWS = 8
#: body shingles are runs of this many words (docs/rules.md#layer-4-body-fingerprints)
BODY_SHINGLE_WORDS = 3
#: weight of a title bigram relative to a title word (a shared bigram is a shared phrase)
BIGRAM_WEIGHT = 1.0
#: weight of a URL-slug word: the slug repeats the title, so it counts half
SLUG_WEIGHT = 0.5
#: content words of the summary/body lead added to the story terms, at this weight: the
#: description says what the headline leaves out (the topic vectors use title + first 200 words, docs/rules.md#online-topics)
BODY_TERM_WORDS = 30
BODY_TERM_WEIGHT = 0.5

_DEFAULT = StoryConfig()


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
    """Compact, picklable features of one article: all that layers 3-4 and stories need."""

    ref: str  # article_id
    publisher: str
    time_ms: int
    words: tuple[str, ...]  # normalized title words (Layer 3 word set), in order
    title_keys: tuple[int, ...]  # LSH band keys of the title word-set MinHash
    body_keys: tuple[int, ...] = ()  # LSH band keys of the body-shingle MinHash
    body_sig: bytes = b""  # b-bit (16) MinHash of the body, b"" when no body
    sentences: tuple[int, ...] = ()  # keys of the first 3 non-trivial sentences
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


def featurize(article: Any, config: StoryConfig = _DEFAULT) -> StoryFeatures:
    """Stateless features of an article (``Article`` or :class:`StoryInput`).

    Title: the normalization of docs/rules.md#layer-3-title-similarity -> word set -> MinHash(128) -> LSH band keys (b=16, r=8),
    "Found through LSH over title shingles". Body (when present): 3-word shingles ->
    MinHash(128) -> band keys + a 256-byte b-bit signature to confirm Jaccard >= 0.7;
    first-3-sentence keys (docs/rules.md#layer-4-body-fingerprints). Story terms: title words (stop words dropped, plurals folded)
    + title bigrams + URL-slug words, and the summary lead's words.
    """
    return featurize_batch([article], config)[0]


def _story_text(a: Any) -> str:
    text = getattr(a, "story_text", None)  # (an Article pickled before the field: None)
    return (getattr(a, "body_text", "") or "") if text is None else text


def featurize_batch(articles: Sequence[Any], config: StoryConfig = _DEFAULT,
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
    title_keys = lsh_band_keys_bulk(minhash_signatures(words, NUM_PERM), LSH_BANDS, LSH_ROWS, "t").tolist()
    # the body without its feed document's boilerplate (Article.story_text) when it had some
    bodies = [_story_text(a) for a in articles]
    cap = config.max_body_words
    body_words = [normalize_title(b[: cap * 16]).split()[:cap] if b else [] for b in bodies]
    body_shingles = [word_shingles(w, BODY_SHINGLE_WORDS) if w else [] for w in body_words]
    with_body = [i for i in range(n) if body_shingles[i]]
    body_keys: dict[int, tuple[int, ...]] = {}
    body_sigs: dict[int, bytes] = {}
    if with_body:
        # (body shingles are runs of words, mostly seen once: hashed without the title words' memo)
        sigs = minhash_signatures([body_shingles[i] for i in with_body], NUM_PERM, cached=False)
        keys = lsh_band_keys_bulk(sigs, LSH_BANDS, LSH_ROWS, "b").tolist()
        for j, i in enumerate(with_body):
            body_keys[i] = tuple(keys[j])
            body_sigs[i] = compress_signature(sigs[j])
    out = []
    for i, a in enumerate(articles):
        body = bodies[i]
        toks = content_tokens(words[i])
        tf: dict[str, float] = {}
        for t in toks:
            tf[t] = tf.get(t, 0.0) + 1.0
        for x, y in pairwise(toks):
            k = x + "_" + y
            tf[k] = tf.get(k, 0.0) + BIGRAM_WEIGHT
        url = getattr(a, "canonical_url", None) or getattr(a, "url", None)
        for t in content_tokens(url_slug_tokens(url)):
            tf[t] = tf.get(t, 0.0) + SLUG_WEIGHT
        btf: dict[str, float] = {}
        if body_words[i]:
            lead = content_tokens(body_words[i][: BODY_TERM_WORDS * 2])
            own = _publisher_terms(pubs[i])  # "... by Sydney Morning Herald artist ...": no evidence
            for t in lead[:BODY_TERM_WORDS]:
                if t not in own:
                    btf[t] = btf.get(t, 0.0) + BODY_TERM_WEIGHT
        out.append(StoryFeatures(
            ref=a.article_id,
            publisher=family(pubs[i], url),
            time_ms=int(a.published_ms),
            words=words[i],
            title_keys=tuple(title_keys[i]) if words[i] else (),
            body_keys=body_keys.get(i, ()),
            body_sig=body_sigs.get(i, b""),
            sentences=tuple(sentence_key(x) for x in first_sentences(body)) if body else (),
            terms=tuple(sorted(tf.items())),
            body_terms=tuple(sorted(btf.items())),
            dates=episode_keys(a.title or ""),
            **_names(a.title or "", body, pubs[i]),
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


def index_keys(features: StoryFeatures) -> list[int]:
    """All bucket keys an article is indexed (and looked up) under: title and body bands."""
    return list(features.title_keys) + list(features.body_keys)
