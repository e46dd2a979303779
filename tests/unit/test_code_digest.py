"""The training jobs' code digest: which files it covers, and which edits change it.

Each train job's ``params.spec`` carries :func:`pflrepro.config.codedigest.code_digest`, so a
run goes stale exactly when a file in its digest changes. The file list is the
static import closure of the training entry (plus the algorithm's module), read
with :mod:`ast`; these tests check that closure on a synthetic package, against the
real package, against what Python really imports, and end to end: appending a
comment to a module changes the specs of exactly the runs that execute it.
"""

from __future__ import annotations

import ast
import copy
import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterable
from pathlib import Path

import pytest
import yaml

from pflrepro.algorithms.registry import INFOS
from pflrepro.config.codedigest import (
    _SRC,
    TRAINING_ENTRIES,
    _algorithm_files,
    code_digest,
    digest_files,
    import_closure,
    partition_code_digest,
    partition_files,
    training_core,
    training_files,
)

REPO = Path(__file__).resolve().parents[2]
PKG = _SRC / "pflrepro"
TINY = yaml.safe_load((REPO / "tests/workflow/config.yaml").read_text())


def _rel(paths: Iterable[Path]) -> set[str]:
    return {p.relative_to(PKG).as_posix() for p in paths}


# --- the closure function, on a synthetic package ----------------------------------

def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def test_closure_follows_runtime_imports_only(tmp_path: Path) -> None:
    _write(tmp_path, {
        "fake/__init__.py": "",
        "fake/entry.py": """
            import os
            import typing
            from typing import TYPE_CHECKING

            import fake.plain
            from . import sub
            from .sub.rel import thing
            from fake.ns import mod

            if TYPE_CHECKING:
                from fake import typed
            else:
                from fake import elsewise
            if typing.TYPE_CHECKING:
                import fake.typed2

            def run():
                from fake.lazy import helper
                return helper, os
        """,
        "fake/plain.py": "",
        "fake/ns/mod.py": "",  # a namespace package: no __init__.py
        "fake/sub/__init__.py": "",
        "fake/sub/rel.py": "from .. import leaf\nthing = leaf\n",
        "fake/leaf.py": "",
        "fake/elsewise.py": "",
        "fake/lazy.py": "def helper():\n    pass\n",
        "fake/typed.py": "import fake.unused\n",
        "fake/typed2.py": "",
        "fake/unused.py": "",
    })
    found = import_closure(tmp_path, ["fake.entry"])
    assert list(found) == sorted([
        "fake", "fake.entry", "fake.plain", "fake.sub", "fake.sub.rel", "fake.leaf",
        "fake.ns.mod", "fake.elsewise", "fake.lazy"])
    assert found["fake.sub"] == tmp_path / "fake/sub/__init__.py"
    assert found["fake.leaf"] == tmp_path / "fake/leaf.py"
    # what a given closure already holds is neither returned nor followed
    assert list(import_closure(tmp_path, ["fake.sub.rel"], known=["fake", "fake.leaf"])) == [
        "fake.sub", "fake.sub.rel"]
    assert list(import_closure(tmp_path, ["fake.ns.mod"])) == ["fake", "fake.ns.mod"]
    with pytest.raises(ModuleNotFoundError, match="fake.nope"):
        import_closure(tmp_path, ["fake.nope"])


def test_digest_depends_on_paths_and_contents_not_order_or_mtime(tmp_path: Path) -> None:
    _write(tmp_path, {"a.py": "x = 1\n", "b/c.py": "y = 2\n"})
    files = [tmp_path / "a.py", tmp_path / "b/c.py"]
    first = digest_files(tmp_path, files)
    assert len(first) == 16
    assert digest_files(tmp_path, files[::-1]) == first
    os.utime(files[0], (0, 0))
    assert digest_files(tmp_path, files) == first
    files[0].write_text("x = 1\n# comment\n")
    assert digest_files(tmp_path, files) != first


# --- the real package ---------------------------------------------------------------

