"""A source partition's snapshot: feed and domain states as plain dicts, tolerant to added and
removed fields, and their restore."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from newsflow.polling.state import DomainState, FeedState

SNAPSHOT_VERSION = 1

_FEED_FIELDS = tuple(f.name for f in fields(FeedState))
_DOMAIN_FIELDS = tuple(f.name for f in fields(DomainState))


def state_to_dict(s: FeedState) -> dict[str, Any]:
    return {n: getattr(s, n) for n in _FEED_FIELDS}


def state_from_dict(d: Mapping[str, Any]) -> FeedState | None:
    try:
        kw = {k: v for k, v in d.items() if k in _FEED_FIELDS}
        if "item_keys" in kw:
            kw["item_keys"] = frozenset(kw["item_keys"])
        if "daily" in kw:
            kw["daily"] = tuple(tuple(b) for b in kw["daily"])
        return FeedState(**kw)
    except TypeError:  # missing required fields: unusable, start over
        return None


def domain_to_dict(s: DomainState) -> dict[str, Any]:
    return {n: getattr(s, n) for n in _DOMAIN_FIELDS}


def domain_from_dict(d: Mapping[str, Any]) -> DomainState | None:
    try:
        return DomainState(**{k: v for k, v in d.items() if k in _DOMAIN_FIELDS})
    except TypeError:
        return None


def restore_snapshot(snap: Any) -> tuple[dict[str, FeedState], dict[str, DomainState]]:
    """Feed and domain states from a partition snapshot (unknown versions -> empty)."""
    if not isinstance(snap, dict) or snap.get("v") != SNAPSHOT_VERSION:
        return {}, {}
    feeds = {fid: st for fid, d in (snap.get("feeds") or {}).items()
             if (st := state_from_dict(d)) is not None}
    domains = {dom: ds for dom, d in (snap.get("domains") or {}).items()
               if (ds := domain_from_dict(d)) is not None}
    return feeds, domains


__all__ = ["SNAPSHOT_VERSION", "domain_from_dict", "domain_to_dict", "restore_snapshot", "state_from_dict",
           "state_to_dict"]
