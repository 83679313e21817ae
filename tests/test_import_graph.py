"""The ``newsflow`` package has no import cycle: every module's imports (at module level, inside
functions and under ``TYPE_CHECKING`` alike) point down a graph without loops, so any module can
be imported first and a change to one module never needs a deferred import to keep another
loading."""

from __future__ import annotations

import ast
from pathlib import Path

import newsflow

PACKAGE = Path(newsflow.__file__).parent


def _modules() -> dict[str, Path]:
    """module name -> source file, for every module of the package."""
    out: dict[str, Path] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    """The absolute names an import statement may load: the module, and for ``from x import y``
    also ``x.y`` (a submodule when it is one)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        origin = ".".join([*base, node.module] if node.module else base)
    else:
        origin = node.module or ""
    return [origin, *(f"{origin}.{a.name}" for a in node.names)]


def import_graph() -> dict[str, set[str]]:
    """module -> the package's modules it imports (resolved to the longest existing module)."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            for target in _targets(node, name, path.name == "__init__.py"):
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    deps.add(target)
        graph[name] = deps
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The cycles of every strongly connected component of more than one module (Tarjan): the
    shortest one through each of its modules, sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                for start in sorted(component):
                    cycle = _cycle_through(graph, set(component), start)
                    if set(cycle) not in [set(c) for c in found]:
                        found.append(cycle)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def _cycle_through(graph: dict[str, set[str]], component: set[str], start: str) -> list[str]:
    """The shortest closed path inside a strongly connected component from ``start`` back to it."""
    prev: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v] & component):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(prev[path[-1]])
                    return [*reversed(path), start]
                if w not in prev:
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    raise AssertionError(f"not a cycle: {sorted(component)}")


def test_the_package_has_no_import_cycle() -> None:
    found = cycles(import_graph())
    assert not found, "import cycles:\n" + "\n".join(" -> ".join(c) for c in found)


def test_the_graph_sees_relative_function_level_and_package_imports(tmp_path: Path) -> None:
    # the checker itself: a cycle closed by a function-level relative import is found
    graph = {"p.a": {"p.b"}, "p.b": {"p.c"}, "p.c": {"p.a"}, "p.d": {"p.a"}}
    assert cycles(graph) == [["p.a", "p.b", "p.c", "p.a"]]
    src = "def f():\n    from . import b\n    from ..q import r\n"
    nodes = [n for n in ast.walk(ast.parse(src)) if isinstance(n, ast.ImportFrom)]
    assert _targets(nodes[0], "p.s.a", False) == ["p.s", "p.s.b"]
    assert _targets(nodes[1], "p.s.a", False) == ["p.q", "p.q.r"]
    assert _targets(nodes[0], "p.s", True) == ["p.s", "p.s.b"]
    graph = import_graph()
    assert "newsflow.config" in graph["newsflow.connectors.poller.config"]
    assert "newsflow.digest.schedule" in graph["newsflow.config.steps"]  # imported inside a method
