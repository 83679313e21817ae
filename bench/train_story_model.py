"""Train the learned story decision (``bench/learned_stories/story_model.py``) on hand-labelled days.

    .venv/bin/python bench/train_story_model.py [--days 2020-04-28 2020-05-06 2020-07-15]
        [--out bench/learned_stories/story_model.json]

Each labelled day of ``../shared/data/real-feeds`` is an archive of the days around it and a gold
file (``*.stories.gold.jsonl``: labelled links -> gold story). The archive is replayed once
through the whole file flow (cached in ``--work``) for its ``articles`` records: their layer 1-2
decisions (GUID/URL copies) and the flow's order. Then the story step is simulated with the gold
("teacher forcing", Miranda et al. 2018): in event order, each article is compared with the open
stories the assigner's index returns (stories built from the gold assignment so far: a labelled
article joins its gold story, an unlabelled one starts its own), and each (labelled article,
labelled candidate story) pair gives the pair features and label = same gold story. A
scikit-learn logistic regression on the standardized features is folded back to raw-feature
coefficients. The threshold is chosen by leave-one-day-out inside the training days (train on
the others, replay the day with the model, score it): the threshold of the best mean of B-cubed
F1 and pairwise F1 over those days. The output is the JSON the assigner loads.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SHARED = ROOT.parent / "shared"
REAL = SHARED / "data/real-feeds"
sys.path.insert(0, str(SHARED / "tools"))

from learned_stories.story_gate import GatedStoryAssigner
from learned_stories.story_learned import LearnedStoryAssigner
from learned_stories.story_model import FEATURES, StoryModel
from score_real_day import scores

from newsflow.core.timeutil import iso_to_ms
from newsflow.dedup.story_assigner import StoryAssigner
from newsflow.dedup.story_config import StoryConfig
from newsflow.dedup.story_decision import StoryState
from newsflow.dedup.story_features import StoryFeatures, StoryInput, featurize_batch

#: the flow's story configuration (the defaults)
CONFIG = StoryConfig()

#: labelled day -> its archive (file name stem of ../shared/data/real-feeds)
DAYS = {
    "2020-04-28": "headlines-24feeds_2020-04-25_28",
    "2020-05-06": "headlines-24feeds_2020-05-03_06",
    "2020-07-15": "headlines-24feeds_2020-07-10_15",
}
THRESHOLDS = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
#: inverse regularization strengths tried (chosen with the threshold, inside the training days)
CS = (0.1, 1.0)
UCI = SHARED / "data/uci-news/uci_news_2014-03_05.daily_shuffled.jsonl.gz"
#: UCI rows trained on (``--uci``): May 2014, the file's last month; cv_stories scores March
UCI_TRAIN = (220_000, 235_000)
WORK = Path("/tmp/newsflow-story-days")


@dataclass
class Day:
    name: str
    records: list[dict]  # articles records in the stories step's order
    features: list[StoryFeatures]
    gold_rows: list[dict]
    label: dict[str, str]  # article_id -> gold story (the first record of each labelled link)
    weight: float = 1.0  # of its pairs in the fit


def flow_seq_key(rec: dict) -> tuple[str, str]:
    """The order the stories step saw the records in (epoch/offset, then partition)."""
    part, _, rest = str(rec["seq"]).partition(":")
    return rest, part


def load_day(name: str, work: Path = WORK, config: StoryConfig = CONFIG) -> Day:
    """The day's articles records (replaying its archive once into ``work``) and gold."""
    out = work / name
    arts = out / "articles.jsonl"
    if not arts.exists():
        from newsflow.cli.main import run_file_flow

        out.mkdir(parents=True, exist_ok=True)
        run_file_flow(str(REAL / f"{DAYS[name]}.feeds.raw.jsonl.gz"), str(out))
    recs = [json.loads(line) for line in arts.open("rb")]
    recs.sort(key=flow_seq_key)
    inputs = [StoryInput(r["article_id"], r["title"], r.get("url"), r["publisher"],
                         iso_to_ms(r["published_at"]), r.get("body_text") or "", r.get("canonical_url"))
              for r in recs]
    gold_rows = [json.loads(line) for line in (REAL / f"headlines-24feeds_{name}.stories.gold.jsonl").open()]
    gold_of_link = {g["link"]: g["story"] for g in gold_rows}
    label: dict[str, str] = {}
    seen: set[str] = set()
    for r in recs:
        for k in (r.get("url"), r.get("canonical_url"), r.get("guid")):
            if k and k not in seen:
                seen.add(k)
                if k in gold_of_link and r["article_id"] not in label:
                    label[r["article_id"]] = gold_of_link[k]
    return Day(name, recs, featurize_batch(inputs, config), gold_rows, label)