def test_training_core_is_what_the_training_entry_imports() -> None:
    core = _rel(training_core())
    assert {"pipeline/train_job.py", "training/engine.py", "training/local_training.py",
            "training/optim.py", "training/settings.py", "seeding.py", "store/results.py",
            "store/checkpoint.py", "store/io.py", "training/devices.py", "models/nets.py",
            "data/store.py", "data/partition.py", "algorithms/base.py",
            "algorithms/registry.py"} <= core
    assert not {p for p in core if p.startswith("reporting/")}
    assert not {p for p in core if p.startswith("cli/")}  # command parsing: not training code
    # algorithm modules come in per algorithm (get_algorithm imports them by name)
    algorithm_modules = {Path(*info.module.split(".")[1:]).with_suffix(".py").as_posix()
                         for info in INFOS.values()}
    assert not core & algorithm_modules


def test_training_entries_are_what_the_train_command_imports() -> None:
    """``pflrepro train`` runs cli._train: its pflrepro imports are the entries."""
    tree = ast.parse((PKG / "cli" / "training.py").read_text())
    train = next(n for n in ast.walk(tree)
                 if isinstance(n, ast.FunctionDef) and n.name == "_train")
    imported = {n.module for n in ast.walk(train)
                if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("pflrepro")}
    assert imported == set(TRAINING_ENTRIES)


def test_algorithm_digest_adds_its_module_and_the_algorithms_it_builds_on() -> None:
    assert _rel(_algorithm_files(INFOS["heurfedamp"].module)) == {
        "algorithms/heurfedamp.py", "algorithms/fedamp.py"}
    assert _rel(_algorithm_files(INFOS["federico"].module)) == {"algorithms/federico.py"}
    core = set(training_core())
    for name, info in INFOS.items():
        files = set(training_files(name))
        own = _algorithm_files(info.module)
        assert own[0].name == f"{info.module.rsplit('.', 1)[1]}.py"
        assert files == core | set(own), name
        assert not core & set(own), name
    assert code_digest("heurfedamp") != code_digest("fedamp")


