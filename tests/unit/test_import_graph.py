"""No import cycle in ``src/pflrepro`` at run time (issue 26, item 4).

The graph is read from the source (``_import_reader``: lazy imports count, imports
under ``if TYPE_CHECKING:`` do not, and neither does the implicit import of a
module's parent packages, since a package's ``__init__`` that re-exports its own
submodules would otherwise be a cycle with each of them, which Python resolves by
design).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from _import_reader import PACKAGE, SRC, import_graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:  # recursion depth <= number of modules (~150)
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
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
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


# ---- the checker on hand-made packages --------------------------------------------

def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = tmp_path / "pkg" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def test_cycles_of_a_hand_made_graph() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a", "e"}, "e": {"d"}, "f": set()}
    assert cycles(graph) == [["a", "b", "c"], ["d", "e"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_a_function_level_import_is_an_edge(tmp_path: Path) -> None:
    src = _package(tmp_path, {
        "__init__.py": "",
        "a.py": "from pkg import b\n",
        "b.py": "def f():\n    from pkg.a import g\n    return g\n"})
    graph = import_graph(src, "pkg")
    assert graph["pkg.a"] == {"pkg.b"} and graph["pkg.b"] == {"pkg.a"}
    assert cycles(graph) == [["pkg.a", "pkg.b"]]


def test_a_type_checking_import_is_no_edge(tmp_path: Path) -> None:
    src = _package(tmp_path, {
        "__init__.py": "",
        "a.py": "import pkg.b\n",
        "b.py": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                 "    from pkg.a import x\nelse:\n    import pkg.c\n"),
        "c.py": ""})
    graph = import_graph(src, "pkg")
    assert graph["pkg.b"] == {"pkg.c"}
    assert cycles(graph) == []


def test_relative_and_submodule_imports(tmp_path: Path) -> None:
    src = _package(tmp_path, {
        "__init__.py": "from . import sub\n",
        "sub/__init__.py": "X = 1\n",
        "sub/m.py": "from . import n\nfrom .. import top\nfrom ..sub import X\n",
        "sub/n.py": "from .m import Y\n",
        "top.py": "from pkg.sub import m\n"})
    graph = import_graph(src, "pkg")
    assert graph["pkg"] == {"pkg.sub"}
    assert graph["pkg.sub.m"] == {"pkg.sub.n", "pkg.top", "pkg.sub"}
    assert graph["pkg.sub.n"] == {"pkg.sub.m"}
    assert graph["pkg.top"] == {"pkg.sub.m"}
    assert cycles(graph) == [["pkg.sub.m", "pkg.sub.n", "pkg.top"]]


# ---- the package itself -----------------------------------------------------------

def test_the_package_graph_is_read() -> None:
    graph = import_graph()
    engine = "pflrepro.training.engine"
    assert engine in graph and "pflrepro.seeding" in graph[engine]


@pytest.mark.parametrize("package", [PACKAGE])
def test_no_import_cycle_in_the_package(package: str) -> None:
    found = cycles(import_graph(SRC, package))
    assert found == [], "import cycles (strongly connected components):\n" + "\n".join(
        " <-> ".join(c) for c in found)


def test_no_cycle_even_through_type_only_imports() -> None:
    # A reader follows type-only imports too: none is in a circle anywhere, the training
    # core included (shared types sit below their users: pipeline.planned_job,
    # reporting.paper_cell, config.model; what a local step needs is
    # training.context, below the engine that builds it)
    found = cycles(import_graph(SRC, PACKAGE, type_checking=True))
    assert found == [], "import cycles through type-only imports:\n" + "\n".join(
        " <-> ".join(c) for c in found)


def test_a_type_only_import_closes_a_cycle_the_strict_graph_sees(tmp_path: Path) -> None:
    # the checker above would catch a circle like engine <-> local_training tied by a
    # TYPE_CHECKING import of the engine
    src = _package(tmp_path, {
        "__init__.py": "",
        "engine.py": "from pkg import local\n",
        "local.py": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                     "    from pkg.engine import Engine\n")})
    assert cycles(import_graph(src, "pkg")) == []
    assert cycles(import_graph(src, "pkg", type_checking=True)) == [["pkg.engine", "pkg.local"]]
