"""OPML import: only http(s) feeds, folder paths as categories, the user's registry file kept."""

from __future__ import annotations

from pathlib import Path

import pytest

from newsflow.cli.main import main
from newsflow.polling.registry import import_opml, load_registry

OPML = b"""<?xml version="1.0"?><opml version="2.0"><head><title>subs</title></head><body>
<outline text="News"><outline text="World">
  <outline type="rss" text="Wire World" xmlUrl="https://wire.example.com/world.xml"/>
</outline>
  <outline type="rss" text="Daily" xmlUrl="feed://daily.example.com/rss"/>
</outline>
<outline type="rss" text="Evil" xmlUrl="javascript:alert(1)"/>
<outline type="rss" text="Local" xmlUrl="file:///etc/passwd"/>
<outline type="rss" text="Secure" xmlUrl="feed:https://secure.example.com/atom"/>
</body></opml>"""


def test_only_http_feeds_and_nested_folder_paths() -> None:
    rejected: list[tuple[str, str]] = []
    feeds = {f.name: f for f in import_opml(OPML, rejected=rejected)}
    assert set(feeds) == {"Wire World", "Daily", "Secure"}
    assert feeds["Daily"].url == "http://daily.example.com/rss"
    assert feeds["Secure"].url == "https://secure.example.com/atom"
    assert feeds["Wire World"].category == "News/World" and feeds["Daily"].category == "News"
    assert sorted(u for u, _ in rejected) == ["file:///etc/passwd", "javascript:alert(1)"]


def test_import_into_a_registry_keeps_defaults_and_comments(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    reg = tmp_path / "feeds.toml"
    original = ('# my feeds, hand-written\n[defaults]\ntier = "T2"\n\n'
                '[[feed]]\nid = "mine"\nurl = "https://mine.example.org/rss"\n# keep this comment\n')
    reg.write_text(original, encoding="utf-8")
    opml = tmp_path / "subs.opml"
    opml.write_bytes(OPML)
    assert main(["feeds", "import-opml", str(opml), "--registry", str(reg)]) == 0
    text = reg.read_text(encoding="utf-8")
    assert text.startswith(original)  # the user's file is untouched, new feeds are appended
    r = load_registry(reg)
    assert r.feeds[0].id == "mine" and r.feeds[0].tier == "T2" and len(r.feeds) == 4
    err = capsys.readouterr().err
    assert "javascript:alert(1)" in err and "skipped" in err
    # importing again adds nothing and leaves the file as it is
    assert main(["feeds", "import-opml", str(opml), "--registry", str(reg)]) == 0
    assert reg.read_text(encoding="utf-8") == text
