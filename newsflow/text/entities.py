"""Named entities without a model download: one capitalized-phrase extractor for dedup Layer 5
and the digest's topic labels.

000 Step 3 Layer 5 / 001 "Layer 5: Entity & Fact Overlap": "Extract named entities (people,
organizations, locations) from both articles; IF entity overlap >= 80% AND publication dates
within 24 hours THEN classify as 'same event, different coverage'". 000 Step 5 / 001: a topic's
label is "[Named Entity]: [top terms]".

:func:`capitalized_phrases` keeps runs of capitalized words (original case) minus stop and
generic words; a lone capitalized word at the start of a sentence is undecidable and skipped.
Layer 5 compares the lower-cased single-word keys (:func:`entity_keys`). Its link precision on
real headlines is measured by ``bench/eval_stories.py`` (per layer).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from newsflow.text.tokenize import STOP_WORDS

__all__ = [
    "capitalized_phrases",
    "entity_keys",
    "entity_overlap",
    "extract_entities",
    "is_title_case",
    "with_of_phrase",
]

#: capitalized words that are no names (headline tags, weekdays, months, titles, pronouns)
_GENERIC_TEXT = (
    "breaking update updated exclusive watch video live report reports analysis opinion "
    "review photos photo pictures new news today monday tuesday wednesday thursday friday "
    "saturday sunday january february march april may june july august september october "
    "november december jan feb mar apr jun jul aug sep sept oct nov dec "
    "mr mrs ms dr it this that these those here there what why how when "
    "where who first last"
)
_GENERIC_CAPS = frozenset(_GENERIC_TEXT.split())
_CAP_TOKEN = re.compile(r"[^\W\d_][\w&'’.-]*|\d[\w.,]*|[.!?:;,\"“”()\[\]|—–-]")
#: the tokens of :data:`_CAP_TOKEN` with each run of tokens that start in lower case or a digit
#: (and the commas between them) as one match: what :func:`capitalized_phrases` reads of such a
#: run is that it ends any name and whether its last token ends a sentence. Exact for texts whose
#: only capital letters are A-Z (:data:`_NON_ASCII` checks); the others take :data:`_CAP_TOKEN`.
_LOWER_RUN_TOKEN = r"(?:[^\W\dA-Z_][\w&'’.-]*+|\d[\w.,]*+)"
_CAP_EVENTS = (
    r"[A-Z][\w&'’.-]*+"
    rf"|{_LOWER_RUN_TOKEN}(?:[^\w.!?:;\"“”()\[\]|—–-]*+{_LOWER_RUN_TOKEN})*+"
    r"|[.!?:;,\"“”()\[\]|—–-]"
)
_CAP_EVENT = re.compile(_CAP_EVENTS)
_CAP_EVENT_ASCII = re.compile(_CAP_EVENTS, re.ASCII)  # the same on ASCII text, and faster
_NON_ASCII = re.compile(r"[^\x00-\x7f]")
_POSSESSIVE = re.compile(r"['’]s$")
_INITIALS = re.compile(r"(?:[A-Za-z]\.)+")


def is_title_case(words: Sequence[str]) -> bool:
    """Headline Title Case ("Pizza Chain Sbarro Files For Bankruptcy"): at least 3/4 of the
    2+ words longer than 3 letters start with a capital, so case says little about names.

    >>> is_title_case("Pizza Chain Sbarro Files For Bankruptcy".split())
    True
    >>> is_title_case("Apple unveils iPhone as Samsung sales slow".split())
    False
    """
    long = [w for w in words if len(w) > 3 and w[0].isalpha()]
    return len(long) >= 2 and sum(w[0].isupper() for w in long) >= 0.75 * len(long)


def _cap_tokens(text: str) -> list[str]:
    """The tokens :func:`capitalized_phrases` steps through: :data:`_CAP_TOKEN`'s, with each run
    of lower-case and digit tokens as one (:data:`_CAP_EVENT`) when that is exact."""
    if text.isascii():
        return _CAP_EVENT_ASCII.findall(text)
    if not any(c.isupper() for c in _NON_ASCII.findall(text)):
        return _CAP_EVENT.findall(text)
    return _CAP_TOKEN.findall(text)


def _cap_word(tok: str) -> tuple[str, bool, bool, bool, bool]:
    """What :func:`capitalized_phrases` reads of one capitalized token: ``(word, possessive,
    a name word, the word "new", ends a sentence)``."""
    poss = tok[-1] == "s" and _POSSESSIVE.search(tok) is not None
    w = (_POSSESSIVE.sub("", tok) if poss else tok).strip(".-'’")
    low = w.lower()
    cap = bool(w) and w[0].isupper() and len(w) > 1
    name = cap and low not in STOP_WORDS and low not in _GENERIC_CAPS
    ends = tok[-1] in ".!?" and not _INITIALS.fullmatch(tok)
    return w, poss, name, cap and low == "new", ends


#: :func:`_cap_word` of the capitalized tokens seen (names and headline words recur); bounded
_CAP_WORDS: dict[str, tuple[str, bool, bool, bool, bool]] = {}
_CAP_WORDS_MAX = 1 << 17


def capitalized_phrases(text: str, *, skip_initial: bool = True,
                        skipped: list[str] | None = None) -> list[str]:
    """Runs of capitalized words ("Barack Obama", "European Central Bank"), original case,
    minus stop/generic words; sentence-initial single words are skipped (undecidable), or
    collected in ``skipped`` when given (both kinds from one pass).

    >>> lone: list[str] = []
    >>> capitalized_phrases("Disney shuts parks. Walt Disney World closes", skipped=lone), lone
    (['Walt Disney World'], ['Disney'])
    """
    out: list[str] = []
    run: list[str] = []
    initial = True
    run_initial = False

    def close() -> None:
        if run:
            # long runs are Title Case headline fragments, not names
            lone_initial = skip_initial and run_initial and len(run) == 1 and not run[0].isupper()
            if len(run) <= 4:
                if not lone_initial:
                    out.append(" ".join(run))
                elif skipped is not None:
                    skipped.append(run[0])
            run.clear()

    toks = _cap_tokens(text)
    memo = _CAP_WORDS
    for i, tok in enumerate(toks):
        if tok in '.!?:;|—–-"“”()[]':
            if run:
                close()
            initial = tok in ".!?:;|"
            continue
        if tok == ",":
            if run:
                close()
            continue
        if not tok[0].isupper():  # most words: no name (the general case below, taken short)
            if run:
                close()
            # a run of such tokens: its last one says whether a sentence ends
            initial = tok[-1] in ".!?" and not _INITIALS.fullmatch(_CAP_TOKEN.findall(tok)[-1])
            continue
        info = memo.get(tok)
        if info is None:
            if len(memo) >= _CAP_WORDS_MAX:
                memo.clear()
            info = memo[tok] = _cap_word(tok)
        w, poss, name, new, ends = info
        if name or (new and i + 1 < len(toks) and toks[i + 1][:1].isupper()
                    # "New York", "New Zealand": a place name, not the generic "new"
                    and toks[i + 1].lower() not in _GENERIC_CAPS):
            if not run:
                run_initial = initial
            run.append(w)
            if poss:  # a possessive ends a name: "New Zealand's Covid-19 cases" names two things
                close()
        elif run:
            close()
        initial = False
        if ends:
            # "... data. Aftershocks of ..." -- the period came attached to the word
            if run:
                close()
            initial = True
    if run:
        close()
    return out


def extract_entities(text: str, max_entities: int = 12) -> list[str]:
    """Layer 5 entities: :func:`capitalized_phrases` lower-cased, deduplicated, in order.

    >>> extract_entities("Barack Obama meets Angela Merkel in Berlin")
    ['barack obama', 'angela merkel', 'berlin']
    >>> extract_entities("stocks fall as oil rises")
    []
    """
    return list(dict.fromkeys(p.lower() for p in capitalized_phrases(text)))[:max_entities]


def entity_keys(entities: Iterable[str]) -> frozenset[str]:
    """Single-word keys of entity phrases ("barack obama" -> {"barack", "obama"}), so that a
    later headline saying just "Obama" still overlaps."""
    return frozenset(part for e in entities for part in e.split())


def entity_overlap(a: Iterable[str], b: Iterable[str]) -> float:
    """001 Layer 5 "entity overlap": |A ∩ B| / min(|A|, |B|) over entity keys (0 when either
    side has none). "Same event" when >= 0.8 (seed) and the dates are within 24 h."""
    sa, sb = frozenset(a), frozenset(b)
    if not sa or not sb:
        return 0.0
    return len(sa & sb) / min(len(sa), len(sb))


#: " of " and a capitalized name after an entity ("Isle" -> "Isle of Wight", "Bank of England"),
#: or a capitalized word and " of " before it ("Wight" -> "Isle of Wight")
_OF_TAIL = re.compile(r"\s+of\s+((?:the\s+)?[A-Z][\w'’.-]*(?:\s+[A-Z][\w'’.-]*){0,2})")
_OF_HEAD = re.compile(r"([A-Z][\w'’.-]*)\s+of\s+(?:the\s+)?$")


#: abbreviations inside names ("Society of St. Pius X", "Church of St. Mary")
_TITLE_ABBREVIATIONS = frozenset(("st", "mt", "ft", "dr", "jr", "sr", "gen", "gov", "sen", "rep", "rev"))


def _name_words(tail: str) -> str:
    """The words of an "of" tail up to a sentence's end ("Union. What" -> "Union"; initials
    such as "N.C." are kept), without a possessive."""
    out: list[str] = []
    for w in tail.split():
        if w.endswith(".") and not _INITIALS.fullmatch(w) and w[:-1].lower() not in _TITLE_ABBREVIATIONS:
            out.append(w.rstrip("."))
            break
        out.append(w)
    return _POSSESSIVE.sub("", " ".join(out)).rstrip("-’'")


def with_of_phrase(entity: str, texts: Sequence[str]) -> str:
    """A one-word label entity with the "X of Y" name its texts write it in: the capitalized-phrase
    scanner stops at "of", so "Isle of Wight" gives "Isle" and "Wight". The longer name must be
    in two of the texts (a lone text: only a name after the entity, "Bank" -> "Bank of
    England"; a word before it may start a sentence: "Scores of Middle East countries"). For
    labels only: matching keeps the scanner's phrases.

    >>> with_of_phrase("Isle", ["Isle of Wight tests contact-tracing app", "U.K. tests app"])
    'Isle'
    >>> with_of_phrase("Wight", ["Isle of Wight tests app", "Residents of the Isle of Wight asked to test it"])
    'Isle of Wight'
    >>> with_of_phrase("Bank", ["Bank of England's rate call."]), with_of_phrase("Middle East", ["Scores of Middle East flights"])
    ('Bank of England', 'Middle East')
    >>> with_of_phrase("State", ["Forget the State of the Union. What's your score?"])
    'State of the Union'
    >>> with_of_phrase("Tribe", ["The Lumbee Tribe of N.C. wants better healthcare"])
    'Tribe of N.C.'
    >>> with_of_phrase("Society", ["What to know about the Society of St. Pius X"])
    'Society of St. Pius X'

    """
    if len(entity.split()) > 1:  # a name of its own ("Josh Kerr" of Britain)
        return entity
    lone = len(texts) == 1
    counts: dict[str, int] = {}
    for t in texts:
        found: set[str] = set()
        i = t.find(entity)
        while i >= 0:
            end = i + len(entity)
            if (i == 0 or not t[i - 1].isalnum()) and (end == len(t) or not t[end].isalnum()):
                m = _OF_TAIL.match(t, end)
                if m:
                    found.add(f"{t[i:end]} of {_name_words(m.group(1))}")
                h = None if lone else _OF_HEAD.search(t, 0, i)
                if h and h.group(1).lower() not in STOP_WORDS:
                    found.add(t[h.start():end])
            i = t.find(entity, i + 1)
        for f in found:
            counts[f] = counts.get(f, 0) + 1
    best = sorted(counts.items(), key=lambda kv: (-kv[1], -len(kv[0]), kv[0]))
    return best[0][0] if best and best[0][1] >= (1 if lone else 2) else entity
