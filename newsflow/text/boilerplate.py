"""Feed boilerplate: sentences that several items of one feed document share (pure).

Real feeds repeat template text in every item: a YouTube channel's description under each
video ("24 Oras is GMA Network's flagship newscast, anchored by … Subscribe to our channel …"),
a show's blurb, a standard disclaimer. Fingerprinted as content, that text made distinct videos
of one channel *near-duplicates* of each other (Layer 4: body MinHash ≥ 0.7,
docs/rules.md#layer-4-body-fingerprints): on the real 24-feed replay 127 of the 136 content
near-duplicates were same-publisher items with different titles (Fox News, GMA News, ABS-CBN
News, Sydney Morning Herald, CNN, 1News), removed from the digests as copies; the shared text
also gave unrelated items common story terms and entities.

A sentence is boilerplate of a document when at least ``min_items`` of its items contain it
(compared lower-case, punctuation and spacing ignored). Stateless: one document at a time, so
the same payload always gives the same result.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

from newsflow.text.sentences import sentence_words, split_sentences

__all__ = ["shared_sentences", "without_boilerplate", "without_sentences"]


def _key(sentence: str) -> str:
    return " ".join(sentence_words(sentence))


#: a link followed by more text: where a video description's flattened line ended
_URL_THEN_TEXT = re.compile(r"(?:https?://|www\.)\S+(?=\s+\S)")


def _at_links(sentence: str) -> list[str]:
    """A sentence cut after each link that more text follows. Channel descriptions are lines
    ("Subscribe to Fox News! https://bit.ly/… Watch more Fox News Video: http://…") that a
    feed flattens into one run without full stops: as one "sentence" glued to the item's own
    "Read more about … here: https://fxn.ws/…", the shared lines were never seen as shared.

    >>> _at_links("Read more here: https://x.co/1 Subscribe now! https://bit.ly/2 Our channel.")
    ['Read more here: https://x.co/1', 'Subscribe now! https://bit.ly/2', 'Our channel.']
    """
    out: list[str] = []
    start = 0
    for m in _URL_THEN_TEXT.finditer(sentence):
        out.append(sentence[start:m.end()].strip())
        start = m.end()
    if not out:
        return [sentence]
    out.append(sentence[start:].strip())
    return out


@functools.lru_cache(maxsize=2048)
def _split(body: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A body's sentences (cut after links too: :func:`_at_links`) and their keys. Memoized: a
    feed serves the same bodies poll after poll, and each poll's document is checked for
    boilerplate again."""
    sents = tuple(part for s in split_sentences(body) for part in _at_links(s)) if body else ()
    return sents, tuple(_key(x) for x in sents)


def _shared(split: Sequence[tuple[Sequence[str], Sequence[str]]], min_items: int) -> frozenset[str]:
    counts: dict[str, int] = {}
    for _, keys in split:
        for k in set(keys):
            if k:
                counts[k] = counts.get(k, 0) + 1
    return frozenset(k for k, n in counts.items() if n >= min_items)


#: a web address written out in the text
_LINK = re.compile(r"(?:https?://|www\.)\S")


def _without(body: str, split: tuple[Sequence[str], Sequence[str]], shared: frozenset[str],
             links: bool = False) -> str:
    sents, keys = split
    kept = [x for x, k in zip(sents, keys, strict=True)
            if k not in shared and not (links and _LINK.search(x))]
    return body if len(kept) == len(sents) else " ".join(kept)


def shared_sentences(bodies: Sequence[str], min_items: int = 3) -> frozenset[str]:
    """Keys of the sentences found in at least ``min_items`` of ``bodies`` (each body counts a
    sentence once).

    >>> sorted(shared_sentences(["A storm hit. Subscribe now!", "Rates rose. Subscribe now.",
    ...                          "Subscribe now! Votes counted.", "Nothing shared here."]))
    ['subscribe now']
    """
    if min_items < 2 or len(bodies) < min_items:
        return frozenset()
    return _shared([_split(b) for b in bodies], min_items)


def without_sentences(body: str, shared: frozenset[str]) -> str:
    """``body`` without the sentences whose keys are in ``shared`` (whitespace collapsed;
    ``body`` itself, unchanged, when none is).

    >>> without_sentences("A storm hit the coast. Subscribe now!", frozenset({"subscribe now"}))
    'A storm hit the coast.'
    """
    if not shared or not body:
        return body
    return _without(body, _split(body), shared)


def without_boilerplate(bodies: Sequence[str], min_items: int = 3) -> list[str]:
    """Each of one document's ``bodies`` without the document's boilerplate: its
    :func:`shared_sentences`, and the sentences that carry a written-out web address ("Get more
    at: https://…", "Read more about it here: https://fxn.ws/…": pointers, not the story's
    words; a template that only two items of a document share is caught this way too). Each
    body is split once; a body without any is returned as is.

    >>> without_boilerplate(["A storm hit. Subscribe now!", "Rates rose. Subscribe now.",
    ...                      "Subscribe now! Votes counted."])
    ['A storm hit.', 'Rates rose.', 'Votes counted.']
    >>> without_boilerplate(["Rates rose. More at: https://x.co/1", "Votes counted."])
    ['Rates rose.', 'Votes counted.']
    """
    shared = frozenset[str]()
    if min_items >= 2 and len(bodies) >= min_items:
        shared = _shared([_split(b) for b in bodies], min_items)
    return [_without(b, _split(b), shared, links=True) if b and (shared or _LINK.search(b)) else b
            for b in bodies]
