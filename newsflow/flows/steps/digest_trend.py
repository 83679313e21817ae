"""A digest type's trend key's logic (:mod:`newsflow.flows.digest_windows`): drafts applied in
window order, the digests emitted.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from bytewax.operators import StatefulLogic

from newsflow.config import Settings
from newsflow.core.exactbytes import exact_size
from newsflow.core.snapshot import Snapshot, make_snapshot, restore
from newsflow.digest.record import Previous
from newsflow.digest.trends import apply_trends, next_memory
from newsflow.flows import metrics
from newsflow.flows.digest_windows import (
    STEP_TREND,
    WindowDraft,
    WindowOrder,
)
from newsflow.model.messages import (
    Output,
)
from newsflow.profiles.rank import personalize, with_item_relevance
from newsflow.wire.codec import (
    dumps,
)


class TrendLogic(StatefulLogic[Any, Output, Snapshot]):
    """One digest type's trends: drafts applied in window order (each profile's digests in
    theirs), the digests emitted."""

    def __init__(self, settings: Settings, resume: Snapshot | None, recovery: bool = False) -> None:
        self.s = settings
        self.recovery = recovery
        self.config = settings.digests.to_config()
        st = restore(STEP_TREND, resume) if resume is not None else {}
        #: per chain (None: the type's own digests; else a profile's): the previous window's
        #: memory, the windows in order, the drafts that came
        self.previous: dict[str | None, Previous] = st.get("previous", {})
        self.order: dict[str | None, list[WindowOrder]] = st.get("order", {})
        self.drafts: dict[tuple[str | None, int, bool], WindowDraft] = st.get("drafts", {})

    def on_item(self, value: WindowOrder | WindowDraft) -> tuple[Iterable[Output], bool]:
        if isinstance(value, WindowOrder):
            chain = value.profile
            self.order.setdefault(chain, []).append(value)
        else:
            chain = value.profile.profile if value.profile is not None else None
            self.drafts[(chain, value.window.start_ms, value.final)] = value
        out: list[Output] = []
        order = self.order.get(chain, [])
        while order:
            o = order[0]
            dr = self.drafts.pop((chain, o.window.start_ms, o.final), None)
            if dr is None:
                break
            order.pop(0)
            prev = self.previous.get(chain)
            d = apply_trends(dr.draft, prev, self.config)
            if dr.profile is not None:  # a profile's digest: its key, top terms, relevance
                d = personalize(d, dr.profile.profile, dr.profile.top_terms, dr.relevance or {})
            elif dr.relevance is not None:  # the items carry the live relevance
                d = with_item_relevance(d, dr.relevance)
            if o.final and (nxt := next_memory(prev, d)) is not None:
                self.previous[chain] = nxt.copy()
            metrics.DIGESTS.labels(o.window.digest_type).inc()
            out.append(Output(self.s.kafka.topics.digests, d["digest_id"].encode(), exact_size(dumps(d))))
        return out, StatefulLogic.RETAIN

    def snapshot(self) -> Snapshot:
        return make_snapshot(STEP_TREND, {"previous": self.previous, "order": self.order,
                                          "drafts": self.drafts}, freeze=self.recovery)
