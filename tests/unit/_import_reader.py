"""The package's imports read from its source with :mod:`ast`, never by importing it.

A module ``a`` has an edge to a module ``b`` of the package when any statement of ``a``
imports ``b``: at module level, inside a function or a class (a lazy import still runs
when the function does, so it counts), with absolute or relative names. For ``from p
import x`` the edge goes to ``p.x`` when ``p.x`` is a module of the package (a
submodule imported by name), otherwise to ``p``. Imports under ``if TYPE_CHECKING:``
count only with ``type_checking=True`` (never true at run time, but a dependency a
reader follows; its ``else:`` branch always counts). Not edges: the implicit import
of a module's parent packages, and modules imported by a computed name
(``importlib.import_module``). Used by test_import_graph.py (run-time cycles) and
test_layers.py (the layer order).
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGE = "pflrepro"


def modules(src: Path, package: str) -> dict[str, Path]:
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


def _imports(tree: ast.AST, type_checking: bool) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement anywhere in ``tree`` (under ``if TYPE_CHECKING:`` too when
    ``type_checking``)."""
    found: list[ast.Import | ast.ImportFrom] = []
    todo = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        elif isinstance(node, ast.If) and _type_checking(node.test) and not type_checking:
            todo.extend(node.orelse)
        else:
            todo.extend(ast.iter_child_nodes(node))
    return found


def _edges(module: str, path: Path, known: dict[str, Path], type_checking: bool) -> set[str]:
    """The modules of the package that ``module`` (source at ``path``) imports."""
    is_package = path.name == "__init__.py"
    out: set[str] = set()
    tree = ast.parse(path.read_bytes(), filename=str(path))
    for node in _imports(tree, type_checking):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            targets = [f"{target}.{a.name}" if f"{target}.{a.name}" in known else target
                       for a in node.names]
        out.update(t for t in targets if t in known and t != module)
    return out


def import_graph(src: Path = SRC, package: str = PACKAGE,
                 type_checking: bool = False) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (run time only, unless
    ``type_checking``)."""
    known = modules(src, package)
    return {m: _edges(m, p, known, type_checking) for m, p in known.items()}
