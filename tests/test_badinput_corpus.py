"""The bad-input corpus (tests/badinput.py, >= 50 generated cases) through the whole flow, in
file mode in one run and on the real Kafka broker: the flow exits 0, every good payload around
the bad ones gives its articles, every bad case ends as a dead letter with a reason (or, for
odd-but-valid feeds, as bounded articles), nothing leaks, every record validates."""

from __future__ import annotations

import base64
import os
import resource
import subprocess
import sys
import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

import orjson
import pytest

from newsflow.wire.contracts import validate
from tests.badinput import Case, corpus

ROOT = Path(__file__).resolve().parents[1]
TOPICS = ("articles", "digests", "feed-health", "deadletter")


def _case_of(rec: dict[str, Any], names: list[str]) -> str | None:
    fid = rec.get("feed_id")
    if fid in names:
        return fid
    orig = base64.b64decode(rec.get("original_b64", ""))[:4096]
    return next((n for n in names if n.encode() in orig), None)


def check_outcomes(cases: list[Case], n_good: int, out: dict[str, list[bytes]]) -> dict[str, str]:
    for topic, lines in out.items():
        for line in lines:
            validate(topic, line)
    names = [c.name for c in cases]
    dls, arts = defaultdict(set), defaultdict(int)
    for line in out["deadletter"]:
        rec = orjson.loads(line)
        assert rec["reason"], rec
        assert b"root:x:0:0" not in base64.b64decode(rec["original_b64"]), rec["reason"]  # nothing leaks
        name = _case_of(rec, names)
        if name:
            dls[name].add(rec["reason"])
    for line in out["articles"]:
        rec = orjson.loads(line)
        arts[rec["feed_id"]] += 1
        assert "root:x:0:0" not in rec["title"] + rec["body_text"]
    # the good payloads around every bad case: 2 articles each
    assert sum(v for k, v in arts.items() if k.startswith("good-")) == 2 * n_good
    outcome = {}
    for c in cases:
        got = dls.get(c.name, set())
        if c.reasons and c.articles is False:  # None: articles or a dead letter
            assert got & c.reasons, (c.name, got, arts.get(c.name))
        if c.articles is True:
            assert arts.get(c.name), (c.name, got)
        assert got or arts.get(c.name), c.name  # every case ends somewhere
        outcome[c.name] = ", ".join(sorted(got)) + (f" + {arts[c.name]} articles" if arts.get(c.name) else "")
    return outcome


@pytest.fixture(scope="module")
def bad_corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[bytes], list[Case]]:
    d = tmp_path_factory.mktemp("bad")
    lines, cases = corpus(d)
    assert len(cases) >= 50
    archive = d / "bad.feeds.raw.jsonl"
    archive.write_bytes(b"\n".join(lines) + b"\n")
    return archive, lines, cases


def test_file_mode_one_run(bad_corpus: tuple[Path, list[bytes], list[Case]], tmp_path: Path) -> None:
    archive, _, cases = bad_corpus
    out_dir = tmp_path / "out"
    t0 = time.perf_counter()
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    p = subprocess.run([sys.executable, "-m", "newsflow.cli.main", "demo", "--input", str(archive), "--out",
                        str(out_dir)], cwd=ROOT, capture_output=True, timeout=600, env={**os.environ})
    dt = time.perf_counter() - t0
    rss_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    assert p.returncode == 0, p.stderr.decode()[-3000:]
    out = {t: (out_dir / f"{t}.jsonl").read_bytes().splitlines() for t in TOPICS}
    outcome = check_outcomes(cases, len(cases) + 1, out)
    print(f"\n{len(cases)} bad cases + {len(cases) + 1} good payloads: {dt:.1f} s, peak RSS {rss_mb:.0f} MB"
          f" (before: {before / 1024:.0f} MB)")
    for k, v in outcome.items():
        print(f"  {k:40s} {v}")
    assert rss_mb < 1024, rss_mb


@pytest.mark.kafka
def test_kafka_one_run(bad_corpus: tuple[Path, list[bytes], list[Case]], kafka_bootstrap: str,
                       tmp_path: Path) -> None:
    from newsflow.cli.main import main as cli_main
    from newsflow.config import KafkaSettings, Settings, Topics
    from newsflow.connectors.topics import ensure_topics, produce_values
    from tests.kafka_fixture import consume_all

    _, _, cases = bad_corpus
    kcases = [c for c in cases if c.kafka]  # larger lines cannot be on a topic with the 1 MB default
    from tests.badinput import good
    lines = [good(0)]
    for i, c in enumerate(kcases):
        lines += [c.line, good(i + 1)]
    suffix = uuid.uuid4().hex[:8]
    topics = Topics(**{r: f"{n}.{suffix}" for r, n in Topics().roles().items()})
    ensure_topics([kafka_bootstrap], Settings(kafka=KafkaSettings(topics=topics)))
    assert produce_values([kafka_bootstrap], topics.raw, lines) == len(lines)
    cfg = tmp_path / "settings.toml"
    cfg.write_text("[kafka.topics]\n" + "".join(
        f'{name} = "{getattr(topics, name)}"\n' for name in ("raw", "articles", "digests", "feed_health", "deadletter")))
    assert cli_main(["run", "--brokers", kafka_bootstrap, "--config", str(cfg), "--until-eof"]) == 0
    out = {name: [m.value() for m in consume_all(kafka_bootstrap, getattr(topics, attr))] for name, attr in
           (("articles", "articles"), ("digests", "digests"), ("feed-health", "feed_health"),
            ("deadletter", "deadletter"))}
    check_outcomes(kcases, len(kcases) + 1, out)
    assert len(kcases) >= 45
