"""Similarity measures of dedup layers 3-4 (newsflow.similarity)."""

from __future__ import annotations

import numpy as np
import pytest
from datasketch import MinHash

from newsflow.dedup.similarity import (
    compress_signature,
    first_sentences,
    first_sentences_overlap,
    lsh_band_keys,
    lsh_band_keys_bulk,
    minhash_jaccard,
    minhash_signature,
    minhash_signatures,
    sentence_key,
    signature_jaccard,
    title_jaccard,
)


def test_title_jaccard_seed_thresholds() -> None:
    a = ["fed", "holds", "rates", "steady", "as", "jobs", "data", "improve"]
    b = ["fed", "holds", "rates", "steady", "as", "jobs", "data", "improves"]
    assert title_jaccard(a, b) == pytest.approx(7 / 9)
    assert title_jaccard(a, a) == 1.0
    assert title_jaccard([], a) == 0.0


def test_minhash_equals_datasketch() -> None:
    sets = [["fed", "holds", "rates"], [], ["x"], [f"w{i}" for i in range(50)]]
    sigs = minhash_signatures(sets)
    for s, sig in zip(sets, sigs, strict=True):
        m = MinHash(num_perm=128, seed=1)
        m.update_batch([t.encode() for t in s])
        assert np.array_equal(m.hashvalues, sig)
        assert np.array_equal(minhash_signature(s), sig)
    assert np.array_equal(minhash_signatures(sets, cached=False), sigs)  # the body shingles' path


def test_shingle_hashes_equal_datasketch_sha1_hash32_with_and_without_the_memo() -> None:
    from datasketch.hashfunc import sha1_hash32

    from newsflow.dedup.similarity import _shingle_hash, _shingle_hash_uncached

    for s in ["fed", "", "holds rates steady", "café ünïcode 東京", "lone \udc80 surrogate", "x" * 5000]:
        want = sha1_hash32(s.encode("utf-8", "surrogatepass"))
        assert _shingle_hash_uncached(s) == want
        assert _shingle_hash(s) == want


def test_minhash_jaccard_estimate_and_b_bit() -> None:
    a = [f"w{i}" for i in range(100)]
    b = [f"w{i}" for i in range(20, 120)]  # true Jaccard 80/120 = 0.667
    sa, sb = minhash_signature(a), minhash_signature(b)
    assert minhash_jaccard(sa, sb) == pytest.approx(0.667, abs=0.12)
    est = signature_jaccard(compress_signature(sa), compress_signature(sb))
    assert est == pytest.approx(minhash_jaccard(sa, sb), abs=0.02)
    assert len(compress_signature(sa)) == 256


def test_lsh_band_keys_stable_and_shared_per_band() -> None:
    sig = minhash_signature(["a", "b", "c"])
    keys = lsh_band_keys(sig, 16, 8, "t")
    assert len(keys) == 16 and len(set(keys)) == 16
    assert keys == lsh_band_keys(sig.copy(), 16, 8, "t")
    assert keys != lsh_band_keys(sig, 16, 8, "b")  # salt separates key spaces
    other = sig.copy()
    other[0] += np.uint64(1)  # only band 0 differs
    k2 = lsh_band_keys(other, 16, 8, "t")
    assert k2[0] != keys[0] and k2[1:] == keys[1:]
    assert lsh_band_keys_bulk(np.stack([sig, other]), 16, 8, "t").tolist() == [keys, k2]
    # pinned value: band keys must not change between releases (they live in state)
    assert keys[0] == lsh_band_keys(minhash_signature(["a", "b", "c"]), 16, 8, "t")[0]
    with pytest.raises(ValueError, match="exceeds"):
        lsh_band_keys(sig, 32, 8)


def test_first_sentences_overlap() -> None:
    body = (
        "The central bank kept its benchmark rate unchanged at 4.25 percent on Monday morning. "
        "Short one. "
        "Policymakers voted seven to two to hold, with two members favouring a quarter point cut. "
        "Markets had priced in a sixty percent chance of a hold before the decision was announced."
    )
    s = first_sentences(body)
    assert len(s) == 3 and s[0].startswith("the central bank")
    other = first_sentences(body.replace("Markets had", "Traders had"))
    assert first_sentences_overlap(s, other) == 2
    assert first_sentences_overlap([sentence_key(x) for x in s], [sentence_key(x) for x in other]) == 2


def test_sentences_keep_abbreviations_and_initials() -> None:
    from newsflow.text.sentences import split_sentences

    text = ("President Trump said he would impose tariffs after the U.S. Supreme Court ruled. "
            "Robert F. Kennedy Jr. backed the order on Feb. 28 at 10 a.m. in Washington. "
            "(Image credit: Godofredo A. Vásquez/AP)")
    assert split_sentences(text) == [
        "President Trump said he would impose tariffs after the U.S. Supreme Court ruled.",
        "Robert F. Kennedy Jr. backed the order on Feb. 28 at 10 a.m. in Washington.",
        "(Image credit: Godofredo A. Vásquez/AP)",
    ]
    # no boundary without a space: sentencex alone cuts "ex-U." | "S. soldiers."
    assert split_sentences("Keane explains the detention of two ex-U.S. soldiers. Next one.") == [
        "Keane explains the detention of two ex-U.S. soldiers.", "Next one."]
    # a segment in lower case continues the sentence; quotes stay with their sentence
    assert split_sentences('Why? the analyst asked. "It fell." Banks agree.') == [
        "Why? the analyst asked.", '"It fell."', "Banks agree."]
