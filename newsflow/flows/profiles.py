"""Wiring of interest profiles: the ``interactions`` input, the profile step keyed by
profile id, and what the digests step needs from it. The logic is in ``newsflow.profiles``.

::

    interactions (keyed by input partition)
      -> interactions   check each record (dead letters: malformed, unknown profile); the
                        partition's event-time watermark; clocks to every profile key
    stories ──ArticleVector, ShardWatermark──┐  (broadcast to every profile key)
      -> profiles       [key: "pr:<profile id>"] state: the live weights + a bounded,
                        event-time-expiring map article id -> vector (and story id -> its first
                        article), so each interaction can be joined with its article
      -> digests        ProfileAt (weights as of each window end of the profile's digest types)
                        and ProfileClock

**Why every profile key keeps an article map** (and interactions are not routed to article
shards): an interaction names an article id, not the story shard (feed category) that scored it,
and a profile needs the vector of what its reader touched. Each profile key therefore keeps the
vectors of the last ``article_ttl_ms`` of event time (7 days, at most ``max_articles``, the
oldest dropped first): no key sees every article forever, memory per key is bounded, and the
work is O(profiles x articles) vector copies — fine for tens of profiles; for thousands, route
interactions to article-id shards that hold the vectors and forward joined updates (the
messages already carry everything needed for that).

**Determinism.** A profile applies an interaction only when both clocks are past it: the
articles' (every story shard's watermark, so the article is known) and the interactions'
(every input partition's watermark, so no earlier interaction can still come). Interactions are
applied in (event time, input position) order; an interaction older than its partition's
watermark is applied at the watermark. For each window end ``E`` of the profile's digest types
the step emits the weights after exactly the interactions before ``E`` (decay as of ``E``), so a
profile digest is the same whatever the number of workers or the interleaving of the inputs.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable
from dataclasses import replace

import bytewax.operators as op
from bytewax.dataflow import Stream
from bytewax.operators import StatefulLogic

from newsflow.config import Settings
from newsflow.core.alignment import END
from newsflow.core.snapshot import Snapshot, make_snapshot, restore
from newsflow.core.timeutil import iso_to_ms
from newsflow.feeds.normalize import make_deadletter
from newsflow.flows import metrics
from newsflow.flows.isolation import internal_error, isolated
from newsflow.model.messages import (
    ArticleVector,
    FromShard,
    HealthReport,
    Interaction,
    InteractionClock,
    MergedArticle,
    Output,
    ProfileAt,
    ProfileClock,
    ProfileInput,
    ProfileOutput,
    ProfileVersion,
    ScoredArticle,
    ShardWatermark,
    StoryMerge,
    StoryOutput,
)
from newsflow.profiles.config import DEFAULT_PROFILE, ProfilesConfig, ProfileSpec
from newsflow.profiles.interactions import Heartbeat, InteractionError, parse_interaction
from newsflow.profiles.rank import live_profile, with_relevance
from newsflow.profiles.state import ProfileState
from newsflow.profiles.vectors import article_vector
from newsflow.scoring.importance import InterestProfile
from newsflow.wire.codec import deadletter_to_dict, dumps

STEP_INTERACTIONS = "interactions"
STEP_PROFILES = "profiles"
#: an interactions partition at its end: its clock no longer holds anything back
END_OF_INPUT = END  # the main flow's end-of-source mark (newsflow.core.alignment)


def profile_key(name: str) -> str:
    return f"pr:{name}"


def _dl(settings: Settings, reason: str, detail: str, raw: bytes, at_ms: int | None) -> Output:
    dl = make_deadletter("interactions", reason, detail, raw, feed_id=None, fetched_ms=at_ms)
    metrics.DEADLETTERS.labels("interactions", reason).inc()
    return Output(settings.kafka.topics.deadletter, dl.dl_id.encode(), dumps(deadletter_to_dict(dl)))


# ---------------------------------------------------------------- interactions input
InteractionsOutput = Output | Interaction | InteractionClock


class InteractionsLogic(StatefulLogic[tuple[str, bytes], InteractionsOutput, Snapshot]):
    """One interactions input partition: checked records, the partition's watermark."""

    def __init__(self, settings: Settings, profiles: ProfilesConfig, resume: Snapshot | None,
                 recovery: bool) -> None:
        self.s = settings
        self.known = frozenset(profiles.names)
        self.recovery = recovery
        st = restore(STEP_INTERACTIONS, resume) if resume is not None else {}
        self.partition: str = st.get("partition", "")
        self.wm: int = st.get("watermark", 0)
        self.bucket: int = st.get("bucket", -1)

    def on_item(self, value: tuple[str, bytes]) -> tuple[Iterable[InteractionsOutput], bool]:
        seq, raw = value
        self.partition = seq.split(":", 1)[0]
        try:
            ix = parse_interaction(seq, raw, self.known)
        except InteractionError as e:
            return [_dl(self.s, e.reason, str(e), raw if isinstance(raw, bytes) else b"", None)], StatefulLogic.RETAIN
        out: list[InteractionsOutput] = []
        if isinstance(ix, Heartbeat):  # only the partition's clock moves
            at = ix.at_ms
        else:
            if ix.at_ms < self.wm:  # older than its partition's clock: applied at the clock
                ix = replace(ix, at_ms=self.wm)
            out.append(ix)
            at = ix.at_ms
        if at > self.wm:
            self.wm = at
            b = self.wm // self.s.flow.tick_ms
            if b > self.bucket:
                self.bucket = b
                out.append(InteractionClock(self.partition, self.wm))
        return out, StatefulLogic.RETAIN

    def on_eof(self) -> tuple[Iterable[InteractionsOutput], bool]:
        return [InteractionClock(self.partition, END_OF_INPUT)], StatefulLogic.RETAIN

    def snapshot(self) -> Snapshot:
        return make_snapshot(STEP_INTERACTIONS, {"watermark": self.wm, "bucket": self.bucket, "partition": self.partition},
                             freeze=self.recovery)


