"""CLI manners: user mistakes are one line on stderr and exit status 2; the demo summary names
exactly the files written; ``--help`` texts are complete and their defaults are the real ones."""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

import orjson
import pytest

from newsflow.cli.main import build_parser, main
from newsflow.config import Settings
from newsflow.connectors.files import write_archive
from newsflow.samples.demo import demo_payloads

ROOT = Path(__file__).resolve().parents[1]
TOPIC_FILES = ("articles.jsonl", "digests.jsonl", "feed-health.jsonl", "deadletter.jsonl", "stories.jsonl")


def one_line_error(capsys: pytest.CaptureFixture[str], code: int) -> str:
    """The one stderr line of a command that exited with status 2."""
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("newsflow: error: "), lines[0]
    return lines[0]


def digests_file(tmp_path: Path, n: int) -> Path:
    f = tmp_path / "digests.jsonl"
    f.write_bytes(b"".join(orjson.dumps({"schema": "digests", "digest_id": f"rolling:{i:03d}"}) + b"\n"
                           for i in range(n)))
    return f


# ------------------------------------------------------------------ mistakes: one line, exit 2
def test_render_into_a_missing_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.test_render_html import sample_digest

    f = tmp_path / "d.jsonl"
    f.write_bytes(orjson.dumps(sample_digest()) + b"\n")
    line = one_line_error(capsys, main(["digest", "render", str(f), "--out", str(tmp_path / "nodir" / "x.html")]))
    assert "nodir" in line


def test_demo_out_under_a_regular_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "file").write_text("x")
    line = one_line_error(capsys, main(["demo", "--out", str(tmp_path / "file" / "x")]))
    assert "output directory" in line


def test_opml_export_into_a_missing_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    line = one_line_error(capsys, main(["feeds", "export-opml", "--registry", str(ROOT / "config" / "feeds.toml"),
                                        "-o", str(tmp_path / "nodir" / "feeds.opml")]))
    assert "nodir" in line


def test_replay_out_under_a_regular_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "file").write_text("x")
    write_archive(demo_payloads()[:3], tmp_path / "a.jsonl")
    line = one_line_error(capsys, main(["replay", str(tmp_path / "a.jsonl"), "--no-progress",
                                        "--out", str(tmp_path / "file" / "x")]))
    assert "output directory" in line


