"""Topic labels and summaries (pure): the topic's entity (phrases from
:mod:`newsflow.text.entities`), its label (the lead's headline, after "[Entity]: " when it does
not name it), its top terms as the titles write them, and the lead's extractive summary; every
text computation memoized by the texts it reads.
"""

from __future__ import annotations

import functools
import re
import struct
from collections import Counter
from collections.abc import Iterable, Sequence

import xxhash

from newsflow.core.memo import BoundedMemo
from newsflow.digest.entries import DigestEntry, unzip_body
from newsflow.digest.topics import Cluster
from newsflow.text.entities import capitalized_phrases, is_title_case, with_of_phrase
from newsflow.text.sentences import split_sentences
from newsflow.text.titles import short_headline
from newsflow.text.tokenize import _analyze_word, words

# --------------------------------------------------------------------------------------
# Entities, labels, summaries
# --------------------------------------------------------------------------------------


def body_of_key(key: str | bytes) -> str:
    """The body text behind a memo key's body: a text, or an entry's compressed words
    (:attr:`~newsflow.digest.entries.DigestEntry.body_z`: memo keys hold them compressed, so a
    hit costs no decompression)."""
    return key if isinstance(key, str) else unzip_body(key)


def _entities_of(rec: DigestEntry) -> dict[str, int]:
    """Entity phrases of one article -> weight (2 when in the title, 1 when only in the first
    80 body words). A headline's sentence-initial word counts when the body also capitalizes
    it mid-sentence ("Apple unveils ..." + "... Apple said")."""
    return dict(_entities_keyed(rec.title or "", rec.body_z))


@functools.lru_cache(maxsize=1 << 15)
def _entities_keyed(title: str, body: str | bytes) -> tuple[tuple[str, int], ...]:
    """:func:`_entities_of` by (title, the body of a memo key (:func:`body_of_key`)): a hit costs no decompression."""
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


def cluster_entity(members: Sequence[DigestEntry]) -> str | None:
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


def title_entities(r: DigestEntry) -> dict[str, str]:
    """lowercase -> surface of the named entities of one article's title (see
    :func:`title_entity`)."""
    return dict(_title_entities(r.title or "", r.body_z))


@functools.lru_cache(maxsize=1 << 15)
def _title_entities(title: str, body: str | bytes) -> tuple[tuple[str, str], ...]:
    """:func:`title_entities` by (title, the body of a memo key (:func:`body_of_key`)), memoized: every window showing
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


def title_entity(members: Sequence[DigestEntry]) -> str | None:
    """The story's most frequent named entity found in its *titles* (the "[Entity]" of a label):
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
    lead = (members[0].title or "").lower() if members else ""

    def pos(k: str) -> int:  # the headline's subject comes first: "Ukraine ... in Geneva"
        i = lead.find(k)
        return i if i >= 0 else len(lead) + 1

    for k, n in sorted(c.items(), key=lambda kv: (-kv[1], pos(kv[0]), -len(kv[0].split()), kv[0])):
        if n >= need:  # as the titles write it, with an "of <Name>" they add ("Isle of Wight")
            return with_of_phrase(sorted(case[k].items(), key=lambda kv: (-kv[1], kv[0]))[0][0],
                                [r.title or "" for r in members])
    return None


_WORD_CASED = re.compile(r"[^\W_]+", re.UNICODE)
def extractive_summary(
    title: str,
    body: str | bytes,
    key_stems: Sequence[str] = (),
    words_range: tuple[int, int] = (50, 75),
    max_sentences: int = 12,
) -> str:
    """50-75 words (by default) taken from the lead article's own sentences: the first
    sentences, plus the ones that best cover the topic's key terms, in their original order;
    cut (with "…") at the maximum. Falls back to the title when there is no body."""
    lo, hi = words_range
    sents, stem_sets, fallback = _summary_sentences(title, body, max_sentences)
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


@functools.lru_cache(maxsize=1 << 15)
def _title_words(title: str) -> tuple[tuple[int, str, int, str], ...]:
    """(position, stem, stem hash, surface word) of each analysable word of a title, in order
    (memoized: a title is read again by every window and label it is in)."""
    out = []
    for pos, w in enumerate(_WORD_CASED.findall(title)):
        a = _analyze_word(w.lower())
        if a is not None:
            out.append((pos, a[0], a[1], w))
    return tuple(out)


@functools.lru_cache(maxsize=1 << 12)
def _text_stems(title: str, body: str | bytes, body_words: int = 100) -> dict[int, str]:
    """stem hash -> stem of the words of a title and the first ``body_words`` words of its
    body (``body``: :func:`newsflow.digest.labels.body_key`). Memoized per article; callers
    must not modify the returned dict."""
    text = title + " " + " ".join(body_of_key(body).split()[:body_words])
    out: dict[int, str] = {}
    for w in _WORD_CASED.findall(text):
        a = _analyze_word(w.lower())
        if a is not None:
            out[a[1]] = a[0]
    return out


