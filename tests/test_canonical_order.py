"""The file sink's canonical order: a finished topic file does not depend on how the workers
interleaved their records (the whole flow: ``test_flow_files.py``, 2 workers, 2 processes)."""

from __future__ import annotations

import random
from pathlib import Path

import orjson

from newsflow.connectors.files import canonical_order


def _write(path: Path, recs: list[dict[str, object]]) -> None:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recs))


def _read(path: Path) -> list[dict[str, object]]:
    return [orjson.loads(x) for x in path.read_bytes().splitlines()]


def test_records_sort_by_time_then_key_and_a_key_keeps_its_order(tmp_path: Path) -> None:
    f = tmp_path / "articles.jsonl"
    recs: list[dict[str, object]] = [
        {"key": "b", "fetched_at": "2020-05-03T10:00:00Z", "v": 1},
        {"key": "a", "fetched_at": "2020-05-03T10:00:00Z", "v": 1},
        {"key": "c", "fetched_at": "2020-05-03T09:00:00.500Z", "v": 1},  # ms: earlier than 10:00
        {"key": "a", "fetched_at": "2020-05-03T10:00:00Z", "v": 2},  # a re-emit, same time
        {"key": "d", "fetched_at": None, "v": 1},  # no time: first
        {"key": "c", "fetched_at": "2020-05-03T08:00:00Z", "v": 2},  # later record, earlier time
        {"key": "c", "fetched_at": "2020-05-03T09:00:00Z", "v": 3},
    ]
    _write(f, recs)
    assert canonical_order(f, "key", "fetched_at")
    got = [(r["key"], r["v"]) for r in _read(f)]
    # c's records stay in the order written (they count as c's first time, 09:00:00.500)
    assert got == [("d", 1), ("c", 1), ("c", 2), ("c", 3), ("a", 1), ("a", 2), ("b", 1)]
    assert not (tmp_path / "articles.jsonl.sorting").exists()


def test_any_interleaving_of_the_keys_gives_the_same_bytes(tmp_path: Path) -> None:
    rng = random.Random(7)
    per_key = {f"k{i}": [{"story_id": f"k{i}", "updated_at": f"2020-05-0{1 + (i + j) % 3}T0{j % 10}:00:00Z",
                          "n": j} for j in range(rng.randint(1, 6))] for i in range(40)}
    outs = set()
    for trial in range(5):
        # the records of each key in their order, the keys interleaved at random
        queues = {k: list(v) for k, v in per_key.items()}
        lines: list[dict[str, object]] = []
        while queues:
            k = rng.choice(sorted(queues))
            lines.append(queues[k].pop(0))
            if not queues[k]:
                del queues[k]
        f = tmp_path / f"stories{trial}.jsonl"
        _write(f, lines)
        assert canonical_order(f, "story_id", "updated_at")
        outs.add(f.read_bytes())
        for k, recs in per_key.items():  # each key's records still in the order they came
            assert [r["n"] for r in _read(f) if r["story_id"] == k] == [r["n"] for r in recs]
    assert len(outs) == 1


def test_sorting_twice_changes_nothing_and_odd_files_are_left_alone(tmp_path: Path) -> None:
    f = tmp_path / "digests.jsonl"
    _write(f, [{"digest_id": "x", "generated_at": "2020-05-04T00:00:00Z"},
               {"digest_id": "y", "generated_at": "2020-05-03T00:00:00Z"}])
    assert canonical_order(f, "digest_id", "generated_at")
    once = f.read_bytes()
    assert canonical_order(f, "digest_id", "generated_at") and f.read_bytes() == once
    assert [r["digest_id"] for r in _read(f)] == ["y", "x"]
    empty = tmp_path / "deadletter.jsonl"
    empty.write_bytes(b"")
    assert canonical_order(empty, "dl_id", "fetched_at") and empty.read_bytes() == b""
    odd = tmp_path / "odd.jsonl"
    odd.write_bytes(b'{"dl_id": "b"}\nnot json\n{"dl_id": "a"}\n')
    assert not canonical_order(odd, "dl_id", "fetched_at")
    assert odd.read_bytes() == b'{"dl_id": "b"}\nnot json\n{"dl_id": "a"}\n'


def test_fields_are_read_as_json_reads_them(tmp_path: Path) -> None:
    """Keys with escaped quotes, nested objects with the same field names after the record's
    own, times that are null or not times: the order is that of the parsed records."""
    recs: list[dict[str, object]] = [
        {"dl_id": 'q"2', "fetched_at": "2020-05-03T10:00:00Z", "nested": {"dl_id": "zz", "fetched_at": "1999-01-01T00:00:00Z"}},
        {"dl_id": 'q"1', "fetched_at": "2020-05-03T10:00:00Z", "detail": 'a \\"dl_id\\":\\"0\\" text'},
        {"dl_id": "n", "fetched_at": None, "nested": {"fetched_at": "2030-01-01T00:00:00Z"}},
        {"dl_id": "bad", "fetched_at": "yesterday"},
        {"dl_id": 7, "fetched_at": "2020-05-03T09:00:00Z"},
    ]
    f = tmp_path / "deadletter.jsonl"
    _write(f, recs)
    assert canonical_order(f, "dl_id", "fetched_at")
    # no time (null, or not a time) first, by key; then 09:00; then 10:00 by key (q"1 < q"2)
    assert [r["dl_id"] for r in _read(f)] == ["bad", "n", 7, 'q"1', 'q"2']


def test_a_new_partition_removes_a_rewrite_left_by_a_crash(tmp_path: Path) -> None:
    from newsflow.connectors.files import JsonlTopicSink

    stale = tmp_path / "articles.jsonl.sorting"
    stale.write_bytes(b'{"key": "half a rewri')
    part = JsonlTopicSink(tmp_path, ["articles"], {"articles": ("key", "fetched_at")}).build_part("out", "articles", None)
    part.write_batch([b'{"key":"b","fetched_at":"2020-05-03T10:00:00Z"}', b'{"key":"a","fetched_at":"2020-05-03T10:00:00Z"}'])
    assert not stale.exists()
    part.close()
    assert (tmp_path / "articles.jsonl").read_bytes().splitlines() == [
        b'{"key":"a","fetched_at":"2020-05-03T10:00:00Z"}', b'{"key":"b","fetched_at":"2020-05-03T10:00:00Z"}']
