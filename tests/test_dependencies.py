"""Every third-party package the ``newsflow`` package imports is one of its declared runtime
dependencies (``[project] dependencies`` of ``pyproject.toml``), not something that happens to be
installed because another dependency pulls it in or because the dev extras are installed."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

import newsflow

PACKAGE = Path(newsflow.__file__).parent
PYPROJECT = PACKAGE.parent / "pyproject.toml"


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def declared() -> set[str]:
    """The runtime dependencies' distribution names, normalized (PEP 503)."""
    deps = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]["dependencies"]
    return {_normalized(re.match(r"[A-Za-z0-9._-]+", d).group(0)) for d in deps}  # type: ignore[union-attr]


def imported_top_levels(root: Path = PACKAGE) -> dict[str, set[str]]:
    """Top-level names of the absolute imports anywhere in the package's modules (module level
    and inside functions) that are neither the standard library nor the package -> the files."""
    found: dict[str, set[str]] = {}
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.partition(".")[0]
                if top not in sys.stdlib_module_names and top != root.name:
                    found.setdefault(top, set()).add(str(path.relative_to(root.parent)))
    return found


def undeclared(imports: dict[str, set[str]], deps: set[str]) -> list[str]:
    """One line per imported top-level package none of whose distributions is declared."""
    dists = packages_distributions()
    out = []
    for top, files in sorted(imports.items()):
        provided = {_normalized(d) for d in dists.get(top, [])}
        if not provided & deps:
            out.append(f"{top} (distribution {sorted(provided) or 'not installed'}) in {', '.join(sorted(files))}")
    return out


def test_every_third_party_import_is_a_declared_dependency() -> None:
    missing = undeclared(imported_top_levels(), declared())
    assert not missing, "imported but not in [project] dependencies:\n" + "\n".join(missing)


def test_the_check_maps_import_names_to_distributions_and_flags_the_undeclared(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "m.py").write_text("import os\nimport sklearn.cluster\n\ndef f():\n    from datasketch import MinHash\n"
                              "    from . import m\n")
    imports = imported_top_levels(pkg)
    assert set(imports) == {"sklearn", "datasketch"}  # (not the standard library, not itself)
    deps = declared()
    assert "scikit-learn" in deps and "datasketch" not in deps  # a dev extra is not a runtime dependency
    assert [line.partition(" ")[0] for line in undeclared(imports, deps)] == ["datasketch"]
