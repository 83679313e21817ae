"""The shared text analysis of scoring, topics and digests: lower-case words, stop words, Porter
stems, stable 64-bit token hashes, TF-IDF feature rows (title x2 + first 200 words).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, cast

import numpy as np
import xxhash

from newsflow.text.stopwords import ENGLISH_STOP_WORDS

# --------------------------------------------------------------------------------------
# Text analysis shared by scoring, topics and digests
# --------------------------------------------------------------------------------------

STOP_WORDS: frozenset[str] = frozenset(ENGLISH_STOP_WORDS) | frozenset(
    {"s", "t", "ll", "ve", "re", "d", "m", "said", "says", "say", "new", "just", "like", "also"}
)
_WORD_RE = re.compile(r"[^\W_]+", re.UNICODE)
_STEMMER: Any = None
# word -> (stem, stable 64-bit hash of the stem) or None for a dropped word (stop word, 1 char)
_TOKEN_CACHE: dict[str, tuple[str, int] | None] = {}
_TOKEN_CACHE_MAX = 500_000


# --- the two stemmers: Porter for topic features, a plural stripper for story matching -----


def _porter() -> Any:
    global _STEMMER
    if _STEMMER is None:
        # snowballstemmer's "porter" is the original Porter (1980) algorithm; it transparently
        # uses PyStemmer's C implementation when that is installed (same output, ~50x faster).
        import snowballstemmer

        _STEMMER = snowballstemmer.stemmer("porter")
    return _STEMMER


def porter_stem(word: str) -> str:
    """Porter stems (docs/rules.md#topic-clustering): the stems of scoring, topic and digest
    features (:func:`words` -> stem -> :func:`token_hash`).

    >>> [porter_stem(w) for w in ("stocks", "rallied", "rallying", "companies")]
    ['stock', 'ralli', 'ralli', 'compani']
    """
    stem: str = _porter().stemWord(word)
    return stem


@lru_cache(maxsize=1 << 18)
def light_stem(word: str) -> str:
    """A tiny, deterministic plural stripper for story matching (the story step's terms).

    Enough to make "merger"/"mergers" or "stock"/"stocks" one term; not used by the Layer 3
    Jaccard, which compares word sets as they are (docs/rules.md#layer-3-title-similarity).
    Porter stems there instead were measured (20k UCI rows: B-cubed F1 0.826 vs 0.822; the
    labelled real day 2020-05-06: 0.654 vs 0.676) -- no better overall, so story matching
    keeps this one.

    >>> [light_stem(w) for w in ("banks", "stories", "glass", "status")]
    ['bank', 'story', 'glass', 'status']
    """
    n = len(word)
    if n > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if n > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def token_hash(token: str) -> int:
    """Stable 64-bit hash of a token (xxh3; never Python's salted ``hash()``)."""
    return xxhash.xxh3_64_intdigest(token.encode("utf-8", "surrogatepass")) or 1  # 0: "none"


def _analyze_word(w: str) -> tuple[str, int] | None:
    """(stem, hash) of one lower-cased word, or None when it is dropped."""
    hit = _TOKEN_CACHE.get(w, False)
    if hit is not False:
        return hit  # type: ignore[return-value]
    if len(w) < 2 or w in STOP_WORDS or w.isdigit():
        res: tuple[str, int] | None = None
    else:
        s = porter_stem(w)
        res = None if s in STOP_WORDS else (s, token_hash(s))
    if len(_TOKEN_CACHE) >= _TOKEN_CACHE_MAX:  # bounded; results never depend on the cache
        _TOKEN_CACHE.clear()
    _TOKEN_CACHE[w] = res
    return res


# Raw whitespace token (any case, with punctuation) -> stable hash of its first analyzed word
# (0: none). The few raw tokens holding 2+ words ("U.S.-based") keep the others in _MULTI.
# Lookups go through ``map(dict.__getitem__, tokens)`` (a C loop): much faster than a regex
# tokenizer plus a Python loop per word.
_HCACHE: dict[str, int] = {}
_MULTI: dict[str, tuple[int, ...]] = {}


def _learn_raw_tokens(new: Iterable[str]) -> None:
    for tok in new:
        hs = [a[1] for w in _WORD_RE.findall(tok.lower()) if (a := _analyze_word(w)) is not None]
        if len(hs) > 1:
            _MULTI[tok] = tuple(hs)
            _HCACHE[tok] = -1  # marker: look in _MULTI
        else:
            _HCACHE[tok] = hs[0] if hs else 0


def _cached_hashes(tokens: list[str]) -> list[int]:
    """Each raw token's cached hash (0: no word, -1: several words, see :data:`_MULTI`),
    learning the tokens not seen yet."""
    cached = list(map(_HCACHE.get, tokens))
    if None not in cached:
        return cast("list[int]", cached)  # no None left: every token was cached
    new = {t for t, h in zip(tokens, cached, strict=True) if h is None}
    if len(_HCACHE) + len(new) >= _TOKEN_CACHE_MAX:  # bounded; results never depend on it
        _HCACHE.clear()
        _MULTI.clear()
        new = set(tokens)
    _learn_raw_tokens(new)
    return list(map(_HCACHE.__getitem__, tokens))


def _splice_multi(hs: list[int], tokens: list[str], grew: Callable[[int, int], None] | None = None) -> list[int]:
    """``hs`` with each -1 (a raw token of several words) replaced by its words' hashes;
    ``grew(i, n)`` is told that token ``i`` became ``n`` hashes. ``list.index`` scans in C."""
    if -1 not in hs:
        return hs
    out: list[int] = []
    start = 0
    while True:
        try:
            i = hs.index(-1, start)
        except ValueError:
            break
        out.extend(hs[start:i])
        extra = _MULTI[tokens[i]]
        out.extend(extra)
        if grew is not None:
            grew(i, len(extra))
        start = i + 1
    out.extend(hs[start:])
    return out


def token_hashes(tokens: list[str]) -> np.ndarray:
    """Stem hashes (uint64) of whitespace tokens, in order; stop words and punctuation dropped."""
    hs = _splice_multi(_cached_hashes(tokens), tokens)
    arr = np.array(hs, dtype=np.uint64)
    nonzero: np.ndarray = arr[arr != 0]
    return nonzero


def features_batch(
    docs: Sequence[tuple[str, str]], *, title_weight: int = 2, body_words: int = 200
) -> list[TextFeatures]:
    """:meth:`TextFeatures.of` for many ``(title, body_text)`` pairs with one cache lookup
    pass and one array conversion (same result, less per-document overhead)."""
    toks: list[str] = []
    lens: list[int] = []
    for title, body in docs:
        n0 = len(toks)
        if title_weight > 0 and title:
            toks.extend(title.split() * title_weight)
        if body_words > 0 and body:
            b = body.split(None, body_words)
            if len(b) > body_words:
                del b[body_words:]
            toks.extend(b)
        lens.append(len(toks) - n0)
    hs = _cached_hashes(toks)
    if -1 in hs:
        ends = np.cumsum(lens)

        def grew(i: int, n: int) -> None:  # the document holding token i has n - 1 more hashes
            lens[int(np.searchsorted(ends, i, side="right"))] += n - 1

        hs = _splice_multi(hs, toks, grew)
    arr = np.array(hs, dtype=np.uint64)
    rows = np.repeat(np.arange(len(lens)), lens)
    keep = arr != 0
    arr = arr[keep]
    counts = np.bincount(rows[keep], minlength=len(lens))
    offs = np.concatenate(([0], np.cumsum(counts))).tolist()
    return [TextFeatures(arr[offs[i] : offs[i + 1]]) for i in range(len(lens))]


def words(text: str) -> list[str]:
    """Lower-cased word tokens (Unicode letters/digits), stop words *not* removed."""
    return _WORD_RE.findall(text.lower())


def analyze(text: str) -> list[str]:
    """Lower-case, drop stop words and 1-char tokens, Porter-stem."""
    out = []
    for w in _WORD_RE.findall(text.lower()):
        a = _analyze_word(w)
        if a is not None:
            out.append(a[0])
    return out


def first_words(text: str, n: int) -> str:
    """The first ``n`` whitespace-separated words of ``text``."""
    if n <= 0 or not text:
        return ""
    parts = text.split(None, n)
    return " ".join(parts[:n])


def doc_text(title: str, body_text: str, *, title_weight: int = 2, body_words: int = 200) -> str:
    """``title`` x ``title_weight`` + the first ``body_words`` words of the body (docs/rules.md#topic-clustering)."""
    return " ".join([title] * title_weight + [first_words(body_text, body_words)])


@dataclass(slots=True)
class TextFeatures:
    """Analyzed text of one article: the stem hash of every kept token occurrence (title
    tokens repeated ``title_weight`` times, then the first ``body_words`` body words)."""

    hashes: np.ndarray  # uint64
    _uc: tuple[np.ndarray, np.ndarray] | None = None

    @property
    def n_tokens(self) -> int:
        return len(self.hashes)

    def unique_counts(self) -> tuple[np.ndarray, np.ndarray]:
        """(sorted unique hashes, their counts)."""
        if self._uc is None:
            self._uc = np.unique(self.hashes, return_counts=True)
        return self._uc

    @property
    def counts(self) -> dict[int, int]:
        u, c = self.unique_counts()
        return dict(zip(u.tolist(), c.tolist(), strict=True))

    @classmethod
    def of(
        cls, title: str, body_text: str, *, title_weight: int = 2, body_words: int = 200
    ) -> TextFeatures:
        toks = title.split() * title_weight if title_weight > 0 else []
        if body_words > 0 and body_text:
            body = body_text.split(None, body_words)
            toks.extend(body[:body_words] if len(body) > body_words else body)
        return cls(token_hashes(toks))

    @classmethod
    def of_text(cls, text: str) -> TextFeatures:
        return cls(token_hashes(text.split()))

    @classmethod
    def of_record(cls, rec: Mapping[str, Any], *, body_words: int = 200) -> TextFeatures:
        return cls.of(rec.get("title") or "", rec.get("body_text") or "", body_words=body_words)
