"""One bad message can't move event time; a real gap confirmed by two feeds can."""

from __future__ import annotations

from newsflow.core.eventclock import FUTURE_FETCHED_AT, JumpCandidate, judge_fetched_at

H = 3_600_000
TOL = 24 * H
WM = 1_772_431_200_000


def test_first_payload_waits_for_a_second_opinion_and_on_time_or_late_is_accepted() -> None:
    first = judge_fetched_at(WM, "a", 0, None, tolerance_ms=TOL, seq="0:0")
    assert not first.accept and first.reason is None and first.candidate == JumpCandidate(WM, "a", "0:0")
    agree = judge_fetched_at(WM + H, "b", 0, first.candidate, tolerance_ms=TOL)
    assert agree.accept and agree.confirmed == first.candidate and agree.candidate is None
    # a far-future first payload: the earlier second one starts the clock, the first stays a candidate
    ahead = judge_fetched_at(WM + 7 * TOL, "bad", 0, None, tolerance_ms=TOL).candidate
    v = judge_fetched_at(WM, "a", 0, ahead, tolerance_ms=TOL)
    assert v.accept and v.candidate == ahead and v.confirmed is None
    # and the other way round: the held first one starts it, the far-future second is judged
    v = judge_fetched_at(WM + 7 * TOL, "bad", 0, first.candidate, tolerance_ms=TOL)
    assert not v.accept and v.confirmed == first.candidate and v.candidate is not None
    assert judge_fetched_at(WM - 100 * H, "a", WM, None, tolerance_ms=TOL).accept  # late
    assert judge_fetched_at(WM + TOL, "a", WM, None, tolerance_ms=TOL).accept  # at the edge


def test_one_message_far_ahead_is_rejected_and_remembered() -> None:
    v = judge_fetched_at(WM + 365 * 24 * H, "bad", WM, None, tolerance_ms=TOL)
    assert not v.accept and v.reason == FUTURE_FETCHED_AT and v.candidate == JumpCandidate(WM + 365 * 24 * H, "bad")
    # the next normal payload discards the candidate (-> dead letter); the bad feed repeating
    # itself confirms nothing
    normal = judge_fetched_at(WM + H, "a", WM, v.candidate, tolerance_ms=TOL)
    assert normal.accept and normal.candidate is None and normal.discarded == v.candidate
    again = judge_fetched_at(WM + 365 * 24 * H + H, "bad", WM, v.candidate, tolerance_ms=TOL)
    assert not again.accept and again.discarded == v.candidate


def test_a_real_gap_is_confirmed_by_a_second_feed() -> None:
    gap = WM + 7 * 24 * H
    first = judge_fetched_at(gap, "a", WM, None, tolerance_ms=TOL, seq="0:7", held=b"payload a")
    assert not first.accept
    second = judge_fetched_at(gap + 10 * 60_000, "b", WM, first.candidate, tolerance_ms=TOL)
    assert second.accept and second.candidate is None and second.discarded is None
    assert second.confirmed == JumpCandidate(gap, "a", "0:7", b"payload a")  # processed after all
    # a second feed far from the candidate does not confirm it
    assert not judge_fetched_at(gap + 3 * TOL, "b", WM, first.candidate, tolerance_ms=TOL).accept


def test_a_partition_with_one_feed_confirms_a_gap_with_that_feed_s_next_payload() -> None:
    """A replay split by feed gives some partitions a single feed: its real gaps (here a quiet
    week) pass when its next payload agrees; a lone bad message is still discarded."""
    gap = WM + 7 * 24 * H
    first = judge_fetched_at(gap, "a", WM, None, tolerance_ms=TOL, sole_feed=True, seq="0:7", held=b"x")
    assert not first.accept
    nxt = judge_fetched_at(gap + H, "a", WM, first.candidate, tolerance_ms=TOL, sole_feed=True)
    assert nxt.accept and nxt.confirmed == JumpCandidate(gap, "a", "0:7", b"x")
    # without the sole-feed condition the same sequence is refused (a feed can't vouch for itself)
    assert not judge_fetched_at(gap + H, "a", WM, first.candidate, tolerance_ms=TOL).accept
    normal = judge_fetched_at(WM + H, "a", WM, first.candidate, tolerance_ms=TOL, sole_feed=True)
    assert normal.accept and normal.discarded == first.candidate


def test_the_edge_reference_clock_rejects_even_the_first_payload() -> None:
    v = judge_fetched_at(WM + 2 * TOL, "a", 0, None, tolerance_ms=TOL, reference_ms=WM)
    assert not v.accept and "edge clock" in v.detail
    assert judge_fetched_at(WM + H, "a", 0, None, tolerance_ms=TOL, reference_ms=WM).accept


def test_in_an_archive_any_later_payload_at_or_past_a_gap_confirms_it() -> None:
    """An archive's order is its time order: gaps in a row, whatever the feeds, all pass."""
    g1 = judge_fetched_at(WM + 25 * H, "a", WM, None, tolerance_ms=TOL, seq="0:1", held=b"1", archive=True)
    assert not g1.accept and g1.candidate == JumpCandidate(WM + 25 * H, "a", "0:1", b"1")
    # the next poll gapped again: the first is confirmed, this one is held in turn (live: discarded)
    g2 = judge_fetched_at(WM + 51 * H, "a", WM, g1.candidate, tolerance_ms=TOL, seq="0:2", held=b"2", archive=True)
    assert not g2.accept and g2.confirmed == g1.candidate and g2.discarded is None
    assert g2.candidate == JumpCandidate(WM + 51 * H, "a", "0:2", b"2")
    live = judge_fetched_at(WM + 51 * H, "a", WM, g1.candidate, tolerance_ms=TOL)
    assert live.discarded == g1.candidate
    # the same feed within the tolerance confirms it (no second feed needed)
    ok = judge_fetched_at(WM + 52 * H, "a", WM + 25 * H, g2.candidate, tolerance_ms=TOL, archive=True)
    assert ok.accept and ok.confirmed == g2.candidate


def test_in_an_archive_a_payload_the_archive_goes_back_from_is_still_a_clock_fault() -> None:
    bad = judge_fetched_at(WM + 365 * 24 * H, "bad", WM, None, tolerance_ms=TOL, archive=True)
    assert not bad.accept and bad.reason == FUTURE_FETCHED_AT
    back = judge_fetched_at(WM + H, "a", WM, bad.candidate, tolerance_ms=TOL, archive=True)
    assert back.accept and back.discarded == bad.candidate and back.confirmed is None
