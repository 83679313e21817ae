"""Named entities without a model download: one capitalized-phrase extractor for dedup Layer 5
and the digest's topic labels.

000 Step 3 Layer 5 / 001 "Layer 5: Entity & Fact Overlap": "Extract named entities (people,
organizations, locations) from both articles; IF entity overlap >= 80% AND publication dates
within 24 hours THEN classify as 'same event, different coverage'". 000 Step 5 / 001: a topic's
label is "[Named Entity]: [top terms]".

:func:`capitalized_phrases` keeps runs of capitalized words (original case) minus stop and
generic words; a lone capitalized word at the start of a sentence is undecidable and skipped.
Layer 5 compares the lower-cased single-word keys (:func:`entity_keys`). Its quality on real
headlines is measured in ``bench/README-stories.md`` (Layer 5 precision/recall).
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

    toks = _CAP_TOKEN.findall(text)
    for i, tok in enumerate(toks):
        if tok in '.!?:;|—–-"“”()[]':
            close()
            initial = tok in ".!?:;|"
            continue
        if tok == ",":
            close()
            continue
        if not tok[0].isupper():  # most words: no name (the general case below, taken short)
            if run:
                close()
            initial = False
            if tok[-1] in ".!?" and not _INITIALS.fullmatch(tok):
                initial = True
            continue
        w = (_POSSESSIVE.sub("", tok) if tok[-1] == "s" else tok).strip(".-'’")
        low = w.lower()
        nxt = toks[i + 1] if i + 1 < len(toks) else ""
        if (
            w
            and w[0].isupper()
            and (len(w) > 1)
            and (
                (low not in STOP_WORDS and low not in _GENERIC_CAPS)
                # "New York", "New Zealand": a place name, not the generic "new"
                or (low == "new" and nxt[:1].isupper() and nxt.lower() not in _GENERIC_CAPS)
            )
        ):
            if not run:
                run_initial = initial
            run.append(w)
        else:
            close()
        initial = False
        if tok[-1] in ".!?" and not _INITIALS.fullmatch(tok):
            # "... data. Aftershocks of ..." -- the period came attached to the word
            close()
            initial = True
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
