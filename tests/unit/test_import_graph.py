"""No import cycle in ``src/pflrepro`` (issue 26, item 4).

The graph is read from the source with :mod:`ast`, never by importing it. A module
``a`` has an edge to a module ``b`` of the package when any statement of ``a``
imports ``b``: at module level, inside a function or a class (a lazy import still
runs when the function does, so it counts), with absolute or relative names. For
``from p import x`` the edge goes to ``p.x`` when ``p.x`` is a module of the package
(a submodule imported by name), otherwise to ``p``.

Not edges: imports under ``if TYPE_CHECKING:`` (never true at run time; its
``else:`` branch does run and counts), and the implicit import of a module's parent
packages (``import a.b.c`` runs ``a/__init__.py``: a package's ``__init__`` that
re-exports its own submodules would otherwise be a cycle with each of them, which
Python resolves by design). Modules imported by a computed name
(``importlib.import_module``) are not visible here: that is how the registries find
their members without an import edge.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGE = "pflrepro"


def _modules(src: Path, package: str) -> dict[str, Path]:
    """Every module of ``package`` under ``src``: dotted name -> file."""
    out = {}
    for path in sorted((src / package).rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _type_checking(test: ast.expr) -> bool:
    return ((isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
            or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement anywhere in ``tree``, but under ``if TYPE_CHECKING:``."""
    found: list[ast.Import | ast.ImportFrom] = []
    todo = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        elif isinstance(node, ast.If) and _type_checking(node.test):
            todo.extend(node.orelse)
        else:
            todo.extend(ast.iter_child_nodes(node))
    return found


def _edges(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The modules of the package that ``module`` (source at ``path``) imports."""
    is_package = path.name == "__init__.py"
    out: set[str] = set()
    for node in _imports(ast.parse(path.read_bytes(), filename=str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            targets = [f"{target}.{a.name}" if f"{target}.{a.name}" in modules else target
                       for a in node.names]
        out.update(t for t in targets if t in modules and t != module)
    return out


def import_graph(src: Path = SRC, package: str = PACKAGE) -> dict[str, set[str]]:
    """Module -> the package's modules it imports at run time."""
    modules = _modules(src, package)
    return {m: _edges(m, p, modules) for m, p in modules.items()}


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
