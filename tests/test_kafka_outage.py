"""No silent loss on a broker outage: a real broker is stopped for longer than the producer's
``message.timeout.ms`` while the flow has output for it; the flow must exit non-zero before it
commits the epoch, and a run resumed from the recovery directory must emit every record.

The flow reads ``feeds.raw`` from the session broker and writes its outputs to a dedicated broker
(its own data dir, fixed ports) that this test stops and restarts on the same dir and ports, so
the outage hits exactly the output side while input keeps arriving, and other tests are unaffected.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import orjson
import pytest
from kafka_local import KafkaBroker

from newsflow.cli.main import run_file_flow
from newsflow.config import FlowSettings, Settings
from newsflow.connectors.files import write_archive
from newsflow.connectors.topics import create_topics, produce_values
from newsflow.samples.demo import demo_payloads
from newsflow.wire.codec import encode_raw
from tests.kafka_fixture import consume_all

pytestmark = pytest.mark.kafka

FLOW = """
import json, sys
from datetime import timedelta
from bytewax.run import cli_main
from bytewax.dataflow import Dataflow
from bytewax.recovery import RecoveryConfig
from newsflow.config import KafkaSettings, Settings, Topics
from newsflow.connectors.kafka import kafka_outputs, kafka_raw_input
from newsflow.flows.pipeline import newsflow_steps

cfg = json.loads(sys.argv[1])
settings = Settings(kafka=KafkaSettings(topics=Topics(**cfg["topics"])))
flow = Dataflow("newsflow_kafka")
keyed, parts = kafka_raw_input(flow, [cfg["in"]], settings, tail=cfg["tail"])
outs = newsflow_steps(keyed, settings, recovery=True, partitions=parts)
kafka_outputs(outs, [cfg["out"]], settings, add_config={"message.timeout.ms": "5000"})
cli_main(flow, epoch_interval=timedelta(seconds=1), recovery_config=RecoveryConfig(cfg["recovery"]))
"""

OUT_TOPICS = ("articles", "digests", "feed_health", "deadletter")


def _start_flow(cfg: dict, tail: bool, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen([sys.executable, "-c", FLOW, json.dumps({**cfg, "tail": tail})],
                            stdout=log.open("wb"), stderr=subprocess.STDOUT, env=env)


def _count(bootstrap: str, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe"})
    try:
        low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=5)
        return high - low
    finally:
        c.close()


def test_broker_outage_fails_the_epoch_and_resume_emits_everything(kafka_bootstrap: str, tmp_path: Path) -> None:
    from bytewax.recovery import init_db_dir

    suffix = uuid.uuid4().hex[:8]
    topics = {"raw": f"feeds.raw.{suffix}", **{n: f"{n}.{suffix}" for n in OUT_TOPICS}}
    payloads = demo_payloads()
    values = [encode_raw(p)[1] for p in payloads]
    create_topics(kafka_bootstrap, [topics["raw"]])

    out_broker = KafkaBroker(data_dir=tmp_path / "broker")
    out_broker.start()
    try:
        out = out_broker.bootstrap
        create_topics(out, [topics[n] for n in OUT_TOPICS])
        rec = tmp_path / "recovery"
        rec.mkdir()
        init_db_dir(rec, 1)
        cfg = {"in": kafka_bootstrap, "out": out, "topics": topics, "recovery": str(rec)}

        # 1. the flow runs and delivers the first part of the input
        produce_values([kafka_bootstrap], topics["raw"], values[:40])
        flow = _start_flow(cfg, tail=True, log=tmp_path / "run1.log")
        deadline = time.monotonic() + 60
        while _count(out, topics["articles"]) == 0:
            assert flow.poll() is None, (tmp_path / "run1.log").read_text()
            assert time.monotonic() < deadline, "no output from the first run"
            time.sleep(0.5)

        # 2. the output broker goes away; more input arrives: its output can't be delivered
        t_stop = time.monotonic()  # the outage starts when the broker starts shutting down
        out_broker.stop(remove_data=False)
        produce_values([kafka_bootstrap], topics["raw"], values[40:])
        try:
            rc = flow.wait(90)
        except subprocess.TimeoutExpired:
            flow.kill()
            raise
        log1 = (tmp_path / "run1.log").read_text(errors="replace")
        assert rc != 0, log1
        assert "KafkaDeliveryFailed" in log1 and "epoch is not committed" in log1, log1[-3000:]
        # the outage outlasted message.timeout.ms (5 s): a message's clock starts when it is
        # produced, and the flow was still producing the first part's output when the broker
        # stopped, so allow those in flight a second; a failure without the timeout comes at once
        assert time.monotonic() - t_stop >= 4

        # 3. the broker comes back on the same dir and ports; resume from recovery to the end
        out_broker = KafkaBroker(port=out_broker.port, controller_port=out_broker.controller_port,
                                 data_dir=tmp_path / "broker")
        out_broker.start()
        flow = _start_flow(cfg, tail=False, log=tmp_path / "run2.log")
        assert flow.wait(120) == 0, (tmp_path / "run2.log").read_text(errors="replace")[-3000:]

        got = {n: {m.value() for m in consume_all(out, topics[n])} for n in OUT_TOPICS}
    finally:
        out_broker.stop(remove_data=True)

    # every record a single uninterrupted run produces is on the output topics (a run with
    # recovery, as this one: the end of its input is a pause, the windows still open are not
    # drafted in progress at the end)
    archive = tmp_path / "raw.jsonl"
    write_archive(payloads, archive)
    run_file_flow(str(archive), str(tmp_path / "once"),
                  Settings(flow=FlowSettings(file_partitions=1)),  # one partition, as the topic has
                  recovery_dir=str(tmp_path / "once-recovery"))
    for n in OUT_TOPICS:
        lines = (tmp_path / "once" / f"{n.replace('_', '-')}.jsonl").read_bytes().splitlines()
        assert lines, n
        missing = set(lines) - got[n]
        assert not missing, (n, len(missing), [orjson.loads(x).get("key") for x in list(missing)[:5]])
