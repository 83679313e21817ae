"""The poller's settings (:class:`PollerConfig`, from the ``[poller]`` section) and its clock."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from newsflow.config import Settings, Topics
from newsflow.connectors.http_fetch import FetchConfig
from newsflow.polling.state import PollPolicy

Clock = Callable[[], int]


def system_clock_ms() -> int:
    """Wall clock in epoch milliseconds (the default poller clock)."""
    return time.time_ns() // 1_000_000


@dataclass(frozen=True, slots=True)
class PollerConfig:
    """Poller settings; built from the ``[poller]`` section of the configuration tree
    (:func:`poller_config`)."""

    topics: Topics = field(default_factory=Topics)
    #: concurrent fetches per worker
    concurrency: int = 50
    #: concurrent fetches per registrable domain
    per_domain_concurrency: int = 2
    #: Bytewax source partitions (feeds sharded by registrable domain); keep it stable
    partitions: int = 4
    #: heartbeat tick to every feeds.raw partition every N seconds (0: off)
    heartbeat_s: float = 1.0
    #: the heartbeat also goes to every ``interactions`` partition (profiles configured), so a
    #: quiet interactions topic does not hold the profiles' clock back
    interactions_heartbeat: bool = False
    #: bodies larger than this go to ``blob_dir`` (``body_ref``) instead of inline base64;
    #: 700 kB -> ~933 kB of base64, under Kafka's default 1 MB message limit
    max_inline_body_bytes: int = 700_000
    #: where bodies over the inline limit are stored; None: they are reported ``too_large``
    blob_dir: str | None = None
    #: a stored body expires this long after its last poll (poller clock; the flow must have read
    #: its feeds.raw record by then); expired files are swept at most once per blob_sweep_s
    blob_ttl_s: float = 7 * 86_400.0
    blob_sweep_s: float = 3_600.0
    #: longest a partition runs the shared event loop inside one ``next_batch`` (s)
    loop_slice_s: float = 0.05
    #: longest an idle partition sleeps before re-checking its schedule (s)
    idle_wakeup_s: float = 5.0
    fetch: FetchConfig = field(default_factory=FetchConfig)
    policy: PollPolicy = field(default_factory=PollPolicy)
    #: where ``newsflow poll --now FEED_ID`` leaves its requests (``<state dir>/requests``)
    requests_dir: str | None = None


def poller_config(settings: Settings) -> PollerConfig:
    """The poller's configuration from the ``[poller]`` section, with the configured topic names
    (and, with profiles configured, heartbeats to the ``interactions`` topic too)."""
    p = settings.poller
    d = p.model_dump(exclude={"fetch", "policy"})
    fetch: Any = p.fetch  # sections generated from the dataclasses (``newsflow.config.base.section_from``)
    policy: Any = p.policy
    return PollerConfig(topics=settings.kafka.topics, fetch=FetchConfig(**fetch.model_dump()),
                        policy=PollPolicy(**policy.model_dump()),
                        interactions_heartbeat=settings.profiles.configured, **d)


__all__ = ["Clock", "PollerConfig", "poller_config", "system_clock_ms"]