def load_uci(rows: tuple[int, int] = UCI_TRAIN, weight: float = 0.5) -> Day:
    """UCI headlines (rows ``[from, to)`` of the file, all labelled) as a training day."""
    import gzip

    recs = []
    with gzip.open(UCI, "rt", encoding="utf-8") as f:
        for i, line in enumerate(f):
            if i >= rows[1]:
                break
            if i >= rows[0]:
                recs.append(json.loads(line))
    inputs = [StoryInput(str(r["id"]), r["title"], r.get("url"), r.get("source") or r.get("hostname") or "",
                         iso_to_ms(r["time"])) for r in recs]
    records = [{"article_id": str(r["id"]), "disposition": "unique", "dedup_layer": None, "duplicate_of": None}
               for r in recs]
    return Day("uci", records, featurize_batch(inputs, CONFIG), [], {str(r["id"]): r["story"] for r in recs},
               weight)


def duplicate_of(r: dict) -> str | None:
    return r["duplicate_of"] if r["disposition"] in ("exact_duplicate", "revision") and \
        r["dedup_layer"] in ("guid", "url") else None


def pairs(day: Day, config: StoryConfig = CONFIG, first: StoryModel | None = None
          ) -> tuple[list[list[float]], list[int]]:
    """Teacher-forced (features, label) pairs of one day. An unlabelled article starts its own
    story, or with ``first`` (a model of a first round) joins the story that model picks, so the
    stories met are as mixed as those the model meets when it runs."""
    sa = LearnedStoryAssigner(config)
    story_of_gold: dict[str, str] = {}
    gold_of_story: dict[str, str] = {}
    xs: list[list[float]] = []
    ys: list[int] = []

    def teacher(f: StoryFeatures, scored: list[tuple[StoryState, list[float]]]) -> StoryState | None:
        g = day.label.get(f.ref)
        if g is None:
            if first is None:
                return None
            best, best_p = None, first.threshold
            for st, x in scored:  # (story-id order: the first of equal P wins)
                p = first.probability(x)
                if p >= best_p and (best is None or p > best_p):
                    best, best_p = st, p
            return best
        for st, x in scored:
            sg = gold_of_story.get(st.story_id)
            if sg is not None:
                xs.append(x)
                ys.append(int(sg == g))
        sid = story_of_gold.get(g)
        return sa.stories.get(sid) if sid is not None else None

    sa.teacher = teacher
    for r, f in zip(day.records, day.features, strict=True):
        a = sa.assign(f, duplicate_of=duplicate_of(r))
        g = day.label.get(f.ref)
        if g is not None and a.new_story and g not in story_of_gold:
            story_of_gold[g] = a.story_id
            gold_of_story[a.story_id] = g
    return xs, ys


def fit(days: Sequence[Day], config: StoryConfig = CONFIG, c: float = 1.0, rounds: int = 2) -> StoryModel:
    """The logistic pair model of the pairs of ``days`` (threshold 0.5: see :func:`train`);
    each round after the first places the unlabelled articles with the previous round's model."""
    model = None
    for _ in range(rounds):
        model = _fit_round(days, config, c, model)
    assert model is not None
    return model


