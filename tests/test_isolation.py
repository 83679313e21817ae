"""Per-item isolation and the output guard."""

from __future__ import annotations

import orjson
from bytewax.operators import StatefulLogic

from newsflow.config import FlowSettings, Settings
from newsflow.flows.isolation import Isolated, isolated
from newsflow.flows.keys import by_key
from newsflow.flows.outputs import output_guard
from newsflow.flows.steps.dedup import DedupLogic
from newsflow.model.messages import Output, ParsedArticle, Tick
from newsflow.runtime.pickling import Batch
from newsflow.wire.contracts import validate
from newsflow.wire.guard import check_record


def test_an_item_that_raises_becomes_a_dead_letter_and_the_step_goes_on() -> None:
    s = Settings()
    logic = isolated("dedup", s, lambda r: DedupLogic(s, r, False))(None)
    assert isinstance(logic, Isolated)
    # buffered until its epoch is complete, then processed with the batch: a dead letter
    assert list(logic.on_item(ParsedArticle("0000:1:00000", "not an article"))[0]) == []  # type: ignore[arg-type]
    out, keep = logic.on_item(Tick(1, 1_772_431_200_000, "p0000"))
    [dl, tick] = out
    assert tick == Tick(1, 1_772_431_200_000)
    assert isinstance(dl, Output) and dl.topic == s.kafka.topics.deadletter and keep is StatefulLogic.RETAIN
    rec = orjson.loads(dl.value)
    validate("deadletter", rec)
    assert (rec["stage"], rec["reason"]) == ("dedup", "internal_error")
    assert rec["detail"].startswith("AttributeError:") and rec["original_b64"]
    out, _ = logic.on_item(Tick(2, 1_772_431_260_000, "p0000"))  # the step goes on
    assert list(out) == [Tick(2, 1_772_431_260_000)]
    # an exception outside the per-item loop (here: an unknown source) is isolated too
    out, _ = logic.on_item(Tick(3, 1_772_431_320_000, "nope"))
    assert [orjson.loads(o.value)["reason"] for o in out] == ["internal_error"]
    assert logic.snapshot() is not None


class _Fails:
    """A step that raises on odd numbers and echoes the others."""

    def on_item(self, value: int) -> tuple[list[int], bool]:
        if value % 2:
            raise ValueError(f"odd {value}")
        return [value], StatefulLogic.RETAIN


def test_a_batch_is_handled_message_by_message_and_one_failure_is_one_dead_letter() -> None:
    logic = Isolated(_Fails(), "stories", "deadletter", 1000)  # type: ignore[arg-type]
    got, keep = logic.on_item(Batch((2, 3, 4)))
    out = list(got)
    assert out[0] == 2 and out[2] == 4 and keep is StatefulLogic.RETAIN
    assert isinstance(out[1], Output) and orjson.loads(out[1].value)["detail"] == "ValueError: odd 3"
    assert list(logic.on_item(6)[0]) == [6]  # a lone message as before


def test_by_key_keeps_each_keys_order_and_sends_lone_messages_bare() -> None:
    got = by_key([("b", 1), ("a", 2), ("b", 3), ("c", 4), ("b", 5)])
    assert got == [("b", Batch((1, 3, 5))), ("a", 2), ("c", 4)]
    assert by_key([]) == []


def test_the_guard_cuts_long_articles_and_refuses_invalid_records() -> None:
    rec = {"schema": "articles", "body_html": "<p>" + "x" * 50_000 + "</p>", "body_text": "y" * 50_000}
    c = check_record("articles", orjson.dumps(rec), max_bytes=20_000, validate_schema=False)
    assert c.value is not None and len(c.value) <= 20_000 and orjson.loads(c.value)["truncated"] is True
    c = check_record("digests", b'{"x":"' + b"z" * 30_000 + b'"}', max_bytes=20_000, validate_schema=False)
    assert c.value is None and c.reason == "record_too_large"
    c = check_record("feed-health", orjson.dumps({"schema": "feed-health", "language": 5}), max_bytes=10**6,
                     validate_schema=True)
    assert c.value is None and c.reason == "schema_violation"


def test_output_guard_turns_a_violation_into_a_sink_dead_letter() -> None:
    s = Settings(flow=FlowSettings(validate_outputs=True))
    bad = Output(s.kafka.topics.feed_health, b"k", orjson.dumps({"schema": "feed-health", "status": "???"}))
    [dl] = output_guard(s)(bad)
    rec = orjson.loads(dl.value)
    assert dl.topic == s.kafka.topics.deadletter and (rec["stage"], rec["reason"]) == ("sink", "schema_violation")
    validate("deadletter", rec)
    assert output_guard(Settings())(bad) == [bad]  # off by default: only the size is checked