def _surface(forms: Counter[str]) -> str:
    """The most frequent lower-cased word of a stem, shown in its most frequent spelling
    ("iPhone")."""
    low: Counter[str] = Counter()
    for w, n in forms.items():
        low[w.lower()] += n
    word = sorted(low.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
    best = sorted(
        ((w, n) for w, n in forms.items() if w.lower() == word),
        key=lambda kv: (-kv[1], kv[0].istitle(), kv[0]),
    )
    return best[0][0]


#: labels by the texts they read (:class:`~newsflow.core.memo.BoundedMemo`). Digest windows
#: overlap (rolling, morning, midday, evening, weekly): the same story, with the same lead and
#: members, is labelled again in every window that shows it. A label depends only on the texts of the
#: articles it reads and a few small arguments, so it is computed once per distinct input, keyed
#: by a 128-bit xxh3 digest of those texts (never ``hash()``).
_LABELS = BoundedMemo(1 << 14)


_U32 = struct.Struct("<I")


def clear_memos() -> None:
    """Empty the text memos (labels, title words, stem maps, entities, summary sentences):
    for cold-cache measurements and tests; outputs never depend on them."""
    _LABELS.data.clear()
    for f in (_title_words, _text_stems, _entities_keyed, _title_entities,
              _summary_sentences, _entities_text, _spaced_words):
        f.cache_clear()


def _texts_key(members: Iterable[DigestEntry]) -> bytes:
    """128-bit digest of what text computations read of the entries: title and compressed
    body words, length-prefixed."""
    h = xxhash.xxh3_128()
    for r in members:
        t = (r.title or "").encode("utf-8", "surrogatepass")
        body = b"z" + r.body_z
        h.update(_U32.pack(len(t)))
        h.update(t)
        h.update(_U32.pack(len(body)))
        h.update(body)
    return h.digest()


def topic_label(c: Cluster, sel: Sequence[DigestEntry]) -> tuple[str, str | None, list[str]]:
    if c.label is None:
        key = (_texts_key([sel[i] for i in c.ranked[:20]]), tuple(c.term_hashes),
               sel[c.lead].title or "")
        label, ent, terms = _LABELS.get(key, lambda: _frozen_label(c, sel))
        c.label = (label, ent, list(terms))
    return c.label


def _frozen_label(c: Cluster, sel: Sequence[DigestEntry]) -> tuple[str, str | None, tuple[str, ...]]:
    label, ent, terms = _make_label(c, sel)
    return label, ent, tuple(terms)


def key_stems(c: Cluster, sel: Sequence[DigestEntry]) -> list[str]:
    """The topic's top stems (for the summary), from the titles and bodies of its lead and the
    members closest to the centroid."""
    members = c.ranked[:20]
    maps: list[dict[int, str]] = []  # read as far as needed (most stems are the lead's)
    out: list[str] = []
    for h in c.term_hashes:
        k = 0
        while k < len(members):
            if k == len(maps):
                r = sel[members[k]]
                maps.append(_text_stems(r.title or "", r.body_z))
            st = maps[k].get(h)
            if st is not None:  # a hash is the hash of one stem
                out.append(st)
                break
            k += 1
        if len(out) == 5:
            break
    return out


def _make_label(c: Cluster, sel: Sequence[DigestEntry]) -> tuple[str, str | None, list[str]]:
    """The topic's label, "[Entity]: headline": the entity is the story's most frequent
    named entity in its titles; the label's words are the lead's headline, shortened (first
    clause, or 14 words and "…"), after "[Entity]: " when the headline does not name the
    entity. The item's ``terms`` are the topic's top TF-IDF terms that its titles use, as the
    words a reader saw (not stems), in headline order. (Top terms strung together read as word
    salad: "meat mental Hotline"; a headline never does.)"""
    # the lead and the members closest to the centroid speak for the topic
    members = [sel[i] for i in c.ranked[:20]]
    t_stem_of: dict[int, str] = {}
    t_forms: dict[str, list[str]] = {}  # (counted only for the few stems picked)
    t_first: dict[str, tuple[int, int]] = {}
    for m, r in enumerate(members):
        for pos, st, h, w in _title_words(r.title or ""):
            t_stem_of[h] = st
            forms = t_forms.get(st)
            if forms is None:
                t_forms[st] = [w]
                t_first[st] = (m, pos)
            else:
                forms.append(w)
    ent = title_entity(members)
    # names are entities, not terms: no word of any title entity is a term
    names = " ".join(e for r in members for e in title_entities(r).values())
    ent_stems = {a[0] for w in words(f"{ent or ''} {names}") if (a := _analyze_word(w)) is not None}
    picked: list[str] = []
    for h in c.term_hashes:
        hit = t_stem_of.get(h)
        if hit is None or hit in ent_stems or hit.isdigit() or hit in picked:
            continue
        picked.append(hit)
        if len(picked) == 3:
            break
    picked.sort(key=lambda st: t_first[st])
    terms = [_surface(Counter(t_forms[st])) for st in picked]
    # the words a reader reads best are a headline's: the lead's, shortened, after the entity
    # when it does not name it ("White House: US looks at winding down virus task force")
    title = sel[c.lead].title or ""
    head = short_headline(title, max_words=14)
    if ent and head and f" {' '.join(words(ent))} " not in f" {' '.join(words(title))} ":
        label = f"{ent}: {head}"
    else:
        label = head or ent or "Untitled"
    return label, ent, terms