def _fit_round(days: Sequence[Day], config: StoryConfig, c: float, first: StoryModel | None) -> StoryModel:
    xs: list[list[float]] = []
    ys: list[int] = []
    ws: list[float] = []
    for d in days:
        x, y = pairs(d, config, first)
        xs += x
        ys += y
        ws += [d.weight] * len(y)
    return logistic(xs, ys, ws, c, tuple(d.name for d in days))


def logistic(xs: list[list[float]], ys: list[int], ws: list[float], c: float,
             trained_on: tuple[str, ...]) -> StoryModel:
    """A scikit-learn logistic regression on the standardized features, folded back to
    raw-feature coefficients (threshold 0.5)."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    x_arr = np.asarray(xs, dtype=float)
    mean = x_arr.mean(axis=0)
    scale = x_arr.std(axis=0)
    scale[scale == 0] = 1.0
    lr = LogisticRegression(C=c, max_iter=2000)
    lr.fit((x_arr - mean) / scale, np.asarray(ys), sample_weight=np.asarray(ws))
    w = lr.coef_[0] / scale
    b = float(lr.intercept_[0] - (w * mean).sum())
    return StoryModel(tuple(float(v) for v in w), b, 0.5, trained_on=trained_on)


def replay_day(day: Day, sa: StoryAssigner) -> dict[str, str]:
    """Story id per labelled link (url, canonical url, guid) after replaying the day's articles
    through ``sa`` in the flow's order."""
    story: dict[str, str] = {}
    for r, f in zip(day.records, day.features, strict=True):
        a = sa.assign(f, duplicate_of=duplicate_of(r))
        for k in (r.get("url"), r.get("canonical_url"), r.get("guid")):
            if k and k not in story:
                story[k] = a.story_id
    return story


def assign(day: Day, model: StoryModel, config: StoryConfig = CONFIG) -> dict[str, str]:
    """Story id per labelled link after replaying the day's story step with ``model``."""
    sa = LearnedStoryAssigner(config, model=model)
    return replay_day(day, sa)


def score(day: Day, story: dict[str, str]) -> dict:
    gold = {g["id"]: g["story"] for g in day.gold_rows}
    pred = {g["id"]: story[g["link"]] for g in day.gold_rows}
    return scores(gold, pred)


def objective(s: dict) -> float:
    return (s["bcubed"]["F1"] + s["pairwise"]["F1"]) / 2


def train(days: Sequence[Day], config: StoryConfig = CONFIG, log: bool = False,
          extra: Sequence[Day] = ()) -> StoryModel:
    """Fit on ``days`` (and ``extra``, never scored: UCI); the regularization and the threshold
    by leave-one-day-out inside ``days`` (one day: C = 1, threshold 0.5)."""
    from dataclasses import replace

    if len(days) < 2:
        return fit([*days, *extra], config)
    totals = {(c, t): 0.0 for c in CS for t in THRESHOLDS}
    for d in days:
        for c in CS:
            inner = fit([*(o for o in days if o is not d), *extra], config, c)
            for t in THRESHOLDS:
                s = score(d, assign(d, replace(inner, threshold=t), config))
                totals[c, t] += objective(s)
                if log:
                    print(f"  inner {d.name} C {c} threshold {t}: {json.dumps(s)}", file=sys.stderr)
    best_c, best_t = max(totals, key=lambda ct: (totals[ct], -abs(ct[1] - 0.5), ct[0]))
    return replace(fit([*days, *extra], config, best_c), threshold=best_t)


#: gate thresholds tried (0: the cascade, nothing vetoed)
GATE_THRESHOLDS = (0.0, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5)


