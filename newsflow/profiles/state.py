"""A profile's live state, its update rules and its event-time decay.

Weights are stored with the event time each was last engaged; the value at event time ``t`` is
``w x (1 - decay_per_week) ^ ((t - engaged) / week)`` (stale interests decay 10 % per week:
docs/rules.md#interest-profiles): a weight not engaged fades towards 0, i.e. neutral. An
interaction at ``t``:

* brings every weight to its value at ``t`` (decay applied) for the terms of the article, then
  adds ``step x article_vector`` (:meth:`ProfileRates.step`: read/save > 0 toward the article,
  skip/hide < 0 away from it) and marks those terms engaged at ``t``;
* leaves the other terms alone: they keep decaying from when they were last engaged.

Subscription weights count as engaged when the profile starts learning (its first interaction),
so before any interaction the profile is exactly the configured one. Only the ``max_terms``
largest weights are kept (ties by hash): bounded state. Everything is a function of the applied
interactions in order and of event time: deterministic.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from newsflow.profiles.config import WEEK_MS, ProfileRates, ProfileSpec
from newsflow.profiles.vectors import Vector, seed_vector


@dataclass(slots=True)
class ProfileState:
    name: str
    #: term hash -> (weight, event time it was last engaged; None: not learning yet)
    terms: dict[int, tuple[float, int | None]] = field(default_factory=dict)
    #: readable names of the terms (stems of titles and keywords, meta terms)
    names: dict[int, str] = field(default_factory=dict)
    applied: int = 0
    started_ms: int | None = None

    @classmethod
    def from_spec(cls, spec: ProfileSpec) -> ProfileState:
        vec, names = seed_vector(spec)
        return cls(spec.name, {h: (w, None) for h, w in vec.items()}, names)

    def weight_at(self, h: int, t_ms: int, rates: ProfileRates) -> float:
        w, since = self.terms.get(h, (0.0, None))
        return _decayed(w, since, t_ms, rates)

    def vector_at(self, t_ms: int | None, rates: ProfileRates) -> Vector:
        """Every weight's value at event time ``t_ms`` (``None``: as last engaged)."""
        if t_ms is None:
            return {h: w for h, (w, _) in sorted(self.terms.items())}
        return {h: _decayed(w, s, t_ms, rates) for h, (w, s) in sorted(self.terms.items())}

    def apply(self, action: str, vector: Mapping[int, float], at_ms: int, rates: ProfileRates,
              *, dwell_s: float | None = None, names: Mapping[int, str] | None = None) -> None:
        """One interaction at event time ``at_ms`` with an article's (L2-normalized) vector."""
        if self.started_ms is None:
            self.started_ms = at_ms
            self.terms = {h: (w, at_ms) for h, (w, _) in self.terms.items()}
        step = rates.step(action, dwell_s)
        for h, x in sorted(vector.items()):
            self.terms[h] = (self.weight_at(h, at_ms, rates) + step * x, at_ms)
        if names:
            for h, s in names.items():
                if h in self.terms:
                    self.names.setdefault(h, s)
        self.applied += 1
        if len(self.terms) > rates.max_terms:
            keep = sorted(self.terms, key=lambda h: (-abs(self.terms[h][0]), h))[: rates.max_terms]
            self.terms = {h: self.terms[h] for h in sorted(keep)}
            self.names = {h: s for h, s in self.names.items() if h in self.terms}

    def top_terms(self, t_ms: int | None, rates: ProfileRates, n: int = 15) -> list[tuple[str, float]]:
        """The ``n`` terms with the largest weights at ``t_ms`` (likes first; then dislikes
        are the most negative), as (name, weight)."""
        vec = self.vector_at(t_ms, rates)
        order = sorted(vec, key=lambda h: (-vec[h], h))
        return [(self.names.get(h, f"#{h:016x}"), round(vec[h], 4)) for h in order[:n] if vec[h] != 0.0]


def _decayed(w: float, since: int | None, t_ms: int, rates: ProfileRates) -> float:
    if since is None or t_ms <= since or w == 0.0:
        return w
    kept: float = (1.0 - rates.decay_per_week) ** ((t_ms - since) / WEEK_MS)
    return w * kept