# ---------------------------------------------------------------- profile state per key
class ProfileLogic(StatefulLogic[tuple[str, ProfileInput], ProfileOutput, Snapshot]):
    """One profile: joins its interactions with article vectors on event time, learns, decays,
    and reports its weights at the window ends of its digest types."""

    def __init__(self, settings: Settings, profiles: ProfilesConfig, ix_partitions: int,
                 resume: Snapshot | None, recovery: bool) -> None:
        self.s = settings
        self.profiles = profiles
        self.rates = profiles.rates
        self.ix_partitions = ix_partitions
        self.recovery = recovery
        st = restore(STEP_PROFILES, resume) if resume is not None else {}
        #: the profile (a builder does not get its key: set from the first message)
        self.spec: ProfileSpec | None = None
        self.state: ProfileState | None = st.get("state")
        if self.state is not None:
            self._bind(self.state.name)
        #: article id -> (fetched ms, vector terms, names): its first sighting
        self.articles: dict[str, tuple[int, tuple[tuple[int, float], ...], tuple[tuple[int, str], ...]]] = (
            st.get("articles", {}))
        #: story id -> (fetched ms, article id) of its first article
        self.stories: dict[str, tuple[int, str]] = st.get("stories", {})
        self.pending: list[tuple[int, str, Interaction]] = st.get("pending", [])
        self.shard_wm: dict[str, int] = st.get("shard_watermarks", {})
        #: each story shard's first watermark: their minimum is where the digest steps' clock
        #: starts, so the weights are reported at every window end after it, however late the
        #: interactions clock arrives
        self.shard_first: dict[str, int] = st.get("shard_first", {})
        self.ix_wm: dict[str, int] = st.get("ix_watermarks", {})
        self.clock: int | None = st.get("clock")

    def _bind(self, name: str) -> None:
        spec = self.profiles.get(name)
        assert spec is not None, name
        self.spec = spec
        #: the default profile's versions feed the live relevance of every article record
        self.emit_versions = self.profiles.live_relevance and name == DEFAULT_PROFILE
        sched = self.s.digests.schedule()
        self.schedule = replace(sched, types=tuple(t for t in sched.types if t.name in spec.digests))
        if self.state is None:
            self.state = ProfileState.from_spec(spec)

    def on_item(self, item: tuple[str, ProfileInput]) -> tuple[Iterable[ProfileOutput], bool]:
        name, value = item
        if self.spec is None:
            self._bind(name)
        if isinstance(value, ArticleVector):
            self._add_article(value)
            return (), StatefulLogic.RETAIN
        if isinstance(value, Interaction):
            bisect.insort(self.pending, (value.at_ms, value.seq, value), key=lambda x: (x[0], x[1]))
            return (), StatefulLogic.RETAIN
        if isinstance(value, InteractionClock):
            if value.watermark > self.ix_wm.get(value.partition, -1):
                self.ix_wm[value.partition] = value.watermark
        elif (isinstance(value, FromShard) and isinstance(value.message, ShardWatermark)
              and value.message.watermark > self.shard_wm.get(value.shard, -1)):
            self.shard_wm[value.shard] = value.message.watermark
            self.shard_first.setdefault(value.shard, value.message.watermark)
        return self._advance(), StatefulLogic.RETAIN

    def on_eof(self) -> tuple[Iterable[ProfileOutput], bool]:
        if self.spec is None:
            return (), StatefulLogic.RETAIN
        out = self._advance()
        out.extend(self._apply_before(END_OF_INPUT))
        out.append(self._at(None))
        return out, StatefulLogic.RETAIN

    def _add_article(self, v: ArticleVector) -> None:
        cur = self.articles.get(v.article_id)
        if cur is None or v.fetched_ms < cur[0]:
            self.articles[v.article_id] = (v.fetched_ms, v.terms, v.names)
        if v.story_id:
            s = self.stories.get(v.story_id)
            if s is None or (v.fetched_ms, v.article_id) < s:
                self.stories[v.story_id] = (v.fetched_ms, v.article_id)
        if len(self.articles) > self.rates.max_articles:  # the oldest first (ties by id)
            drop = sorted(self.articles, key=lambda a: (self.articles[a][0], a))
            for a in drop[: len(self.articles) - self.rates.max_articles]:
                del self.articles[a]

    def _advance(self) -> list[ProfileOutput]:
        assert self.spec is not None, "bound on the first item"
        if len(self.shard_wm) < self.s.stories.shards or len(self.ix_wm) < self.ix_partitions:
            return []
        c = min([*self.shard_wm.values(), *self.ix_wm.values()])  # no interactions input: the articles'
        if self.clock is not None and c <= self.clock:
            return []
        out: list[ProfileOutput] = []
        start = self.clock if self.clock is not None else min(self.shard_first.values())
        for end in sorted({w.end_ms for w in self.schedule.closing(start, c)}):
            out.extend(self._apply_before(end))
            out.append(self._at(end))
        out.extend(self._apply_before(c))
        self.clock = c
        out.append(ProfileClock(self.spec.name, c))
        self._expire(c)
        return out

    def _apply_before(self, t: int) -> list[ProfileOutput]:
        """Apply the pending interactions before event time ``t``, in order."""
        assert self.state is not None, "bound on the first item"
        n = bisect.bisect_left(self.pending, t, key=lambda x: x[0])
        todo, self.pending = self.pending[:n], self.pending[n:]
        out: list[ProfileOutput] = []
        for i, (_, _, ix) in enumerate(todo):
            if self.emit_versions and i and todo[i - 1][0] != ix.at_ms:
                out.append(self._version(todo[i - 1][0]))
            art = self._lookup(ix)
            if art is None:
                out.append(_dl(self.s, "unknown_article" if ix.target == "article" else "unknown_story",
                               f"{ix.target} {ix.target_id!r} is not known to profile {ix.profile_id!r} at "
                               "the interaction's time (never seen, seen later, or expired)", ix.raw, ix.at_ms))
                continue
            _, terms, names = art
            try:  # one interaction's failure must not lose the others of the batch (or the clock)
                self.state.apply(ix.action, dict(terms), ix.at_ms, self.rates, dwell_s=ix.dwell_s, names=dict(names))
            except Exception as e:
                out.append(internal_error(STEP_PROFILES, self.s.kafka.topics.deadletter, e, (ix.seq, ix.raw),
                                          self.s.normalize.max_deadletter_original_bytes))
        if self.emit_versions and todo:
            out.append(self._version(todo[-1][0]))
        return out

    def _version(self, at_ms: int) -> ProfileVersion:
        """The state after every interaction up to and at ``at_ms`` (live relevance)."""
        assert self.spec is not None and self.state is not None, "bound on the first item"
        return ProfileVersion(self.spec.name, at_ms, tuple((h, w, since) for h, (w, since) in sorted(self.state.terms.items())))

    def _lookup(self, ix: Interaction) -> tuple[int, tuple[tuple[int, float], ...], tuple[tuple[int, str], ...]] | None:
        aid: str | None = ix.target_id
        if ix.target == "story":
            s = self.stories.get(ix.target_id)
            aid = s[1] if s is not None else None
        art = self.articles.get(aid) if aid is not None else None
        # known at the interaction's time: fetched before it and not yet expired
        if art is None or art[0] > ix.at_ms or art[0] < ix.at_ms - self.rates.article_ttl_ms:
            return None
        return art

    def _at(self, end: int | None) -> ProfileAt:
        assert self.spec is not None and self.state is not None, "bound on the first item"
        t = end if end is not None else self.clock
        vec = self.state.vector_at(t, self.rates)
        return ProfileAt(self.spec.name, end, tuple((h, w) for h, w in vec.items() if w != 0.0),
                         tuple(self.state.top_terms(t, self.rates)))

    def _expire(self, c: int) -> None:
        # every future interaction is at >= c: older vectors can never be joined again
        horizon = c - self.rates.article_ttl_ms
        if horizon <= 0:
            return
        dead = [a for a, v in self.articles.items() if v[0] < horizon]
        for a in dead:
            del self.articles[a]
        if dead:
            self.stories = {s: v for s, v in self.stories.items() if v[1] in self.articles}

    def snapshot(self) -> Snapshot:
        return make_snapshot(STEP_PROFILES, {
            "state": self.state, "articles": self.articles, "stories": self.stories, "pending": self.pending,
            "shard_watermarks": self.shard_wm, "shard_first": self.shard_first, "ix_watermarks": self.ix_wm,
            "clock": self.clock,
        }, freeze=self.recovery)


