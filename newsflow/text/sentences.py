"""Sentence splitting shared by dedup Layer 4 (001: "the first 3 non-trivial sentences") and
the digest's extractive summaries.
"""

from __future__ import annotations

import re

__all__ = ["sentence_words", "split_sentences"]

#: a sentence ends at ``.``/``!``/``?`` (closing ``"”’)`` may follow) before whitespace and a
#: capital or digit (an opening ``"“‘(`` may come first). Splitting after a closing ASCII ``'``
#: too was measured to cut "ABC's 'This Week.' 'South ..." wrongly in a real digest.
_SENT_SPLIT = re.compile(r"(?<=[.!?])[\"”’)]*\s+(?=[\"“‘(]?[A-Z0-9])")


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text``, whitespace collapsed (closing quotes right after the final stop
    are dropped with the split).

    >>> split_sentences("Stocks fell.  Oil rose 2%! Why? the analyst asked. 3 banks agree.")
    ['Stocks fell.', 'Oil rose 2%!', 'Why? the analyst asked.', '3 banks agree.']
    """
    return [s.strip() for s in _SENT_SPLIT.split(" ".join(text.split())) if s.strip()]


_NONWORD = re.compile(r"[^\w]+", re.UNICODE)


def sentence_words(sentence: str) -> list[str]:
    """A sentence's words as sentences are compared: lower-case, punctuation dropped.

    >>> sentence_words("Subscribe NOW: it's free!")
    ['subscribe', 'now', 'it', 's', 'free']
    """
    return _NONWORD.sub(" ", sentence.lower()).split()
