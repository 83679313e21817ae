"""docs/rules.md: every section of it that code, tests and docs cite (``docs/rules.md#`` and a
heading's anchor) is one of its headings, and its own links point at files that exist."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RULES = ROOT / "docs" / "rules.md"
CITATION = re.compile(r"rules\.md#([A-Za-z0-9_-]+)")
SCANNED = ("newsflow", "tests", "docs", "config", "scripts", "bench", "README.md", "CONTRIBUTING.md")


def heading_anchor(heading: str) -> str:
    """The anchor a Markdown renderer (GitHub's) gives a heading.

    >>> heading_anchor("Layer 3: title similarity")
    'layer-3-title-similarity'
    """
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors() -> set[str]:
    text = RULES.read_text(encoding="utf-8")
    return {heading_anchor(m.group(1)) for m in re.finditer(r"^#+ (.+)$", text, re.MULTILINE)}


def citations() -> list[tuple[str, int, str]]:
    out = []
    for top in SCANNED:
        base = ROOT / top
        files = [base] if base.is_file() else sorted(
            p for p in base.rglob("*") if p.is_file() and p.suffix in (".py", ".md", ".toml"))
        for p in files:
            for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
                out.extend((str(p.relative_to(ROOT)), n, m.group(1)) for m in CITATION.finditer(line))
    return out


def test_every_cited_section_exists() -> None:
    known = anchors()
    cited = citations()
    assert len(cited) >= 50  # the polling, normalization and scoring code cites it throughout
    assert [c for c in cited if c[2] not in known] == []


def test_links_of_the_rules_point_at_files() -> None:
    text = RULES.read_text(encoding="utf-8")
    targets = {t.split("#", 1)[0] for t in re.findall(r"\]\(([^)#][^)]*)\)", text)}
    paths = set(re.findall(r"`((?:newsflow|schemas|config|bench)/[\w./-]+)`", text))
    assert targets and paths
    missing = sorted(t for t in targets if not (RULES.parent / t).exists())
    missing += sorted(p for p in paths if not (ROOT / p).exists())
    assert missing == []
