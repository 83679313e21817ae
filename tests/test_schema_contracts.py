"""The published topic schemas against what the code writes.

* Every dead-letter ``stage`` the code can emit is in ``deadletter.v1.json``'s enum, and every
  ``reason`` code it can emit is listed in the schema's ``reason`` description: both are found
  by a static scan of ``newsflow/`` (the calls that name a stage or a reason), so a new stage or
  reason without a schema update fails here, not at a consumer.
* Every field a digest carries is documented in ``digests.v1.json`` (``feed_health`` included),
  and the records of a real replay validate against it.
"""

from __future__ import annotations

import ast
import importlib
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson
import pytest

from newsflow.core.timeutil import HOUR_MS, ms_to_iso
from newsflow.digest.assemble import assemble_digest
from newsflow.digest.health import FeedHealthAccumulator
from newsflow.flows.isolation import internal_error
from newsflow.wire.contracts import SCHEMA_DIR, validate
from tests.test_digest import START, WIN, rec, standard_records

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "newsflow"

# ----------------------------------------------------------------------------- static scan

#: callee name -> index of its ``stage`` argument: the calls that decide a dead letter's stage
STAGE_ARG = {"make_deadletter": 0, "internal_error": 0, "isolated": 0, "Isolated": 1}
#: callee name -> index of its ``reason`` argument: dead letters, and the errors / checks whose
#: ``reason`` becomes one (``e.reason`` / ``c.reason`` is passed on to ``make_deadletter``)
REASON_ARG = {"make_deadletter": 1, "_dl": 1, "_bad": 1, "_ref_error": 1, "EnvelopeError": 1,
              "BodyRefError": 1, "InteractionError": 0, "Checked": 1}
#: stage expressions that only pass on a stage named elsewhere (a parameter, a field of a
#: dead letter being re-stamped): anything else that is not a literal or a module constant is
#: an unknown source and fails the test (teach the scan about it)
PASS_THROUGH_STAGES = {"stage", "self.stage", "d.stage", "dl.stage"}


def _modules() -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("")
        name = ".".join(rel.parts).removesuffix(".__init__")
        yield name, ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _callee(call: ast.Call) -> str:
    f = call.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""


def _arg(call: ast.Call, index: int, keyword: str) -> ast.expr | None:
    for kw in call.keywords:
        if kw.arg == keyword:
            return kw.value
    return call.args[index] if len(call.args) > index else None


