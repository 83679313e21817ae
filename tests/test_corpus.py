"""Every file of the five parser projects' test suites ends as articles or dead letters."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import orjson
import pytest

from newsflow.feeds.normalize import normalize_payload
from newsflow.model.records import RawPayload
from newsflow.wire.codec import deadletter_to_dict
from newsflow.wire.contracts import validate

pytestmark = pytest.mark.corpus


def test_every_corpus_file_ends_as_articles_or_deadletters(shared_dir: Path) -> None:
    root = shared_dir / "data" / "parser-corpora"
    manifest = [orjson.loads(x) for x in (root / "manifest.jsonl").read_bytes().splitlines() if x.strip()]
    assert len(manifest) >= 2800
    outcomes: Counter[str] = Counter()
    for i, m in enumerate(manifest):
        body = (root / m["path"]).read_bytes()
        res = normalize_payload(RawPayload(f"corpus-{i}", "https://feeds.example.org/" + m["path"], 1_700_000_000_000, 200, body))
        assert res.articles or res.deadletters, m["path"]
        for dl in res.deadletters:
            assert dl.reason and dl.original is not None
            if i % 7 == 0:
                validate("deadletter", orjson.dumps(deadletter_to_dict(dl)))
        outcomes["with_articles" if res.articles else "deadletter_only"] += 1
        outcomes["articles"] += len(res.articles)
        # every entry feedparser finds becomes an article or a malformed-item dead letter
        fp = m.get("feedparser") or {}
        if fp.get("entries") and not res.recovered:
            assert len(res.articles) + res.malformed == fp["entries"], m["path"]
    assert outcomes["with_articles"] >= 700 and outcomes["articles"] >= 2300, outcomes