# ---------------------------------------------------------------- live relevance per story shard
STEP_RELEVANCE = "relevance"
RelevanceInput = (ScoredArticle | MergedArticle | HealthReport | ShardWatermark | StoryMerge | ProfileVersion
                  | ProfileClock)


class RelevanceLogic(StatefulLogic[RelevanceInput, StoryOutput | Output, Snapshot]):
    """One story shard's output, in order, with the live ``default`` profile's relevance in every
    scored article record.

    The default profile broadcasts its state after each batch of interactions
    (:class:`ProfileVersion`) and its clock (:class:`ProfileClock`: every interaction before it
    is applied). An article fetched at ``f`` is scored with the profile as of ``t = f - lag``
    (``profiles.relevance_lag_seconds``): the latest version from before ``t``, decayed to ``t``.
    It is held, with everything behind it (watermarks, health reports: the digests see the shard
    in order), until the profile's clock reaches ``t``: then no version before ``t`` can still
    come, so the relevance is the same for any number of workers or interleaving of inputs.
    No key sees every article (one key per story shard), and the profile's messages are small
    and rare. ``importance`` is re-weighted with the record's own weights."""

    def __init__(self, settings: Settings, profiles: ProfilesConfig, resume: Snapshot | None,
                 recovery: bool) -> None:
        self.recovery = recovery
        self.topic, self.max_original = settings.kafka.topics.deadletter, settings.normalize.max_deadletter_original_bytes
        self.rates = profiles.rates
        self.lag = profiles.relevance_lag_ms
        spec = profiles.get(DEFAULT_PROFILE) or ProfileSpec(DEFAULT_PROFILE)
        seed = ProfileState.from_spec(spec)
        self.seed: tuple[tuple[int, float, int | None], ...] = tuple((h, w, s) for h, (w, s) in seed.terms.items())
        #: how far back versions are kept (an article this late uses the oldest one kept)
        self.keep_ms = settings.dedup.window_ms
        st = restore(STEP_RELEVANCE, resume) if resume is not None else {}
        self.queue: list[StoryOutput] = st.get("queue", [])
        self.versions: list[ProfileVersion] = st.get("versions", [])
        self.clock: int | None = st.get("clock")
        self._cache: tuple[int, int, InterestProfile | None] | None = None

    def on_item(self, value: RelevanceInput) -> tuple[Iterable[StoryOutput | Output], bool]:
        if isinstance(value, ProfileVersion):
            i = bisect.bisect_left(self.versions, value.from_ms, key=lambda v: v.from_ms)  # (in order: the end)
            if i < len(self.versions) and self.versions[i].from_ms == value.from_ms:
                self.versions[i] = value
            else:
                self.versions.insert(i, value)
            self._cache = None
        elif isinstance(value, ProfileClock):
            if self.clock is None or value.watermark > self.clock:
                self.clock = value.watermark
        else:
            self.queue.append(value)
        return self._release(final=False), StatefulLogic.RETAIN

    def on_eof(self) -> tuple[Iterable[StoryOutput | Output], bool]:
        return self._release(final=True), StatefulLogic.RETAIN

    def _release(self, *, final: bool) -> list[StoryOutput | Output]:
        n = 0
        out: list[StoryOutput | Output] = []
        for msg in self.queue:
            if isinstance(msg, ScoredArticle | MergedArticle):  # (emitted again: the same relevance)
                t = iso_to_ms(msg.record["fetched_at"]) - self.lag
                if not final and (self.clock is None or self.clock < t):
                    break
                try:  # an article that cannot be scored must not stall the shard behind it
                    rec = dict(with_relevance(msg.record, self._profile(t)))
                    out.append(ScoredArticle(rec, msg.entry, msg.story_text) if isinstance(msg, ScoredArticle)
                               else MergedArticle(rec))
                except Exception as e:
                    out.append(internal_error(STEP_RELEVANCE, self.topic, e, msg, self.max_original))
            else:
                out.append(msg)
            n += 1
        if n:
            del self.queue[:n]
        self._prune()
        return out

    def _profile(self, t: int) -> InterestProfile | None:
        i = bisect.bisect_left(self.versions, t, key=lambda v: v.from_ms)  # versions before t
        if self._cache is not None and self._cache[:2] == (i, t):
            return self._cache[2]
        p = live_profile(self.versions[i - 1].terms if i else self.seed, t, self.rates)
        self._cache = (i, t, p)
        return p

    def _prune(self) -> None:
        if self.clock is None or len(self.versions) < 2:
            return
        horizon = self.clock - self.lag - self.keep_ms
        i = bisect.bisect_left(self.versions, horizon, key=lambda v: v.from_ms)
        if i > 1:  # the last version before the horizon stays (it holds at the horizon)
            del self.versions[: i - 1]
            self._cache = None

    def snapshot(self) -> Snapshot:
        return make_snapshot(STEP_RELEVANCE, {"queue": self.queue, "versions": self.versions, "clock": self.clock},
                             freeze=self.recovery)


