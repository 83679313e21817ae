"""Does a static sentence embedding (wordllama, 256-d) add signal to the story decision?

    .venv/bin/pip install wordllama   # not a project dependency: this script measures it
    .venv/bin/python bench/wordllama_signal.py

The cascade's own join proposals on each labelled real day (``train_story_model.gate_pairs``:
the pairs the learned gate judges, labelled by the gold stories) get one more feature, the
cosine of the article's embedding (title + summary lead) with the sum of the story's members'
embeddings. Leave-one-day-out: a logistic model is fitted on the other days' pairs with the
gate's features, and with the gate's features plus the embedding cosine, and both are scored on
the day left out (ROC AUC, and the share of the cascade's false joins vetoed at the threshold
that keeps 98 % of its right joins, chosen on the training days). Also printed: the embedding's
CPU cost per article, one at a time (as a story step would call it) and in batches of 256.

The embedding model loads from the wheel's own folder, without the network
(``WordLlama.load(cache_dir=<package folder>, disable_download=True)``).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import train_story_model as tsm
from learned_stories.story_gate import GatedStoryAssigner

KEEP_RIGHT = 0.98  # the veto threshold keeps this share of the cascade's right joins


def load_wordllama():
    import wordllama
    from wordllama import WordLlama

    return WordLlama.load(cache_dir=os.path.dirname(wordllama.__file__), disable_download=True)


def text_of(rec: dict) -> str:
    body = (rec.get("body_text") or "")[:300]
    return f"{rec['title']}. {body}" if body else rec["title"]


def embeddings(wl, day: tsm.Day) -> dict[str, np.ndarray]:
    texts = [text_of(r) for r in day.records]
    e = np.asarray(wl.embed(texts, norm=True), dtype=np.float64)
    return {f.ref: e[i] for i, f in enumerate(day.features)}


def proposals(day: tsm.Day, emb: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(gate features, embedding cosine, label) of every labelled join the cascade proposes."""
    sa = GatedStoryAssigner(tsm.TUNED, model=tsm._NEUTRAL)
    gold_of_story: dict[str, Counter[str]] = {}
    emb_sum: dict[str, np.ndarray] = {}
    xs: list[list[float]] = []
    cs: list[float] = []
    ys: list[int] = []

    def judge(f, st, x) -> bool:
        g = day.label.get(f.ref)
        c = gold_of_story.get(st.story_id)
        s = emb_sum.get(st.story_id)
        if g is None or not c or s is None:
            return True
        y = int(c.most_common(1)[0][0] == g)
        n = float(np.linalg.norm(s))
        xs.append(x)
        cs.append(float(emb[f.ref] @ s) / n if n else 0.0)
        ys.append(y)
        return bool(y)

    sa.judge = judge
    for r, f in zip(day.records, day.features, strict=True):
        a = sa.assign(f, duplicate_of=tsm.duplicate_of(r))
        for gone, into in sa.take_merges():
            gold_of_story.setdefault(into, Counter()).update(gold_of_story.pop(gone, Counter()))
            if gone in emb_sum:
                emb_sum[into] = emb_sum.get(into, 0) + emb_sum.pop(gone)
        emb_sum[a.story_id] = emb_sum.get(a.story_id, 0) + emb[f.ref]
        g = day.label.get(f.ref)
        if g is not None:
            gold_of_story.setdefault(a.story_id, Counter())[g] += 1
    return np.asarray(xs), np.asarray(cs)[:, None], np.asarray(ys)


def fit_score(train: list[tuple[np.ndarray, np.ndarray]], test: tuple[np.ndarray, np.ndarray]) -> dict:
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    x = np.vstack([t[0] for t in train])
    y = np.concatenate([t[1] for t in train])
    m = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000)).fit(x, y)
    p_train = m.predict_proba(x)[:, 1]
    t = float(np.quantile(p_train[y == 1], 1 - KEEP_RIGHT))
    p = m.predict_proba(test[0])[:, 1]
    yt = test[1]
    return {"auc": round(float(roc_auc_score(yt, p)), 3),
            "false_vetoed": round(float((p[yt == 0] < t).mean()), 3),
            "right_kept": round(float((p[yt == 1] >= t).mean()), 3)}


def main() -> None:
    wl = load_wordllama()
    days = {name: tsm.load_day(name) for name in tsm.DAYS}
    data = {}
    for name, day in days.items():
        emb = embeddings(wl, day)
        x, c, y = proposals(day, emb)
        data[name] = (x, c, y)
        print(json.dumps({"day": name, "proposals": len(y), "false_joins": int((y == 0).sum())}))
    rows = []
    for name in days:
        others = [o for o in days if o != name]
        base = fit_score([(data[o][0], data[o][2]) for o in others], (data[name][0], data[name][2]))
        plus = fit_score([(np.hstack([data[o][0], data[o][1]]), data[o][2]) for o in others],
                         (np.hstack([data[name][0], data[name][1]]), data[name][2]))
        rows.append((name, base, plus))
        print(json.dumps({"day": name, "gate_features": base, "plus_wordllama": plus}))
    sample = [text_of(r) for r in days[next(iter(days))].records][:2000]
    t0 = time.process_time()
    for s in sample[:500]:
        wl.embed([s], norm=True)
    one = (time.process_time() - t0) / 500 * 1000
    t0 = time.process_time()
    for i in range(0, len(sample), 256):
        wl.embed(sample[i:i + 256], norm=True)
    batch = (time.process_time() - t0) / len(sample) * 1000
    print(json.dumps({"embed_ms_per_article": {"one_at_a_time": round(one, 3), "batch_256": round(batch, 3)}}))
    print("\n| day left out | AUC: gate features | AUC: + wordllama | false joins vetoed (right kept): gate | + wordllama |")
    print("|---|---:|---:|---:|---:|")
    for name, b, p in rows:
        print(f"| {name} | {b['auc']} | {p['auc']} | {b['false_vetoed']} ({b['right_kept']}) "
              f"| {p['false_vetoed']} ({p['right_kept']}) |")


if __name__ == "__main__":
    main()
