"""End to end on a REAL Kafka broker: raw payloads -> feeds.raw -> the flow -> output topics.

The broker comes from the session fixture (started by the project's own script, or
``KAFKA_BOOTSTRAP``). The Kafka run must produce exactly the records the file-mode run does.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import orjson
import pytest

from newsflow.cli.main import main as cli_main
from newsflow.cli.main import run_file_flow
from newsflow.config import FlowSettings, KafkaSettings, Settings, Topics
from newsflow.connectors.files import write_archive
from newsflow.connectors.topics import ensure_topics, produce_values
from newsflow.samples.demo import demo_payloads
from newsflow.wire.codec import encode_raw
from newsflow.wire.contracts import validate
from tests.kafka_fixture import consume_all

pytestmark = pytest.mark.kafka


def test_kafka_end_to_end_matches_file_mode(kafka_bootstrap: str, tmp_path: Path) -> None:
    suffix = uuid.uuid4().hex[:8]
    topics = Topics(**{r: f"{n}.{suffix}" for r, n in Topics().roles().items()})
    settings = Settings(kafka=KafkaSettings(topics=topics))
    brokers = [kafka_bootstrap]
    ensure_topics(brokers, settings)
    from confluent_kafka.admin import AdminClient, ConfigResource

    res = ConfigResource(ConfigResource.Type.TOPIC, topics.stories)
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})  # kept alive until the result
    conf = admin.describe_configs([res])[res].result(30)
    assert conf["cleanup.policy"].value == "compact,delete"  # the latest record per story is its state
    payloads = demo_payloads()
    values = [encode_raw(p)[1] for p in payloads]
    assert produce_values(brokers, topics.raw, values) == len(values)

    # exactly the command docker-compose.yml runs for the flow (plus --until-eof to finish)
    cfg = tmp_path / "settings.toml"
    cfg.write_text("[kafka.topics]\n" + "".join(
        f'{name} = "{getattr(topics, name)}"\n'
        for name in ("raw", "articles", "digests", "feed_health", "deadletter", "stories")))
    assert cli_main(["run", "--brokers", kafka_bootstrap, "--config", str(cfg), "--until-eof"]) == 0

    msgs_of = {name: consume_all(kafka_bootstrap, getattr(topics, attr)) for name, attr in
               (("articles", "articles"), ("digests", "digests"), ("feed-health", "feed_health"), ("deadletter", "deadletter"),
                ("stories", "stories"))}
    for name, msgs in msgs_of.items():  # the contract's headers on every message
        assert all(dict(m.headers() or []) == {"schema": name.encode(), "schema_version": b"1",
                                               "content-type": b"application/json"} for m in msgs), name
    got = {name: [(m.key(), m.value()) for m in msgs] for name, msgs in msgs_of.items()}
    for name, msgs in got.items():
        assert msgs, name
        for key, value in msgs:
            validate(name, value)
            rec = orjson.loads(value)
            expected_key = {"articles": rec.get("key"), "digests": rec.get("digest_id"),
                            "feed-health": f"{rec.get('source')}:{rec.get('feed_id')}", "deadletter": rec.get("dl_id"),
                            "stories": rec.get("story_id")}[name]
            assert key == expected_key.encode()  # the documented idempotent message key
    arts = [orjson.loads(v) for _, v in got["articles"]]
    disp = {d: sum(a["disposition"] == d for a in arts) for d in ("unique", "exact_duplicate", "revision")}
    assert disp["unique"] >= 8 and disp["exact_duplicate"] >= 5 and disp["revision"] >= 1
    assert {orjson.loads(v)["reason"] for _, v in got["deadletter"]} >= {"html_instead_of_feed", "no_title_no_body"}

    # the same input through file mode gives the very same records
    archive = tmp_path / "raw.jsonl"
    write_archive(payloads, archive)
    run_file_flow(str(archive), str(tmp_path / "out"),
                  Settings(flow=FlowSettings(file_partitions=1)))  # one partition, as the topic has
    stories = got.pop("stories")
    for name, msgs in got.items():
        file_lines = (tmp_path / "out" / f"{name}.jsonl").read_bytes().splitlines()
        assert sorted(v for _, v in msgs) == sorted(file_lines), name
    # stories are coalesced per tick (Kafka mode ticks every live_tick_ms): the compacted view,
    # each story's latest record, has the same members, publishers and lead as in file mode
    def latest(values: list[bytes]) -> dict[str, tuple[object, ...]]:
        out: dict[str, tuple[object, ...]] = {}
        for v in values:
            r = orjson.loads(v)
            out[r["story_id"]] = (r["members"], r["publishers"], r["tiers"], r["lead"], r["first_seen"], r["last_seen"])
        return out

    file_stories = (tmp_path / "out" / "stories.jsonl").read_bytes().splitlines()
    assert latest([v for _, v in stories]) == latest(file_stories)
    assert any(len(v[0]) >= 3 and len(v[1]) >= 2 for v in latest(file_stories).values())  # real multi-outlet stories


def test_run_snapshots_at_the_configured_epoch(kafka_bootstrap: str, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """``newsflow run`` gives Bytewax ``flow.epoch_seconds`` (how often state is snapshotted);
    it used to give nothing, and Bytewax's own 10 s applied whatever the configuration said."""
    from datetime import timedelta

    import bytewax.run as bw

    suffix = uuid.uuid4().hex[:8]
    cfg = tmp_path / "settings.toml"
    cfg.write_text("[flow]\nepoch_seconds = 2.5\n[kafka.topics]\n" + "".join(
        f'{role} = "{name}.{suffix}"\n' for role, name in Topics().roles().items()))
    seen: dict[str, object] = {}
    monkeypatch.setattr(bw, "cli_main", lambda flow, **kw: seen.update(kw))
    assert cli_main(["run", "--brokers", kafka_bootstrap, "--config", str(cfg), "--until-eof",
                     "--metrics-port", "0"]) == 0
    assert seen["epoch_interval"] == timedelta(seconds=2.5)