# ---------------------------------------------------------------- wiring
def _vector_of(rec: dict) -> ArticleVector:  # type: ignore[type-arg]
    vec, names = article_vector(rec)
    return ArticleVector(str(rec["article_id"]), rec.get("story_id"), iso_to_ms(rec["fetched_at"]),
                         tuple(vec.items()), tuple(sorted(names.items())))


ToProfile = tuple[str, tuple[str, ProfileInput]]


def _to_profiles(names: list[str]) -> Callable[[tuple[str, object]], list[ToProfile]]:
    def route(kv: tuple[str, object]) -> list[ToProfile]:
        shard, msg = kv
        if isinstance(msg, ScoredArticle):
            v = _vector_of(msg.record)
            return [(profile_key(n), (n, v)) for n in names]
        if isinstance(msg, ShardWatermark):
            f = FromShard(shard, msg)
            return [(profile_key(n), (n, f)) for n in names]
        return []

    return route


def _route_interactions(names: list[str]) -> Callable[[tuple[str, InteractionsOutput]], list[ToProfile]]:
    def route(kv: tuple[str, InteractionsOutput]) -> list[ToProfile]:
        msg = kv[1]
        if isinstance(msg, Interaction):
            return [(profile_key(msg.profile_id), (msg.profile_id, msg))]
        if isinstance(msg, InteractionClock):
            return [(profile_key(n), (n, msg)) for n in names]
        return []

    return route