def gate_pairs(day: Day, config: StoryConfig = CONFIG) -> tuple[list[list[float]], list[int]]:
    """The cascade's own proposals on one day as (features, label) pairs: the cascade runs in
    the flow's order; each join (or merge) it proposes between a labelled article and a story
    with labelled members gives the pair features and label = the article's gold story is the
    story's most frequent one; the proposal is then followed when right and vetoed when wrong
    (teacher forcing: the stories met are those a perfect gate would leave). A proposal without
    a label is followed."""
    from collections import Counter

    sa = GatedStoryAssigner(config, model=_NEUTRAL)
    gold_of_story: dict[str, Counter[str]] = {}
    xs: list[list[float]] = []
    ys: list[int] = []

    def judge(f: StoryFeatures, st: StoryState, x: list[float]) -> bool:
        g = day.label.get(f.ref)
        c = gold_of_story.get(st.story_id)
        if g is None or not c:
            return True
        y = int(c.most_common(1)[0][0] == g)
        xs.append(x)
        ys.append(y)
        return bool(y)

    sa.judge = judge
    for r, f in zip(day.records, day.features, strict=True):
        a = sa.assign(f, duplicate_of=duplicate_of(r))
        for gone, into in sa.take_merges():
            gold_of_story.setdefault(into, Counter()).update(gold_of_story.pop(gone, Counter()))
        g = day.label.get(f.ref)
        if g is not None:
            gold_of_story.setdefault(a.story_id, Counter())[g] += 1
    return xs, ys


#: a model that accepts everything (the cascade), to collect the proposals with
_NEUTRAL = StoryModel(tuple(0.0 for _ in FEATURES), 0.0, 0.0)


def fit_gate(days: Sequence[Day], config: StoryConfig = CONFIG, c: float = 1.0) -> StoryModel:
    """The gate's pair model of the cascade's proposals on ``days`` (threshold 0.5)."""
    xs: list[list[float]] = []
    ys: list[int] = []
    ws: list[float] = []
    for d in days:
        x, y = gate_pairs(d, config)
        xs += x
        ys += y
        ws += [d.weight] * len(y)
    return logistic(xs, ys, ws, c, tuple(d.name for d in days))


def assign_gate(day: Day, model: StoryModel, config: StoryConfig = CONFIG) -> dict[str, str]:
    """Story id per labelled link after replaying the day's story step with the gated cascade
    (the model's threshold is the gate's)."""
    sa = GatedStoryAssigner(config, model=model)
    return replay_day(day, sa)


def train_gate(days: Sequence[Day], config: StoryConfig = CONFIG, log: bool = False) -> StoryModel:
    """The gate fitted on ``days``, its threshold by leave-one-day-out inside ``days`` (fit on
    the others, replay the day with each threshold of :data:`GATE_THRESHOLDS`, best mean of
    B-cubed F1 and pairwise F1; ties: the lower threshold, the smaller veto)."""
    from dataclasses import replace

    if len(days) < 2:
        return fit_gate(days, config)
    totals = dict.fromkeys(GATE_THRESHOLDS, 0.0)
    for d in days:
        inner = fit_gate([o for o in days if o is not d], config)
        for t in GATE_THRESHOLDS:
            s = score(d, assign_gate(d, replace(inner, threshold=t), config))
            totals[t] += objective(s)
            if log:
                print(f"  inner gate {d.name} threshold {t}: {json.dumps(s)}", file=sys.stderr)
    best_t = max(totals, key=lambda t: (totals[t], -t))
    return replace(fit_gate(days, config), threshold=best_t)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--days", nargs="+", default=sorted(DAYS), choices=sorted(DAYS))
    ap.add_argument("--out", type=Path, default=ROOT / "bench/learned_stories/story_model.json")
    ap.add_argument("--work", type=Path, default=WORK, help="replays of the archives (cache)")
    ap.add_argument("--uci", action="store_true", help="train on UCI May 2014 headlines too")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    days = [load_day(n, args.work) for n in args.days]
    model = train(days, log=args.verbose, extra=[load_uci()] if args.uci else [])
    args.out.write_text(json.dumps(model.to_json(), indent=1) + "\n", encoding="utf-8")
    print(json.dumps({"out": str(args.out), "threshold": model.threshold,
                      "coef": dict(zip(FEATURES, (round(c, 3) for c in model.coef), strict=True)),
                      "intercept": round(model.intercept, 3)}))


if __name__ == "__main__":
    main()
