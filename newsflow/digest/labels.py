"""Topic labels and summaries: the cluster's entity (phrases from :mod:`newsflow.text.entities`),
extractive summaries.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from newsflow.digest.entries import body_text
from newsflow.text.entities import capitalized_phrases, is_title_case, with_of_phrase
from newsflow.text.sentences import split_sentences
from newsflow.text.tokenize import _analyze_word, words

# --------------------------------------------------------------------------------------
# Entities, labels, summaries
# --------------------------------------------------------------------------------------


def body_key(rec: Mapping[str, Any]) -> str | bytes:
    """What stands for a record's body in memo keys, without decompressing it: its
    ``body_text``, or an entry's compressed words (:func:`newsflow.digest.entries.body_text`)."""
    b = rec.get("body_text")
    if b is not None:
        return str(b)
    z = rec.get("_bz")
    return z if isinstance(z, bytes) else b""


def body_of_key(key: str | bytes) -> str:
    """The body text behind :func:`body_key`."""
    return key if isinstance(key, str) else body_text({"_bz": key})


def _entities_of(rec: Mapping[str, Any]) -> dict[str, int]:
    """Entity phrases of one article -> weight (2 when in the title, 1 when only in the first
    80 body words). A headline's sentence-initial word counts when the body also capitalizes
    it mid-sentence ("Apple unveils ..." + "... Apple said")."""
    return dict(_entities_keyed(rec.get("title") or "", body_key(rec)))


@functools.lru_cache(maxsize=1 << 15)
def _entities_keyed(title: str, body: str | bytes) -> tuple[tuple[str, int], ...]:
    """:func:`_entities_of` by (title, :func:`body_key`): a hit costs no decompression."""
    return _entities_text(title, " ".join(body_of_key(body).split()[:80]))


@functools.lru_cache(maxsize=1 << 15)
def _entities_text(title: str, body: str) -> tuple[tuple[str, int], ...]:
    """:func:`_entities_of` of a title and its first 80 body words (pure: memoized, an
    article's entities are asked for by every window and label it is in)."""
    body_ents = capitalized_phrases(body)
    out: dict[str, int] = dict.fromkeys(body_ents, 1)
    if title and not is_title_case(title.split()):
        confirmed = {e.lower() for e in body_ents}
        plain: list[str] | None = None  # the title's phrases without sentence-initial words
        for e in capitalized_phrases(title, skip_initial=False):
            if e.lower() in confirmed:
                out[e] = 2
                continue
            if plain is None:
                plain = capitalized_phrases(title)
            if e in plain:
                out[e] = 2
    return tuple(out.items())