def profile_steps(
    storied: Stream[tuple[str, object]], interactions: Stream[tuple[str, tuple[str, bytes]]] | None,
    settings: Settings, profiles: ProfilesConfig, *, ix_partitions: int, recovery: bool = False,
) -> tuple[Stream[Output], Stream[ProfileOutput]]:
    """(dead letters for the sinks, profile messages: weights and clocks for the digests step,
    the default profile's versions for the live relevance). Without an
    interactions input (``ix_partitions`` 0) the profiles are their subscriptions."""
    names = profiles.names
    to_articles = op.flat_map("articles_to_profiles", storied, _to_profiles(names))
    dls: list[Stream[Output]] = []
    if interactions is None:
        to_prof = to_articles
    else:
        checked = op.stateful(STEP_INTERACTIONS, interactions,
                              isolated(STEP_INTERACTIONS, settings,
                                       lambda resume: InteractionsLogic(settings, profiles, resume, recovery)))
        dls.append(op.filter_map(
            "interaction_deadletters", checked, lambda kv: kv[1] if isinstance(kv[1], Output) else None))
        to_prof = op.merge("to_profiles", op.flat_map("interactions_to_profiles", checked, _route_interactions(names)),
                           to_articles)
    learned = op.stateful(STEP_PROFILES, to_prof, isolated(
        STEP_PROFILES, settings, lambda resume: ProfileLogic(settings, profiles, ix_partitions, resume, recovery)))
    dls.append(op.filter_map(
        "profile_deadletters", learned, lambda kv: kv[1] if isinstance(kv[1], Output) else None))
    msgs: Stream[ProfileOutput] = op.filter_map(
        "profile_messages", learned, lambda kv: None if isinstance(kv[1], Output) else kv[1])
    return op.merge("profile_dead_letters", *dls), msgs


