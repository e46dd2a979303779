"""The package's folders are its layers, and no module imports from a layer above its own.

The imports are read from the source (``_import_reader``) with every statement
counted: at module level, inside functions (lazy imports run when the function does)
and under ``if TYPE_CHECKING:`` (a type-only import is still a dependency a reader
follows). Modules found by a computed name (the registries'
``importlib.import_module``) are not statements and are not checked here.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from _import_reader import PACKAGE, SRC, import_graph

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


def layer(module: str) -> int:
    """The layer of a module of the package (its folder, or its own name at the top)."""
    parts = module.split(".")
    top = parts[1] if len(parts) > 1 else ""
    if top not in LAYER_OF:
        raise KeyError(f"{module}: its folder {top!r} is in no layer of LAYERS")
    return LAYER_OF[top]


def upward(graph: dict[str, set[str]]) -> list[str]:
    """Every import of a module from a layer above its own."""
    return [f"{a} imports {b}" for a, targets in sorted(graph.items())
            for b in sorted(targets) if layer(b) > layer(a)]


def test_every_module_is_in_a_layer() -> None:
    graph = import_graph(SRC, PACKAGE, type_checking=True)
    assert len(graph) > 100
    for module in graph:
        layer(module)
    # nothing at the top but the package, its entry point and the seeds
    top = {p.name for p in (SRC / PACKAGE).glob("*.py")}
    assert top == {"__init__.py", "__main__.py", "seeding.py"}, top


def test_no_import_from_a_higher_layer() -> None:
    found = upward(import_graph(SRC, PACKAGE, type_checking=True))
    assert not found, "imports from a higher layer:\n" + "\n".join(found)


@pytest.mark.parametrize("source, ok", [
    ("from pflrepro.store.io import write_text\n", True),
    ("from pflrepro.pipeline import workflow\n", False),
    ("if TYPE_CHECKING:\n    from pflrepro.reporting.paper import PaperCell\n", False),
    ("def f():\n    import pflrepro.cli\n", False),
    ("from .. import seeding\n", True),
])
def test_the_check_sees_every_kind_of_import(tmp_path: Path, source: str, ok: bool) -> None:
    # a hand-made pflrepro whose training/probe.py holds ``source``
    files = {"__init__.py": "", "seeding.py": "", "store/__init__.py": "", "store/io.py": "",
             "training/__init__.py": "", "training/probe.py": source,
             "pipeline/__init__.py": "", "pipeline/workflow.py": "",
             "reporting/__init__.py": "", "reporting/paper.py": "", "cli/__init__.py": ""}
    for rel, text in files.items():
        path = tmp_path / PACKAGE / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    graph = import_graph(tmp_path, PACKAGE, type_checking=True)
    assert graph["pflrepro.training.probe"], graph  # the import was seen
    assert (not upward(graph)) == ok, upward(graph)
