"""``newsflow tail`` on a REAL Kafka broker (the session broker of tests/kafka_fixture.py)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from newsflow.cli.main import main as cli_main
from newsflow.cli.main import run_file_flow
from newsflow.connectors.files import write_archive
from newsflow.connectors.topics import produce_values
from newsflow.digest.render import to_markdown
from newsflow.samples.demo import demo_payloads

pytestmark = pytest.mark.kafka


@pytest.fixture(scope="module")
def demo_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("tail")
    write_archive(demo_payloads(), d / "raw.jsonl")
    run_file_flow(str(d / "raw.jsonl"), str(d / "out"))
    return d / "out"


def lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines()


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    assert produce_values([bootstrap], topic, values, key_field=False) == len(values)


def test_tail_from_beginning_as_json_lines(kafka_bootstrap: str, kafka_topic_factory: Callable[..., str],
                                           demo_out: Path, capsys: pytest.CaptureFixture[str]) -> None:
    topic = kafka_topic_factory("articles", partitions=1)
    values = lines(demo_out / "articles.jsonl")
    produce(kafka_bootstrap, topic, values)
    assert cli_main(["tail", topic, "--brokers", kafka_bootstrap, "--from-beginning", "--timeout", "3"]) == 0
    got = capsys.readouterr().out.splitlines()
    assert [orjson.loads(x) for x in got] == [orjson.loads(v) for v in values]

    # --max stops early, without waiting for the timeout
    t0 = time.monotonic()
    assert cli_main(["tail", topic, "--brokers", kafka_bootstrap, "--from-beginning", "--max", "3"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 3
    assert time.monotonic() - t0 < 15


def test_tail_story_filter(kafka_bootstrap: str, kafka_topic_factory: Callable[..., str], demo_out: Path,
                           capsys: pytest.CaptureFixture[str]) -> None:
    topic = kafka_topic_factory("articles", partitions=3)
    values = lines(demo_out / "articles.jsonl")
    produce(kafka_bootstrap, topic, values)
    sizes = Counter(orjson.loads(v)["story_id"] for v in values)
    story, n = sizes.most_common(1)[0]
    assert n > 1
    assert cli_main(["tail", topic, "--brokers", kafka_bootstrap, "--from-beginning", "--timeout", "3",
                     "--story", story]) == 0
    got = [orjson.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert len(got) == n and {g["story_id"] for g in got} == {story}


def test_tail_digests_as_markdown(kafka_bootstrap: str, kafka_topic_factory: Callable[..., str], demo_out: Path,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    topic = kafka_topic_factory("digests")
    values = lines(demo_out / "digests.jsonl")
    produce(kafka_bootstrap, topic, values)
    assert cli_main(["tail", topic, "--brokers", kafka_bootstrap, "--from-beginning", "--format", "md",
                     "--max", "2"]) == 0
    out = capsys.readouterr().out
    first, second = (orjson.loads(v) for v in values[:2])
    assert out == to_markdown(first).rstrip() + "\n\n---\n" + to_markdown(second).rstrip() + "\n\n---\n"


def test_tail_follows_new_records_only_by_default(kafka_bootstrap: str, kafka_topic_factory: Callable[..., str],
                                                  demo_out: Path) -> None:
    topic = kafka_topic_factory("articles")
    values = lines(demo_out / "articles.jsonl")
    produce(kafka_bootstrap, topic, values[:5])  # already there: not shown without --from-beginning
    proc = subprocess.Popen([sys.executable, "-m", "newsflow.cli.main", "tail", topic, "--brokers", kafka_bootstrap,
                             "--max", "2", "--timeout", "30"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stderr is not None
        ready = proc.stderr.readline().decode()  # printed once the partitions are assigned
        assert ready.startswith(f"tailing {topic}")
        produce(kafka_bootstrap, topic, values[5:7])
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0
    assert [orjson.loads(x) for x in out.splitlines()] == [orjson.loads(v) for v in values[5:7]]


def test_tail_errors_are_one_line(kafka_bootstrap: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["tail", "no-such-topic-here", "--brokers", kafka_bootstrap, "--connect-timeout", "10"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: no topic 'no-such-topic-here'")

    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "newsflow.cli.main", "tail", "articles", "--brokers",
                           "127.0.0.1:1", "--connect-timeout", "2"], capture_output=True, timeout=60)
    assert proc.returncode == 2
    err = proc.stderr.decode().strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: Kafka at 127.0.0.1:1 did not answer within 2 s"), err
    assert time.monotonic() - t0 < 20


@pytest.mark.parametrize("name", ["stories", "feed-health"])
def test_tail_stories_and_feed_health_as_markdown(name: str, kafka_bootstrap: str,
                                                  kafka_topic_factory: Callable[..., str], demo_out: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from newsflow.cli.tail import feed_health_line, story_block
    from newsflow.digest.render import md_escape

    topic = kafka_topic_factory(name)
    values = lines(demo_out / f"{name}.jsonl")[:5]
    assert len(values) == 5
    produce(kafka_bootstrap, topic, values)
    assert cli_main(["tail", topic, "--brokers", kafka_bootstrap, "--from-beginning", "--format", "md",
                     "--max", "5"]) == 0
    out = capsys.readouterr().out
    assert "```" not in out and '"schema"' not in out, out
    recs = [orjson.loads(v) for v in values]
    if name == "stories":
        assert out == "".join(story_block(r) + "\n" for r in recs)
        assert all(f"#### {r['label'][:20]}" in out and f"story `{r['story_id']}`" in out for r in recs), out
    else:
        assert out.splitlines() == [feed_health_line(r) for r in recs]
        shown = [r["status"] if r["status"] == "ok" else f"**{r['status']}**" for r in recs]
        assert all(x.startswith(f"- {md_escape(r['feed_id'])}: {st} at {r['at']} ({r['source']}) — HTTP ")
                   for x, r, st in zip(out.splitlines(), recs, shown, strict=True)), out