def _strings(module: str, node: ast.expr) -> tuple[set[str], set[str]]:
    """(the string values ``node`` can have, the parts that are not resolvable statically):
    literals, ``a or "b"``, ``x if c else "y"``, and module-level constants (imported too)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}, set()
    if isinstance(node, ast.BoolOp | ast.IfExp):
        parts = node.values if isinstance(node, ast.BoolOp) else [node.body, node.orelse]
        vals: set[str] = set()
        dyn: set[str] = set()
        for p in parts:
            v, d = _strings(module, p)
            vals |= v
            dyn |= d
        return vals, dyn
    if isinstance(node, ast.Name):
        value = getattr(importlib.import_module(module), node.id, None)
        if isinstance(value, str):
            return {value}, set()
    return set(), {ast.unparse(node)}


def _scan() -> tuple[dict[str, set[str]], dict[str, set[str]], set[str]]:
    """stage -> where, reason -> where, and the unresolved stage expressions (with where)."""
    stages: dict[str, set[str]] = {}
    reasons: dict[str, set[str]] = {}
    unknown: set[str] = set()
    for module, tree in _modules():
        for node in ast.walk(tree):
            where = f"{module}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Call):
                name = _callee(node)
                if name in STAGE_ARG and (a := _arg(node, STAGE_ARG[name], "stage")) is not None:
                    vals, dyn = _strings(module, a)
                    for v in vals:
                        stages.setdefault(v, set()).add(where)
                    unknown |= {f"{d} ({where})" for d in dyn - PASS_THROUGH_STAGES}
                if name in REASON_ARG and (a := _arg(node, REASON_ARG[name], "reason")) is not None:
                    for v in _strings(module, a)[0]:
                        reasons.setdefault(v, set()).add(where)
            elif isinstance(node, ast.FunctionDef) and node.name in {"__init__", *REASON_ARG}:
                # a default reason: EnvelopeError(msg, reason="bad_envelope")
                args = node.args.args[len(node.args.args) - len(node.args.defaults):]
                for arg, default in zip(args, node.args.defaults, strict=True):
                    if arg.arg == "reason":
                        for v in _strings(module, default)[0]:
                            reasons.setdefault(v, set()).add(where)
            elif isinstance(node, ast.Assign):
                # `status, reason, detail = ..., "html_instead_of_feed", ...` (normalize's parse)
                for target in node.targets:
                    pairs: list[tuple[ast.expr, ast.expr]] = []
                    if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
                        pairs = list(zip(target.elts, node.value.elts, strict=False))
                    else:
                        pairs = [(target, node.value)]
                    for t, v in pairs:
                        if isinstance(t, ast.Name) and t.id == "reason":
                            for s in _strings(module, v)[0]:
                                reasons.setdefault(s, set()).add(where)
    return stages, reasons, unknown


def _schema(name: str) -> dict[str, Any]:
    return orjson.loads((SCHEMA_DIR / name).read_bytes())


def test_the_scan_finds_the_known_stages_and_reasons() -> None:
    """The scan itself works: it finds stages and reasons of every kind of source (literal,
    STEP_* constant, imported constant, isolated(), exception reason, default argument)."""
    stages, reasons, _ = _scan()
    assert {"envelope", "fetch", "parse", "normalize", "dedup", "stories", "digests", "sink",
            "interactions", "profiles", "relevance"} <= set(stages)
    assert {"bad_envelope", "no_items", "html_instead_of_feed", "not_a_feed", "internal_error",
            "future_fetched_at", "schema_violation", "record_too_large", "malformed_interaction",
            "unknown_profile", "body_ref_refused", "impossible_fetched_at", "kafka_error",
            "poison_message"} <= set(reasons)


def test_every_deadletter_stage_the_code_emits_is_in_the_schema() -> None:
    stages, _, unknown = _scan()
    assert not unknown, f"stage expressions the scan cannot resolve: {sorted(unknown)}"
    enum = set(_schema("deadletter.v1.json")["properties"]["stage"]["enum"])
    missing = {s: sorted(w) for s, w in stages.items() if s not in enum}
    assert not missing, f"stages emitted but not in schemas/deadletter.v1.json: {missing}"


def test_every_deadletter_reason_the_code_emits_is_documented() -> None:
    _, reasons, _ = _scan()
    reason = _schema("deadletter.v1.json")["properties"]["reason"]
    text = reason.get("description", "")
    for r in reasons:
        assert re.fullmatch(reason["pattern"], r), r
    missing = {r: sorted(w) for r, w in reasons.items() if not re.search(rf"`{r}`", text)}
    assert not missing, f"reasons emitted but not listed in the reason description: {missing}"


@pytest.mark.parametrize("stage", ["profiles", "relevance", "interactions", "digests"])
def test_an_internal_error_of_every_isolated_step_is_a_valid_deadletter(stage: str) -> None:
    out = internal_error(stage, "deadletter", ValueError("boom"), None, 1000)
    validate("deadletter", out.value)


# ----------------------------------------------------------------------------- digests


def _paths(value: Any, prefix: str = "") -> Iterator[str]:
    if isinstance(value, Mapping):
        for k, v in value.items():
            yield f"{prefix}.{k}"
            yield from _paths(v, f"{prefix}.{k}")
    elif isinstance(value, list):
        for v in value:
            yield from _paths(v, f"{prefix}[]")


def _documented(schema: Mapping[str, Any], prefix: str = "") -> dict[str, Mapping[str, Any]]:
    """Every field path the schema names -> its sub-schema."""
    out: dict[str, Mapping[str, Any]] = {}
    for k, sub in (schema.get("properties") or {}).items():
        out[f"{prefix}.{k}"] = sub
        out.update(_documented(sub, f"{prefix}.{k}"))
    if isinstance(schema.get("items"), Mapping):
        out.update(_documented(schema["items"], f"{prefix}[]"))
    return out


def assert_digest_fields_documented(digests: list[Mapping[str, Any]]) -> None:
    """Each record validates, every field it carries is in the schema, and every field of
    ``feed_health`` (what the Feed Health Report is built from) has a description."""
    doc = _documented(_schema("digests.v1.json"))
    seen: set[str] = set()
    for d in digests:
        validate("digests", dict(d))
        seen.update(_paths(d))
    assert not seen - set(doc), f"fields not documented in digests.v1.json: {sorted(seen - set(doc))}"
    health = sorted(p for p in seen if p.startswith(".feed_health."))
    assert health
    assert not [p for p in health if not doc[p].get("description")], "feed_health fields without a description"


def _health_records() -> list[dict[str, Any]]:
    """Polls of two feeds in the window: one healthy, one failing with an alert."""
    def h(fid: str, status: str, hour: int, **kw: Any) -> dict[str, Any]:
        return {"record_id": f"{fid}{hour}", "feed_id": fid, "status": status, "source": "poller",
                "at": ms_to_iso(START + hour * HOUR_MS), **kw}

    return [h("a", "ok", 1, reliability=0.9), h("a", "ok", 2, reliability=0.9),
            h("b", "http_error", 1, reliability=0.2, alert="3 errors in a row"), h("b", "timeout", 2)]


def test_digest_fields_and_feed_health_are_documented() -> None:
    acc = FeedHealthAccumulator()
    for r in _health_records():
        acc.add(r)
    d = assemble_digest(standard_records(), WIN, feed_health=acc, final=False)
    assert d["feed_health"]["feeds"] and d["feed_health"]["unhealthy_feeds"] == ["b"]
    assert_digest_fields_documented([d])
    props = _schema("digests.v1.json")["properties"]
    assert "replaces" in props["final"]["description"]
    item = props["sections"]["items"]["properties"]["items"]["items"]["properties"]
    assert "duplicate" in item["related_count"]["description"]
    assert item["article_ids"]["description"]


def test_related_count_and_article_ids_are_what_the_schema_says() -> None:
    """``related_count`` = ``size`` - 1 (scored members besides the lead + other publishers'
    duplicate copies); ``article_ids`` = the lead then the scored members, never the copies."""
    recs = [rec("apple", i, 80, story="apple-story", pub=i) for i in range(4)]
    dup = dict(rec("apple", 9, 80, story="apple-story", pub=9), disposition="near_duplicate",
               duplicate_of=recs[0]["article_id"], key="dup-9")
    d = assemble_digest([*recs, dup], WIN)
    [item] = [it for s in d["sections"] for it in s["items"]]
    assert item["related_count"] == item["size"] - 1 == 4
    assert item["article_ids"][0] == item["lead"]["article_id"]
    assert len(item["article_ids"]) == 4 and dup["article_id"] not in item["article_ids"]
    assert len(item["related"]) == 3


@pytest.mark.corpus
def test_a_real_replay_validates_and_every_digest_field_is_documented(shared_dir: Path,
                                                                     tmp_path: Path) -> None:
    from newsflow.cli.main import run_file_flow

    src = shared_dir / "data" / "real-feeds" / "headlines-24feeds_2020-05-03_06.feeds.raw.jsonl.gz"
    run_file_flow(str(src), str(tmp_path))
    digests = [orjson.loads(x) for x in (tmp_path / "digests.jsonl").read_bytes().splitlines()]
    assert len(digests) > 50 and not all(d["final"] for d in digests)
    assert_digest_fields_documented(digests)
    for d in digests:
        for it in (it for s in d["sections"] for it in s["items"]):
            assert it["related_count"] == it["size"] - 1
            assert it["article_ids"][0] == it["lead"]["article_id"]
            assert len(it["article_ids"]) <= it["related_count"] + 1