def test_normalize_with_a_bad_fetched_at(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "feed.xml"
    f.write_bytes(b"<rss/>")
    line = one_line_error(capsys, main(["normalize", str(f), "--fetched-at", "garbage"]))
    assert "--fetched-at" in line and "'garbage'" in line


@pytest.mark.parametrize("flag", ["--workers", "--processes"])
@pytest.mark.parametrize("cmd", ["demo", "replay"])
def test_zero_workers_are_refused(cmd: str, flag: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_archive(demo_payloads()[:3], tmp_path / "a.jsonl")
    args = ["demo", "--input"] if cmd == "demo" else ["replay", "--no-progress"]
    line = one_line_error(capsys, main([*args, str(tmp_path / "a.jsonl"), "--out", str(tmp_path / "o"),
                                        flag, "0"]))
    assert flag in line and ">= 1" in line
    assert not (tmp_path / "o").exists()


# ------------------------------------------------------------------ digest render wording
def test_render_of_a_file_without_digests_says_no_digest(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "articles.jsonl"
    f.write_bytes(b'{"schema": "articles", "key": "a"}\n')
    line = one_line_error(capsys, main(["digest", "render", str(f)]))
    assert f"no digest in {f}" in line and "any" not in line


def test_an_unknown_digest_id_lists_ten_ids_then_an_ellipsis(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    f = digests_file(tmp_path, 12)
    line = one_line_error(capsys, main(["digest", "render", str(f), "--digest-id", "nope"]))
    assert "no digest 'nope'" in line and "12 ids" in line
    assert "rolling:009, …" in line and "rolling:010" not in line
    few = digests_file(tmp_path, 2)
    line = one_line_error(capsys, main(["digest", "render", str(few), "--digest-id", "nope"]))
    assert "2 ids" in line and line.endswith("rolling:001)") and "…" not in line


# ------------------------------------------------------------------ not an archive
def test_replay_of_a_file_that_is_not_an_archive(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "articles.jsonl"
    f.write_bytes(b'{"schema": "articles", "key": "a"}\n{"schema": "articles", "key": "b"}\n')
    assert main(["replay", str(f), "--no-progress", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"newsflow: warning: no line of {f} is a feeds.raw envelope: 2 dead letters (bad_envelope); "
                   "is this an archive?"]
    # the bad lines are still dead letters: bad input is never dropped silently
    assert (tmp_path / "o" / "deadletter.jsonl").read_bytes().count(b"\n") == 2


def test_demo_of_a_readme(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "o"
    assert main(["demo", "--input", str(ROOT / "README.md"), "--out", str(out)]) == 2
    cap = capsys.readouterr()
    assert cap.err.strip().startswith(f"newsflow: warning: no line of {ROOT / 'README.md'} is a feeds.raw envelope")
    assert len(cap.err.strip().splitlines()) == 1
    assert "render any digest" not in cap.out
    for name in TOPIC_FILES:  # every topic file exists, empty when it has no record
        assert (out / name).exists(), name
        assert name in cap.out
    assert (out / "articles.jsonl").read_bytes() == b""


def test_one_valid_payload_among_bad_lines_is_a_normal_run(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "mixed.jsonl"
    write_archive(demo_payloads()[:1], f)
    f.write_bytes(f.read_bytes() + b"not json\n")
    assert main(["replay", str(f), "--no-progress", "--out", str(tmp_path / "o")]) == 0
    assert "warning" not in capsys.readouterr().err


# ------------------------------------------------------------------ the demo summary
def test_demo_summary_lists_exactly_the_files_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "o"
    assert main(["demo", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    listed = re.findall(r"^  (\S+\.jsonl) +(\d+) records$", text, re.M)
    written = sorted(p.name for p in out.glob("*.jsonl"))
    assert sorted(name for name, _ in listed) == written == sorted(TOPIC_FILES)
    for name, n in listed:
        assert (out / name).read_bytes().count(b"\n") == int(n), name
    assert "render any digest" in text


def test_replay_writes_every_topic_file(tmp_path: Path) -> None:
    f = tmp_path / "a.jsonl"
    write_archive([p for p in demo_payloads() if p.status == 200][:2], f)
    assert main(["replay", str(f), "--no-progress", "--out", str(tmp_path / "o")]) == 0
    assert sorted(p.name for p in (tmp_path / "o").glob("*.jsonl")) == sorted(TOPIC_FILES)


# ------------------------------------------------------------------ --help
def parsers() -> list[tuple[str, argparse.ArgumentParser]]:
    def walk(p: argparse.ArgumentParser, name: str) -> list[tuple[str, argparse.ArgumentParser]]:
        out = [(name, p)]
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                for n, sp in a.choices.items():
                    out += walk(sp, f"{name} {n}")
        return out

    return walk(build_parser(), "newsflow")


def test_help_defaults_named_after_a_setting_are_that_settings_default() -> None:
    settings = Settings()
    seen = []
    for name, p in parsers():
        text = " ".join(p.format_help().split())  # argparse wraps lines anywhere between words
        assert "{setting:" not in text, name
        for key, shown in re.findall(r"default: ([a-z_]+(?:\.[a-z_]+)+), ([^);]+)\)", text):
            value: Any = settings
            for part in key.split("."):
                value = getattr(value, part)
            assert float(shown) == float(value), (name, key, shown, value)
            seen.append(key)
    assert {"poller.heartbeat_s", "poller.fetch.timeout_s", "kafka.timeout_s", "flow.workers"} <= set(seen)


def test_every_command_has_a_complete_description() -> None:
    for name, p in parsers():
        if name == "newsflow":
            continue
        assert p.description, name
        assert not p.description.rstrip().endswith(":"), (name, p.description)
    help_text = dict(parsers())["newsflow replay"].format_help()
    assert "compare.html" in help_text and "byte for byte" in help_text and "``" not in help_text


def test_readme_paths_exist() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    paths = set(re.findall(r"`([A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)+\.py)`", text))
    assert paths and [p for p in sorted(paths) if not (ROOT / p).exists()] == []


def test_every_command_has_an_example_in_its_help() -> None:
    commands = parsers()
    assert len(commands) >= 12
    for name, p in commands:
        assert p.epilog and "example" in p.epilog and "newsflow" in p.epilog, name


def _truncated_archive(tmp_path: Path) -> tuple[Path, int]:
    """A .gz archive of the demo sample cut at two thirds (an interrupted download)."""
    import gzip

    from newsflow.wire.codec import encode_raw

    lines = [encode_raw(p)[1] for p in demo_payloads()]
    whole = gzip.compress(b"\n".join(lines) + b"\n")
    f = tmp_path / "cut.jsonl.gz"
    f.write_bytes(whole[: len(whole) * 2 // 3])
    return f, len(lines)


def test_replay_of_a_truncated_archive_reads_what_it_can(tmp_path: Path) -> None:
    """`replay` counted the archive's lines first, with the reader that raised at the break: a
    traceback before the flow ran. The count now stops at the break, and the flow dead-letters it."""
    f, _ = _truncated_archive(tmp_path)
    assert main(["replay", str(f), "--no-progress", "--out", str(tmp_path / "o")]) == 0
    dls = [orjson.loads(x) for x in (tmp_path / "o" / "deadletter.jsonl").read_bytes().splitlines()]
    assert [d["reason"] for d in dls].count("unreadable_archive") == 1
    assert (tmp_path / "o" / "articles.jsonl").read_bytes()


@pytest.mark.kafka
def test_produce_of_a_truncated_archive_produces_what_it_can_and_says_where_it_broke(
        kafka_bootstrap: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import uuid

    from tests.kafka_fixture import consume_all

    f, total = _truncated_archive(tmp_path)
    topic = f"feeds.raw.{uuid.uuid4().hex[:8]}"
    cfg = tmp_path / "settings.toml"
    cfg.write_text(f'[kafka.topics]\nraw = "{topic}"\n')
    line = one_line_error(capsys, main(["produce", str(f), "--brokers", kafka_bootstrap, "--config", str(cfg)]))
    assert "cut.jsonl.gz: unreadable after line" in line and "the lines before it were produced" in line
    got = consume_all(kafka_bootstrap, topic)
    assert 0 < len(got) < total