def cluster_entity(members: Sequence[Mapping[str, Any]]) -> str | None:
    """The most frequent capitalized phrase across the cluster's articles (each article counts
    once, a title mention twice); for 2+ articles it must appear in at least 2 of them."""
    c: Counter[str] = Counter()
    arts: Counter[str] = Counter()
    case: dict[str, Counter[str]] = {}
    for r in members:
        seen: dict[str, int] = {}
        for e, w in _entities_of(r).items():
            k = e.lower()
            seen[k] = max(seen.get(k, 0), w)
            case.setdefault(k, Counter())[e] += 1
        for k, w in seen.items():
            c[k] += w
            arts[k] += 1
    if not c:
        return None
    need = 2 if len(members) >= 2 else 1
    best = sorted(c.items(), key=lambda kv: (-kv[1], -len(kv[0].split()), kv[0]))
    for k, _ in best:
        if arts[k] >= need:
            forms = case[k]
            return sorted(forms.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
    return None


def title_entities(r: Mapping[str, Any]) -> dict[str, str]:
    """lowercase -> surface of the named entities of one article's title (see
    :func:`title_entity`)."""
    return dict(_title_entities(r.get("title") or "", body_key(r)))


@functools.lru_cache(maxsize=1 << 15)
def _title_entities(title: str, body: str | bytes) -> tuple[tuple[str, str], ...]:
    """:func:`title_entities` by (title, :func:`body_key`), memoized: every window showing
    the article asks again."""
    tl = _spaced_words(title)
    found: dict[str, str] = {}
    for e, w in _entities_keyed(title, body):
        if w == 2 or _spaced_words(e) in tl:
            found.setdefault(e.lower(), e)
    return tuple(found.items())


@functools.lru_cache(maxsize=1 << 16)
def _spaced_words(text: str) -> str:
    """`` w1 w2 ... `` (the text's lower-cased words between spaces), memoized: the same
    names come back in many articles."""
    return f" {' '.join(words(text))} "


def title_entity(members: Sequence[Mapping[str, Any]]) -> str | None:
    """The story's most frequent named entity found in its *titles* (000 Step 5 "[Entity]"):
    phrases of each title (a sentence-initial word when the body confirms it; for Title Case
    headlines, the body's entities the title contains), each title counting once; with 2+
    articles it must be in at least 2 titles. Ties: the earlier in the lead's title, the longer
    phrase, then alphabetical."""
    c: Counter[str] = Counter()
    case: dict[str, Counter[str]] = {}
    for r in members:
        for k, e in title_entities(r).items():
            c[k] += 1
            case.setdefault(k, Counter())[e] += 1
    need = 2 if len(members) >= 2 else 1
    lead = (members[0].get("title") or "").lower() if members else ""

    def pos(k: str) -> int:  # the headline's subject comes first: "Ukraine ... in Geneva"
        i = lead.find(k)
        return i if i >= 0 else len(lead) + 1

    for k, n in sorted(c.items(), key=lambda kv: (-kv[1], pos(kv[0]), -len(kv[0].split()), kv[0])):
        if n >= need:  # as the titles write it, with an "of <Name>" they add ("Isle of Wight")
            return with_of_phrase(sorted(case[k].items(), key=lambda kv: (-kv[1], kv[0]))[0][0],
                                [r.get("title") or "" for r in members])
    return None


_WORD_CASED = re.compile(r"[^\W_]+", re.UNICODE)
def extractive_summary(
    rec: Mapping[str, Any],
    key_stems: Sequence[str] = (),
    words_range: tuple[int, int] = (50, 75),
    max_sentences: int = 12,
) -> str:
    """50-75 words (by default) taken from the lead article's own sentences: the first
    sentences, plus the ones that best cover the topic's key terms, in their original order;
    cut (with "…") at the maximum. Falls back to the title when there is no body."""
    lo, hi = words_range
    title = rec.get("title") or ""
    sents, stem_sets, fallback = _summary_sentences(title, body_key(rec), max_sentences)
    if not sents:
        toks = fallback.split()
        return " ".join(toks[:hi]) + (" …" if len(toks) > hi else "")
    keys = set(key_stems)
    scored = []
    for i, stems in enumerate(stem_sets):
        scored.append((-(len(stems & keys) + (2.0 if i == 0 else 1.0 / (1 + i))), i))
    chosen: list[int] = []
    n = 0
    for _, i in sorted(scored):
        if n >= lo:
            break
        chosen.append(i)
        n += len(sents[i].split())
    toks = " ".join(sents[i] for i in sorted(chosen)).split()
    if len(toks) > hi:
        return " ".join(toks[:hi]).rstrip(",;:") + " …"
    return " ".join(toks)


#: links, bare domains and hashtags are not prose (video-channel descriptions are full of them)
_URLISH = re.compile(r"(?:https?://|www\.)\S+|\b[\w-]+\.(?:ly|com|net|org|tv|io)/\S*|(?<!\w)#\w+")
#: calls to action of channel and newsletter descriptions: never a summary sentence
_BOILERPLATE = re.compile(
    r"\b(?:click (?:the |on the )?links?|subscribe (?:to|now|here)|follow us|like us on|visit our website|"
    r"sign up for|download (?:the|our) app|watch (?:more|the latest|live)|turn on notifications)\b", re.IGNORECASE)


@functools.lru_cache(maxsize=1 << 12)
def _summary_sentences(
    title: str, body: str | bytes, max_sentences: int
) -> tuple[tuple[str, ...], tuple[frozenset[str], ...], str]:
    """What :func:`extractive_summary` reads of an article, whatever the topic's key stems:
    its candidate sentences (4+ words, not the title again), their stem sets, and the text
    shown when there is none. Memoized per article (a lead is summarized again in every
    window that shows it)."""
    text = _URLISH.sub(" ", body_of_key(body))
    every = split_sentences(text)
    sents = [x for x in every if not _BOILERPLATE.search(x)][:max_sentences]
    if every and not sents:  # nothing but calls to action: the title says more
        text = ""
    tnorm = " ".join(words(title))
    sents = [s for s in sents if len(s.split()) >= 4 and " ".join(words(s)) != tnorm]
    stems = tuple(frozenset(a[0] for w in words(s) if (a := _analyze_word(w)) is not None) for s in sents)
    return tuple(sents), stems, "" if sents else (" ".join(text.split()) or title)
