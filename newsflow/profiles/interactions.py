"""Checking ``interactions`` records (``schemas/interactions.v1.json``) into typed messages."""

from __future__ import annotations

from dataclasses import dataclass

import orjson
from jsonschema import ValidationError

from newsflow.core.timeutil import iso_to_ms
from newsflow.model.messages import Interaction
from newsflow.wire.contracts import validate

MALFORMED = "malformed_interaction"
UNKNOWN_PROFILE = "unknown_profile"


class InteractionError(ValueError):
    """A malformed interaction: ``reason`` is the dead-letter reason code."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """An ``interactions`` heartbeat: its partition has nothing before ``at_ms`` still to come."""

    at_ms: int


def parse_interaction(seq: str, raw: bytes, known_profiles: frozenset[str] | set[str]) -> Interaction | Heartbeat:
    """An :class:`Interaction` (or a :class:`Heartbeat`) of a raw record, or
    :class:`InteractionError` with a reason (``malformed_interaction``: not JSON / not the
    schema; ``unknown_profile``)."""
    try:
        d = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        raise InteractionError(MALFORMED, f"not JSON: {e}") from None
    try:
        validate("interactions", d)
        at_ms = iso_to_ms(d["at"])
    except (ValidationError, ValueError) as e:
        msg = getattr(e, "message", str(e))
        raise InteractionError(MALFORMED, str(msg)[:500]) from None
    if d.get("heartbeat") is True:
        return Heartbeat(at_ms)
    if d["profile_id"] not in known_profiles:
        raise InteractionError(UNKNOWN_PROFILE, f"no profile {d['profile_id']!r} in the configuration")
    target, tid = ("article", d["article_id"]) if "article_id" in d else ("story", d["story_id"])
    dwell = d.get("dwell_s")
    return Interaction(seq=seq, profile_id=d["profile_id"], target=target, target_id=tid,
                       action=d["action"], at_ms=at_ms, dwell_s=float(dwell) if dwell is not None else None,
                       raw=bytes(raw))
