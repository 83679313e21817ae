"""Similarity measures of the dedup layers 3-4 (docs/rules.md#deduplication).

- Layer 3, title similarity: :func:`title_jaccard` (seed: word-set Jaccard >= 0.85, >= 0.95 for
  titles under 5 words).
- Layer 4, content fingerprints: MinHash with 128 permutations (:func:`minhash_signature`, same values as datasketch 1.x
  ``MinHash(num_perm=128, seed=1)``), LSH band keys b=16 x r=8 (:func:`lsh_band_keys`), the
  b-bit compressed signature kept in state (:func:`compress_signature`,
  :func:`signature_jaccard`), and the first-3-sentences overlap of docs/rules.md#layer-4-body-fingerprints
  (:func:`first_sentences`, :func:`first_sentences_overlap`).

All hashes are stable across processes and runs (sha1 / xxh3, never Python's ``hash()``).
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable, Sequence
from functools import lru_cache

import numpy as np
import xxhash

from newsflow.text.sentences import sentence_words, split_sentences

__all__ = [
    "MAX_HASH",
    "MERSENNE_PRIME",
    "compress_signature",
    "first_sentences",
    "first_sentences_overlap",
    "lsh_band_keys",
    "lsh_band_keys_bulk",
    "minhash_jaccard",
    "minhash_permutations",
    "minhash_signature",
    "minhash_signatures",
    "sentence_key",
    "signature_jaccard",
    "title_jaccard",
]

MERSENNE_PRIME = np.uint64((1 << 61) - 1)  # datasketch._mersenne_prime
MAX_HASH = np.uint64((1 << 32) - 1)  # datasketch._max_hash


# --- Layer 3: titles ---------------------------------------------------------------------


def title_jaccard(a: Iterable[str], b: Iterable[str]) -> float:
    """Jaccard similarity of two word sets (docs/rules.md#layer-3-title-similarity). Empty vs empty is 0."""
    sa, sb = set(a), set(b)
    if not sa or not sb:
        return 0.0
    inter = len(sa & sb)
    return inter / (len(sa) + len(sb) - inter)


# --- Layer 4: MinHash + LSH ---------------------------------------------------------------


@lru_cache(maxsize=8)
def minhash_permutations(num_perm: int = 128, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """The (a, b) permutation parameters of datasketch 1.x ``MinHash(num_perm, seed)``."""
    gen = np.random.RandomState(seed)
    ab = np.array(
        [
            (
                gen.randint(1, int(MERSENNE_PRIME), dtype=np.uint64),
                gen.randint(0, int(MERSENNE_PRIME), dtype=np.uint64),
            )
            for _ in range(num_perm)
        ],
        dtype=np.uint64,
    ).T
    a, b = ab[0].copy(), ab[1].copy()
    a.setflags(write=False)
    b.setflags(write=False)
    return a, b


_FIRST_U32 = struct.Struct("<I").unpack_from
_SHA1 = hashlib.sha1


def _shingle_hash_uncached(shingle: str) -> int:
    """datasketch.hashfunc.sha1_hash32 of a shingle's UTF-8 bytes: the first 4 bytes of its
    SHA-1, little endian."""
    value: int = _FIRST_U32(_SHA1(shingle.encode("utf-8", "surrogatepass")).digest())[0]
    return value


#: :func:`_shingle_hash_uncached`, cached: title words recur (headline vocabularies are
#: Zipfian), body shingles of several words mostly do not (on a real archive, 406k of 586k body
#: and title shingles missed the cache, and a miss costs the cache's upkeep on top of the hash)
_shingle_hash = lru_cache(maxsize=1 << 18)(_shingle_hash_uncached)


def minhash_signature(shingles: Iterable[str], num_perm: int = 128, seed: int = 1) -> np.ndarray:
    """MinHash signature (uint64[num_perm]) of a shingle set, docs/rules.md#layer-4-body-fingerprints.

    Numpy-vectorized, identical values to datasketch 1.x ``MinHash(num_perm, seed)`` updated
    with the UTF-8 bytes of each shingle (same sha1_hash32, same permutations, same uint64
    overflow). An empty set gives the all-``MAX_HASH`` signature, like an empty MinHash.
    """
    signature: np.ndarray = minhash_signatures([list(shingles)], num_perm, seed)[0]
    return signature


def minhash_signatures(
    shingle_sets: Sequence[Sequence[str]], num_perm: int = 128, seed: int = 1, *, cached: bool = True,
) -> np.ndarray:
    """Signatures of many shingle sets at once (like ``datasketch.MinHash.bulk``): one numpy
    pass over all shingles, ``np.minimum.reduceat`` per set. Returns uint64[n, num_perm]; row i
    equals :func:`minhash_signature` of set i (empty sets give all ``MAX_HASH``). ``cached``:
    the shingles' hashes go through a memo (for words that recur, such as title words; pass
    False for shingles that mostly do not, such as a body's word runs: the same values)."""
    a, b = minhash_permutations(num_perm, seed)
    n = len(shingle_sets)
    out = np.full((n, num_perm), MAX_HASH, dtype=np.uint64)
    h = _shingle_hash if cached else _shingle_hash_uncached
    # blocks of ~256 shingles keep the (shingles x num_perm) temporaries in cache: ~4x faster
    # than one pass over thousands of shingles
    start = 0
    while start < n:
        rows: list[int] = []
        lens: list[int] = []
        hashes: list[int] = []
        i = start
        while i < n and (not hashes or len(hashes) < _BLOCK):
            sh = shingle_sets[i]
            if sh:
                rows.append(i)
                lens.append(len(sh))
                hashes.extend(map(h, sh))
            i += 1
        start = i
        if not hashes:
            continue
        hv = np.array(hashes, dtype=np.uint64)
        phv = hv[:, None] * a  # (wraps at 2**64, as datasketch's uint64 arithmetic does)
        phv += b
        _mod_mersenne(phv)
        phv &= MAX_HASH
        offsets = np.zeros(len(lens), dtype=np.int64)
        np.cumsum(lens[:-1], out=offsets[1:])
        out[rows] = np.minimum.reduceat(phv, offsets, axis=0)
    return out


_BLOCK = 256
_SHIFT = np.uint64(61)


def _mod_mersenne(x: np.ndarray) -> None:
    """``x %= 2**61 - 1`` in place, without a division: for the Mersenne prime p = 2**61 - 1,
    x = hi * 2**61 + lo is congruent to lo + hi, which is below 2 p (one subtraction left).
    ~2x faster than numpy's uint64 ``%``, same values (tested against datasketch).

    >>> v = np.array([2**64 - 1, 2**61 - 1, 2**61, 0], dtype=np.uint64)
    >>> _mod_mersenne(v); v.tolist()
    [7, 0, 1, 0]
    """
    hi = x >> _SHIFT
    x &= MERSENNE_PRIME
    x += hi
    np.subtract(x, MERSENNE_PRIME, out=x, where=x >= MERSENNE_PRIME)


def minhash_jaccard(sig_a: np.ndarray, sig_b: np.ndarray) -> float:
    """Estimated Jaccard similarity: share of equal signature positions (datasketch.jaccard)."""
    return float(np.count_nonzero(sig_a == sig_b)) / float(len(sig_a))


@lru_cache(maxsize=16)
def _band_multipliers(bands: int, rows: int, salt: str) -> np.ndarray:
    """Odd 64-bit multipliers per (band, row), derived from xxh3 of (salt, band, row): stable."""
    m = np.array(
        [[xxhash.xxh3_64_intdigest(f"{salt}|{i}|{j}".encode()) | 1 for j in range(rows)]
         for i in range(bands)],
        dtype=np.uint64,
    )
    m.setflags(write=False)
    return m


def _mix64(h: np.ndarray) -> np.ndarray:
    """splitmix64 finalizer (vectorized): spreads the keys evenly over shards."""
    h = h ^ (h >> np.uint64(30))
    h = h * np.uint64(0xBF58476D1CE4E5B9)
    h = h ^ (h >> np.uint64(27))
    h = h * np.uint64(0x94D049BB133111EB)
    mixed: np.ndarray = h ^ (h >> np.uint64(31))
    return mixed


def lsh_band_keys_bulk(signatures: np.ndarray, bands: int = 16, rows: int = 8,
                       salt: str = "") -> np.ndarray:
    """Band keys of many signatures (uint64[n, num_perm] -> uint64[n, bands])."""
    if bands * rows > signatures.shape[1]:
        msg = f"bands*rows={bands * rows} exceeds signature length {signatures.shape[1]}"
        raise ValueError(msg)
    with np.errstate(over="ignore"):
        sig = signatures[:, : bands * rows].reshape(len(signatures), bands, rows)
        h = (sig * _band_multipliers(bands, rows, salt)).sum(axis=2, dtype=np.uint64)
        return _mix64(h)


def lsh_band_keys(signature: np.ndarray, bands: int = 16, rows: int = 8, salt: str = "") -> list[int]:
    """LSH band keys (b=16, r=8: docs/rules.md#layer-4-body-fingerprints): one stable 64-bit key per band.

    key_i = splitmix64(sum_r m[i, r] * v[i*rows + r] mod 2^64) with fixed odd multipliers m
    derived from xxh3(salt, i, r): two signatures share band i's key when they agree on all
    ``rows`` values of band i; distinct bands collide with probability ~2^-32 or less (and
    every candidate is confirmed by the exact measure anyway). ``salt`` separates key spaces
    ("t" title, "b" body).
    """
    keys: list[int] = lsh_band_keys_bulk(signature[None, :], bands, rows, salt)[0].tolist()
    return keys


def compress_signature(signature: np.ndarray, bits: int = 16) -> bytes:
    """b-bit MinHash (Li & König 2010): keep the low ``bits`` (8 or 16) of each value.

    128 x 16 bits = 256 bytes per article instead of 1 KB; :func:`signature_jaccard` corrects
    for the 2^-bits chance that two different values agree on their low bits.
    """
    if bits == 16:
        return (signature & np.uint64(0xFFFF)).astype("<u2").tobytes()
    if bits == 8:
        return (signature & np.uint64(0xFF)).astype("u1").tobytes()
    msg = "bits must be 8 or 16"
    raise ValueError(msg)


def signature_jaccard(a: bytes, b: bytes, bits: int = 16) -> float:
    """Jaccard estimate from two :func:`compress_signature` values (bias-corrected)."""
    dt = "<u2" if bits == 16 else "u1"
    va, vb = np.frombuffer(a, dtype=dt), np.frombuffer(b, dtype=dt)
    if len(va) != len(vb) or len(va) == 0:
        return 0.0
    e = float(np.count_nonzero(va == vb)) / len(va)
    c = 1.0 / (1 << bits)
    return max(0.0, (e - c) / (1.0 - c))


# --- Layer 4: sentence-level overlap -----------------------------------------------

def first_sentences(text: str, n: int = 3, min_words: int = 11) -> list[str]:
    """The first ``n`` non-trivial sentences (more than 10 words each), normalized
    (lowercase, punctuation dropped)."""
    out: list[str] = []
    if not text:
        return out
    for sent in split_sentences(text):
        norm = sentence_words(sent)
        if len(norm) >= min_words:
            out.append(" ".join(norm))
            if len(out) == n:
                break
    return out


def sentence_key(sentence: str) -> int:
    """Stable 64-bit key of a normalized sentence (kept in state instead of the text)."""
    return xxhash.xxh3_64_intdigest(sentence.encode("utf-8", "surrogatepass"))


def first_sentences_overlap(a: Iterable[int | str], b: Iterable[int | str]) -> int:
    """How many of the first sentences (texts or :func:`sentence_key` values) two articles
    share. A near-duplicate when >= 2 match (docs/rules.md#layer-4-body-fingerprints)."""
    return len(set(a) & set(b))