def test_static_closure_covers_what_python_imports() -> None:
    """Importing the training entries and then each algorithm, in a fresh Python: every
    pflrepro module loaded is in the core, or in that algorithm's own files."""
    script = textwrap.dedent(f"""
        import importlib, json, sys
        def loaded():
            return {{m: getattr(sys.modules[m], "__file__", None) for m in sys.modules
                    if m == "pflrepro" or m.startswith("pflrepro.")}}
        for entry in {list(TRAINING_ENTRIES)!r}:
            importlib.import_module(entry)
        out = {{"": loaded()}}
        from pflrepro.algorithms import get_algorithm
        for name in {sorted(INFOS)!r}:
            before = loaded()
            get_algorithm(name)
            out[name] = {{m: f for m, f in loaded().items() if m not in before}}
        print(json.dumps(out))
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=False, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    core = {str(p) for p in training_core()}
    entry_files = {f for f in out.pop("").values() if f}
    assert entry_files <= core, sorted(entry_files - core)
    for name, modules in out.items():
        files = {f for f in modules.values() if f}
        assert files <= {str(p) for p in training_files(name)}, (name, sorted(files))


# --- end to end: which runs' specs an edit changes -----------------------------------

ALGORITHMS_SEEN = ("fedamp", "heurfedamp")


def _config() -> dict:
    """The tiny workflow config plus FedAMP and HeurFedAMP (built on FedAMP) methods."""
    raw = copy.deepcopy(TINY)
    for name in ALGORITHMS_SEEN:
        raw["methods"].setdefault(name, {"algorithm": name})
        if name not in raw["experiments"]["tiny"]["methods"]:
            raw["experiments"]["tiny"]["methods"].append(name)
    return raw


def _specs(src: Path, raw: dict) -> dict[str, dict]:
    """Every run's ``params.spec`` (W.run_spec_json), computed in a fresh Python that
    imports pflrepro from ``src``."""
    script = textwrap.dedent(f"""
        import json, sys
        sys.path.insert(0, {str(src)!r})
        from types import SimpleNamespace
        import pflrepro.config as C
        import pflrepro.pipeline.workflow as W
        assert C.__file__.startswith({str(src)!r}), C.__file__
        cfg = C.parse(json.loads(sys.stdin.read()))
        print(json.dumps({{W.RUN.format(**vars(key)): json.loads(
            W.run_spec_json(cfg, SimpleNamespace(**vars(key))))
            for name in cfg.experiments for key in cfg.runs(name)}}))
    """)
    proc = subprocess.run([sys.executable, "-c", script], input=json.dumps(raw),
                          capture_output=True, text=True, check=False, timeout=300,
                          cwd=src.parent)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_editing_a_module_makes_exactly_the_runs_that_execute_it_stale(
        tmp_path: Path) -> None:
    src = tmp_path / "src"
    shutil.copytree(_SRC / "pflrepro", src / "pflrepro",
                    ignore=shutil.ignore_patterns("__pycache__"))
    raw = _config()
    before = _specs(src, raw)
    algorithm = {run: spec["algorithm"] for run, spec in before.items()}
    assert set(ALGORITHMS_SEEN) < set(algorithm.values())
    assert _specs(src, raw) == before  # deterministic across processes

    def changed_after_editing(rel: str) -> set[str]:
        path = src / "pflrepro" / rel
        original = path.read_bytes()
        path.write_bytes(original + b"\n# an edit\n")
        try:
            after = _specs(src, raw)
        finally:
            path.write_bytes(original)
        assert set(after) == set(before)
        # only the code digest may differ: the rest of the spec is the config's
        assert all({**after[r], "code": None} == {**before[r], "code": None} for r in after)
        return {r for r in before if after[r] != before[r]}

    every = set(before)
    assert changed_after_editing("training/local_training.py") == every
    assert changed_after_editing("data/store.py") == every
    assert changed_after_editing("algorithms/fedamp.py") == {
        r for r, a in algorithm.items() if a in ("fedamp", "heurfedamp")}
    assert changed_after_editing("algorithms/federico.py") == {
        r for r, a in algorithm.items() if a == "federico"}
    assert changed_after_editing("reporting/tables.py") == set()


# --- the partition jobs' digest ----------------------------------------------------

def test_partition_digest_covers_the_split_code_and_only_its_own_scheme(
        tmp_path: Path) -> None:
    files = _rel(partition_files("dirichlet"))
    assert {"data/jobs.py", "data/partition.py", "data/schemes/dirichlet.py",
            "seeding.py", "data/store.py"} <= files
    assert not {"data/schemes/rotation.py", "data/schemes/iid.py", "training/engine.py",
                "pipeline/train_job.py"} & files
    assert partition_code_digest("dirichlet") != partition_code_digest("rotation")
    src = tmp_path / "src"
    shutil.copytree(_SRC / "pflrepro", src / "pflrepro",
                    ignore=shutil.ignore_patterns("__pycache__"))
    schemes = ("dirichlet", "rotation", "iid")

    def digests() -> dict[str, str]:
        return {s: digest_files(src, partition_files(s, src)) for s in schemes}

    before = digests()
    assert before == {s: partition_code_digest(s) for s in schemes}  # same files, bytes

    def changed_after_editing(rel: str) -> set[str]:
        path = src / "pflrepro" / rel
        original = path.read_bytes()
        path.write_bytes(original + b"\n# an edit\n")
        try:
            after = digests()
        finally:
            path.write_bytes(original)
        return {s for s in schemes if after[s] != before[s]}

    # the seeding every split draws from (the old digest, partition.py and the
    # scheme's file only, missed it), the scheme itself, and code no split runs
    assert changed_after_editing("seeding.py") == set(schemes)
    assert changed_after_editing("data/schemes/rotation.py") == {"rotation"}
    # the job that calls the split and writes its file (pflrepro partition)
    assert changed_after_editing("data/jobs.py") == set(schemes)
    assert changed_after_editing("training/engine.py") == set()

