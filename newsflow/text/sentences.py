"""Sentence splitting shared by dedup Layer 4 (the first 3 non-trivial sentences,
docs/rules.md#layer-4-body-fingerprints) and the digest's extractive summaries.

Boundaries come from ``sentencex`` (Wikimedia's rule-based segmenter, Rust): it knows
abbreviations and initials, so "the U.S. Supreme Court", "Robert F. Kennedy Jr.", "Feb. 28" and
"(Image credit: Godofredo A. Vásquez/AP)" stay whole. A regex on ". Capital" cut each of
those, and a digest showed "The U.S." as a story's summary.
"""

from __future__ import annotations

import re

import sentencex

__all__ = ["sentence_words", "split_sentences"]

#: what may open a sentence before its first letter or digit
_OPENERS = "\"“‘'(["


def _starts_sentence(s: str) -> bool:
    """A segment opens a sentence when its first letter or digit (after opening quotes or
    brackets) is a capital or a digit; "Why? the analyst asked." is one sentence."""
    c = s.lstrip(_OPENERS)[:1]
    return not c.isalpha() or c.isupper()  # "", a digit or a symbol ("➡", "—") opens one too


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text``, whitespace collapsed; a segment that starts in lower case
    continues the sentence before it, and so does one that follows the one before without a
    space (``sentencex`` cuts "two ex-U.S. soldiers" after "ex-U.").

    >>> split_sentences("Stocks fell.  Oil rose 2%! Why? the analyst asked. 3 banks agree.")
    ['Stocks fell.', 'Oil rose 2%!', 'Why? the analyst asked.', '3 banks agree.']
    >>> split_sentences("Tariffs after the U.S. Supreme Court ruled on Feb. 28. Robert F. Kennedy Jr. spoke.")
    ['Tariffs after the U.S. Supreme Court ruled on Feb. 28.', 'Robert F. Kennedy Jr. spoke.']
    """
    flat = " ".join(text.split())
    out: list[str] = []
    glued = False  # the segment before ended without a space: no boundary ("ex-U." | "S. troops")
    for seg in sentencex.segment("en", flat):
        s = seg.strip()
        if not s:
            glued = False
            continue
        if out and glued:
            out[-1] += s
        elif out and not _starts_sentence(s):
            out[-1] = f"{out[-1]} {s}"
        else:
            out.append(s)
        glued = not seg[-1].isspace()
    return out


_NONWORD = re.compile(r"[^\w]+", re.UNICODE)


def sentence_words(sentence: str) -> list[str]:
    """A sentence's words as sentences are compared: lower-case, punctuation dropped.

    >>> sentence_words("Subscribe NOW: it's free!")
    ['subscribe', 'now', 'it', 's', 'free']
    """
    return _NONWORD.sub(" ", sentence.lower()).split()
