"""The package's folders are its layers, and no module imports from a layer above its own.

Every import statement counts: at module level, inside functions (lazy imports run when
the function does) and under ``if TYPE_CHECKING:`` (a type-only import is still a
dependency a reader follows). Modules found by a computed name (the registries'
``importlib.import_module``) are not statements and are not checked here.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
#: Bottom to top; a module may import its own layer and those listed before it.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("", "seeding"),          # the package itself (its version) and the seeds of every draw
    ("store",),               # atomic, digested files; the run table; checkpoints
    ("models",),
    ("data",),
    ("training",),            # the engine and everything a local step needs
    ("algorithms",),          # one file per method, on the training core
    ("config", "tuning"),     # what to run: the parsed config and its tuning plans
    ("reporting",),           # tables, figures, claims, cost, from stored runs
    ("pipeline",),            # Snakemake's adapters, training and tuning jobs, verify
    ("cli", "__main__"),      # the command line on top
)
LAYER_OF = {name: i for i, names in enumerate(LAYERS) for name in names}


def _module(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module) of every import statement of the file."""
    module = _module(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    return _imports_in(path.read_text(), package)


def _imports_in(source: str, package: str) -> list[tuple[int, str]]:
    """(line, absolute module) of every import of the package in ``source``."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            out.append((node.lineno, name))
    return [(line, name) for line, name in out if name.split(".")[0] == "pflrepro"]


def layer(module: str) -> int:
    """The layer of a module of the package (its folder, or its own name at the top)."""
    parts = module.split(".")
    top = parts[1] if len(parts) > 1 else ""
    if top not in LAYER_OF:
        raise KeyError(f"{module}: its folder {top!r} is in no layer of LAYERS")
    return LAYER_OF[top]


def test_every_module_is_in_a_layer() -> None:
    files = sorted((SRC / "pflrepro").rglob("*.py"))
    assert len(files) > 100
    for path in files:
        layer(_module(path))
    # nothing at the top but the package, its entry point and the seeds
    top = {p.name for p in (SRC / "pflrepro").glob("*.py")}
    assert top == {"__init__.py", "__main__.py", "seeding.py"}, top


def test_no_import_from_a_higher_layer() -> None:
    upward = []
    for path in sorted((SRC / "pflrepro").rglob("*.py")):
        mine = layer(_module(path))
        for line, name in _imports(path):
            if layer(name) > mine:
                upward.append(f"{path.relative_to(SRC)}:{line} imports {name}")
    assert not upward, "imports from a higher layer:\n" + "\n".join(upward)


@pytest.mark.parametrize("source, ok", [
    ("from pflrepro.store.io import write_text\n", True),
    ("from pflrepro.pipeline import workflow\n", False),
    ("if TYPE_CHECKING:\n    from pflrepro.reporting.paper import PaperCell\n", False),
    ("def f():\n    import pflrepro.cli\n", False),
    ("from .. import seeding\n", True),
])
def test_the_check_sees_every_kind_of_import(source: str, ok: bool) -> None:
    # as if in a module of pflrepro.training
    found = [layer(n) > layer("pflrepro.training") for _, n in
             _imports_in(source, "pflrepro.training")]
    assert found and (not any(found)) == ok
