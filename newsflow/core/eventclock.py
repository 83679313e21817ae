"""The event-time gate: may this payload's ``fetched_at`` move its partition's clock?

Pure (no wall clock: a live edge passes its own reference time in). One message with a bad
clock must not move event time for good (a year ahead closed 9,902 empty digest windows and
no later real window ever closed), yet a real gap in a stream (a replay of an archive with a
quiet week) must not stall the flow forever. Rules, with ``tol`` = the tolerance:

* ``fetched > reference + tol`` (live mode: the poller's or broker's time at the edge) -> reject;
* nothing seen yet on the partition (watermark 0): the first payload is held (not rejected)
  until a second one gives an opinion: if they agree within ``tol`` both pass; if not, the
  earlier one starts the clock and the later one is judged against it (a far-future first
  payload no longer sets a partition's clock). A partition's only payload passes at its end.
  With an edge reference (live), that reference is the second opinion: the first payload passes;
* ``fetched <= watermark + tol`` -> accept (late or on time is never a clock problem);
* further ahead: accept only when a payload of *another feed*, rejected just before, agrees
  within ``tol`` (two independent feeds confirm the jump); on a partition that has carried only
  one feed (a replay split by feed), that feed's next payload agreeing confirms it (there is no
  other witness; a single bad message is still caught by the next normal one); otherwise reject
  and remember it as the candidate. The caller keeps the candidate with its bytes (``held``) in its snapshotted
  state: when a second feed confirms the jump (``ClockVerdict.confirmed``) it is processed,
  first, so a real gap in a stream loses nothing (one real 34 h gap in the 24-feed archive of
  May 2020, one 4-day gap in the first 20k UCI rows); when the next payload does not confirm it
  (``ClockVerdict.discarded``), or at the end of the input, it becomes a ``future_fetched_at``
  dead letter with its bytes.

Live input (Kafka) is judged by the rules above: there a ``fetched_at`` far ahead of the
partition is a clock fault (a poller's or a producer's clock), and a gap passes only when a
second opinion confirms it. An **archive** (a file replay, ``archive=True``) is different: its
order is its time order, and a gap between its polls is real (a poller that was down, a scraper
that missed days: two gaps in a row, or a last poll after one, lost real polls to the rules
above). There a payload ahead of the clock is held as above, but it is confirmed by *any* later
payload at or beyond it (within ``tol``), whatever its feed, and a payload still held when the
partition ends is processed; it is a dead letter only when the archive's next payload goes back
near the old clock (the archive itself contradicts it: a clock fault inside the archive). So a
``future_fetched_at`` dead letter of a replay always means "the archive came back", and one of
live input means "no second opinion confirmed the jump"; the dead letter's detail says which.
"""

from __future__ import annotations

from typing import NamedTuple

FUTURE_FETCHED_AT = "future_fetched_at"


class JumpCandidate(NamedTuple):
    """The last payload rejected for being ahead: its fetch time and feed (and bytes)."""

    fetched_ms: int
    feed_id: str
    seq: str = ""  # its input position
    held: bytes = b""  # its bytes, processed after all if the jump is confirmed


class ClockVerdict(NamedTuple):
    accept: bool
    reason: str | None  # FUTURE_FETCHED_AT when rejected
    detail: str
    candidate: JumpCandidate | None  # the gate's state after this payload
    confirmed: JumpCandidate | None = None  # accepted by this payload: process it first
    discarded: JumpCandidate | None = None  # not confirmed by this payload: dead-letter it


def judge_fetched_at(
    fetched_ms: int, feed_id: str, watermark_ms: int, candidate: JumpCandidate | None, *,
    tolerance_ms: int, reference_ms: int | None = None, seq: str = "", held: bytes = b"",
    sole_feed: bool = False, archive: bool = False,
) -> ClockVerdict:
    """Decide whether a payload fetched at ``fetched_ms`` may enter the flow (see module doc;
    ``archive``: the input is an archive in its time order, where a gap is real)."""
    if reference_ms is not None and fetched_ms > reference_ms + tolerance_ms:
        return ClockVerdict(False, FUTURE_FETCHED_AT,
                            f"fetched_at is {fetched_ms - reference_ms} ms ahead of the edge clock "
                            f"(tolerance {tolerance_ms} ms)", candidate)
    here = JumpCandidate(fetched_ms, feed_id, seq, held)
    if watermark_ms <= 0 and reference_ms is not None:  # live: the edge clock is the second opinion
        return ClockVerdict(True, None, "", None, discarded=candidate)
    if watermark_ms <= 0:  # the partition's first payloads: the earliest of two starts the clock
        if candidate is None:
            return ClockVerdict(False, None, "the partition's first payload: held for a second opinion", here)
        if fetched_ms < candidate.fetched_ms - tolerance_ms:  # this one starts it; the held one is ahead
            return ClockVerdict(True, None, "", candidate)
        if fetched_ms <= candidate.fetched_ms + tolerance_ms:
            return ClockVerdict(True, None, "first payloads agree", None, candidate)
        return ClockVerdict(False, FUTURE_FETCHED_AT,
                            f"fetched_at is {fetched_ms - candidate.fetched_ms} ms ahead of the partition's first "
                            f"payload (tolerance {tolerance_ms} ms)", here, candidate)
    if fetched_ms <= watermark_ms + tolerance_ms:
        return ClockVerdict(True, None, "", None, discarded=candidate)
    if archive and candidate is not None and fetched_ms >= candidate.fetched_ms - tolerance_ms:
        # the archive went on past the held payload: its gap was real, it goes first and this
        # one is judged against it (accepted, or held in turn: another gap)
        if fetched_ms <= candidate.fetched_ms + tolerance_ms:
            return ClockVerdict(True, None, "the archive went on past the gap", None, candidate)
        return ClockVerdict(False, None, "the archive went on past the gap, and gapped again", here, candidate)
    if (candidate is not None and (candidate.feed_id != feed_id or sole_feed)
            and abs(fetched_ms - candidate.fetched_ms) <= tolerance_ms):
        return ClockVerdict(True, None, "jump confirmed by a second feed" if candidate.feed_id != feed_id
                            else "jump confirmed by the partition's only feed", None, candidate)
    return ClockVerdict(False, FUTURE_FETCHED_AT,
                        f"fetched_at is {fetched_ms - watermark_ms} ms ahead of the partition's event time "
                        f"(tolerance {tolerance_ms} ms; a second feed agreeing would confirm the jump)",
                        here, discarded=candidate)
