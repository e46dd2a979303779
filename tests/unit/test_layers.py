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
    # the package itself (its version), the seeds of every draw, and the one-line error
    # of a setting outside its choices (every layer checks settings)
    ("", "seeding", "choices"),
    ("store",),               # atomic, digested files; the run table; checkpoints
    ("models",),
    ("data",),
    ("training",),            # the engine and everything a local step needs
    ("algorithms",),          # one file per method, on the training core
    ("config", "tuning"),     # what to run: the parsed config and its tuning plans
    ("reporting",),           # tables, figures, claims, cost, from stored runs
    ("pipeline",),            # Snakemake's adapters and the jobs its rules run
    ("inspect",),             # people's tools: listing, plan, status, run view, verify
    ("cli", "__main__"),      # the command line on top: every command, its parser
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
    # nothing at the top but the package, its entry point, the seeds and the choices
    top = {p.name for p in (SRC / PACKAGE).glob("*.py")}
    assert top == {"__init__.py", "__main__.py", "seeding.py", "choices.py"}, top


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


#: What builds or reads a command line with argparse: the module, and the calls that add
#: a parser or its options.
_ARGPARSE_CALLS = ("ArgumentParser", "add_subparsers", "add_parser", "add_argument",
                   "add_mutually_exclusive_group", "ArgumentTypeError")


def argparse_uses(root: Path) -> list[str]:
    """Every import of argparse and every parser-building call outside ``cli/``.

    Read from the source with :mod:`ast`: imports anywhere (in functions, under
    ``TYPE_CHECKING``) and calls of :data:`_ARGPARSE_CALLS` by attribute or by name.
    """
    import ast

    found = []
    for path in sorted((root / PACKAGE).rglob("*.py")):
        rel = path.relative_to(root / PACKAGE)
        if rel.parts[0] == "cli":
            continue
        for node in ast.walk(ast.parse(path.read_bytes(), filename=str(path))):
            if isinstance(node, ast.Import):
                names = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [(node.module or "").split(".")[0]]
            elif isinstance(node, ast.Call):
                func = node.func
                called = (func.attr if isinstance(func, ast.Attribute)
                          else func.id if isinstance(func, ast.Name) else "")
                names = ["argparse"] if called in _ARGPARSE_CALLS else []
            else:
                continue
            if "argparse" in names:
                found.append(f"{rel.as_posix()}:{node.lineno}")
    return found


def test_every_command_line_is_read_in_cli() -> None:
    found = argparse_uses(SRC)
    assert not found, "argparse or a parser built outside pflrepro/cli:\n" + "\n".join(found)


@pytest.mark.parametrize("source, ok", [
    ("import json\n", True),
    ("import argparse\n", False),
    ("def f():\n    import argparse\n", False),
    ("from argparse import Namespace\n", False),
    ("if TYPE_CHECKING:\n    import argparse\n", False),
    ("def add(sub):\n    p = sub.add_parser('x')\n", False),
    ("def add(p):\n    p.add_argument('--x')\n", False),
])
def test_the_argparse_check_sees_every_kind_of_use(tmp_path: Path, source: str,
                                                    ok: bool) -> None:
    # a hand-made pflrepro whose store/probe.py holds ``source``; cli/ may do all of it
    files = {"__init__.py": "", "store/probe.py": source,
             "cli/__init__.py": "import argparse\nargparse.ArgumentParser().add_argument('x')\n"}
    for rel, text in files.items():
        path = tmp_path / PACKAGE / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert (not argparse_uses(tmp_path)) == ok, argparse_uses(tmp_path)


#: The modules of ``pipeline/`` besides its ``workflow/`` package: what the Snakefile and
#: the rules import, and the jobs' entry points. People's tools live in ``inspect/``.
PIPELINE_MODULES = {
    "__init__",
    "data_targets",   # the rules' data set targets
    "other_configs",  # the rules' hint for another config's target
    "plan_cost",      # the rules' cost projection of a plan
    "planned_job",    # a planned job, below plan_cost and inspect.plan
    "single",         # `pflrepro run`'s job: prepare, partition, train
    "train_job",      # `pflrepro train`'s job
    "tuning_jobs",    # the tuning jobs and run specs (the rules' TJ)
}


def test_pipeline_holds_only_adapters_and_jobs() -> None:
    found = {p.stem for p in (SRC / PACKAGE / "pipeline").glob("*.py")}
    assert found == PIPELINE_MODULES, found ^ PIPELINE_MODULES