def live_relevance_steps(storied: Stream[tuple[str, object]], learned: Stream[ProfileOutput], settings: Settings,
                         profiles: ProfilesConfig, shard_keys: list[str], *, recovery: bool = False,
                         ) -> tuple[Stream[Output], Stream[tuple[str, StoryOutput]]]:
    """(dead letters, each story shard's articles / health reports / watermarks with the live
    default profile's relevance): :class:`RelevanceLogic` keyed like the story shards."""
    def broadcast(m: ProfileOutput) -> list[tuple[str, RelevanceInput]]:
        if isinstance(m, ProfileVersion) or (isinstance(m, ProfileClock) and m.profile == DEFAULT_PROFILE):
            return [(k, m) for k in shard_keys]
        return []

    def shard_items(kv: tuple[str, object]) -> tuple[str, RelevanceInput] | None:
        msg = kv[1]
        ok = isinstance(msg, ScoredArticle | MergedArticle | HealthReport | ShardWatermark | StoryMerge)
        return (kv[0], msg) if ok else None  # type: ignore[return-value]

    rel_in = op.merge("relevance_in", op.filter_map("shards_to_relevance", storied, shard_items),
                      op.flat_map("default_profile_to_shards", learned, broadcast))
    scored = op.stateful(STEP_RELEVANCE, rel_in, isolated(
        STEP_RELEVANCE, settings, lambda resume: RelevanceLogic(settings, profiles, resume, recovery)))
    split = op.branch("split_relevance", scored, lambda kv: isinstance(kv[1], Output))
    dls: Stream[Output] = op.map("relevance_deadletters", split.trues, lambda kv: kv[1])
    return dls, split.falses
