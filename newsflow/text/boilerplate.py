"""Feed boilerplate: sentences that several items of one feed document share (pure).

Real feeds repeat template text in every item: a YouTube channel's description under each
video ("24 Oras is GMA Network's flagship newscast, anchored by … Subscribe to our channel …"),
a show's blurb, a standard disclaimer. Fingerprinted as content, that text made distinct videos
of one channel *near-duplicates* of each other (001 Layer 4: body MinHash ≥ 0.7): on the real
24-feed replay 127 of the 136 content near-duplicates were same-publisher items with different
titles (Fox News, GMA News, ABS-CBN News, Sydney Morning Herald, CNN, 1News), removed from the
digests as copies; the shared text also gave unrelated items common story terms and entities.

A sentence is boilerplate of a document when at least ``min_items`` of its items contain it
(compared lower-case, punctuation and spacing ignored). Stateless: one document at a time, so
the same payload always gives the same result.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from newsflow.text.sentences import split_sentences

__all__ = ["shared_sentences", "without_sentences"]

_NONWORD = re.compile(r"[\W_]+", re.UNICODE)


def _key(sentence: str) -> str:
    return " ".join(_NONWORD.sub(" ", sentence.lower()).split())


def shared_sentences(bodies: Sequence[str], min_items: int = 3) -> frozenset[str]:
    """Keys of the sentences found in at least ``min_items`` of ``bodies`` (each body counts a
    sentence once).

    >>> sorted(shared_sentences(["A storm hit. Subscribe now!", "Rates rose. Subscribe now.",
    ...                          "Subscribe now! Votes counted.", "Nothing shared here."]))
    ['subscribe now']
    """
    if min_items < 2 or len(bodies) < min_items:
        return frozenset()
    counts: dict[str, int] = {}
    for body in bodies:
        if not body:
            continue
        for k in {_key(s) for s in split_sentences(body)}:
            if k:
                counts[k] = counts.get(k, 0) + 1
    return frozenset(k for k, n in counts.items() if n >= min_items)


def without_sentences(body: str, shared: frozenset[str]) -> str:
    """``body`` without the sentences whose keys are in ``shared`` (whitespace collapsed;
    ``body`` itself, unchanged, when none is).

    >>> without_sentences("A storm hit the coast. Subscribe now!", frozenset({"subscribe now"}))
    'A storm hit the coast.'
    """
    if not shared or not body:
        return body
    sents = split_sentences(body)
    kept = [s for s in sents if _key(s) not in shared]
    return body if len(kept) == len(sents) else " ".join(kept)
