"""Test-wide settings: tiers, imports of the helper modules, one torch thread.

Tiers. Plain ``pytest`` runs the default tier: the unit tests and one tiny end-to-end
workflow build with the checks that read it (minutes on 2 cores); a new test lands there
unless it is marked. A test marked with a tier marker below runs only when the ``-m``
expression names that marker, and then the expression alone decides:
``pytest -m workflow_full`` runs the further end-to-end Snakemake runs (each builds its
own tiny project: tuning, reports, batched jobs, locks, damaged files, killed runs),
``pytest -m "cpu_scale or slurm or bench"`` runs exactly those three tiers, ``pytest -m
slurm`` the SLURM tier, ``pytest -m workflow`` the default tier's workflow tests (the
``workflow`` marker is no tier), ``pytest -m paper_smoke`` every paper-scale experiment
on a smoke overlay and generated archives (tests/workflow/test_paper_smoke.py).
``.ci/run`` runs the default tier, the benchmarks' quick mode (``benchmarks/run_all.py
--quick``, the paper shapes in a stage of their own), then ``pytest -m workflow_full``,
then ``pytest -n0 -m "cpu_scale or slurm"`` (the ``bench`` tier's every-method paper-shape
case and ``paper_smoke`` are opt-in).

Imports. ``pyproject.toml`` sets ``--import-mode=importlib``: pytest imports each test
file under a name made from its path (``tests.unit.test_report``,
``tests.workflow.test_report``), so two test files with one basename in different
folders never shadow each other. That mode leaves ``sys.path`` alone, so the folders
holding helper modules (``_*.py``: ``_fl_helpers``, ``_wf``, ...) are put on it here,
and a helper basename used in two folders is refused (it would shadow the other).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import torch

# Unit tests use tiny models, where one torch thread is fastest.
torch.set_num_threads(1)

TESTS = Path(__file__).resolve().parent
#: Tier markers (registered in pyproject.toml): deselected unless ``-m`` names them.
TIERS = ("cpu_scale", "slurm", "bench", "workflow_full", "paper_smoke")
#: Characters of a name in a ``-m`` expression (as pytest's expression lexer reads them).
_NAME = r"[\w:+\-.\[\]\\/]"


def _helper_folders() -> list[Path]:
    """Folders under tests/ with helper modules; refuses one helper name in two folders."""
    seen: dict[str, Path] = {}
    for helper in sorted(TESTS.glob("*/_*.py")):
        if helper.name == "__init__.py":
            continue
        if helper.name in seen:
            raise pytest.UsageError(f"helper module {helper.name} is in both "
                                    f"{seen[helper.name].parent} and {helper.parent}: "
                                    "`import` would find only one; rename one of them")
        seen[helper.name] = helper
    return sorted({path.parent for path in seen.values()})


for _folder in reversed(_helper_folders()):
    if str(_folder) not in sys.path:
        sys.path.insert(0, str(_folder))


def named_tiers(markexpr: str) -> set[str]:
    """The tier markers that the ``-m`` expression names."""
    return {tier for tier in TIERS
            if re.search(rf"(?<!{_NAME}){re.escape(tier)}(?!{_NAME})", markexpr or "")}


def pytest_report_header(config: pytest.Config) -> str:
    named = named_tiers(config.option.markexpr)
    left = [tier for tier in TIERS if tier not in named]
    if not left:
        return "tiers: every tier is named by -m"
    return (f"tiers: {', '.join(left)} deselected (not named by -m); "
            'the full tier: pytest -m "workflow_full or cpu_scale or slurm or bench"')


_DESELECTED = pytest.StashKey[int]()


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect the tests of a tier that ``-m`` does not name (after ``-m`` and ``-k``)."""
    named = named_tiers(config.option.markexpr)
    keep, drop = [], []
    for item in items:
        tiers = {mark.name for mark in item.iter_markers() if mark.name in TIERS}
        (drop if tiers and not tiers & named else keep).append(item)
    config.stash[_DESELECTED] = len(drop)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    dropped = config.stash.get(_DESELECTED, 0)
    if dropped:
        terminalreporter.write_line(
            f"{dropped} tests of the {' / '.join(TIERS)} tiers deselected; "
            'run them with: pytest -m "workflow_full or cpu_scale or slurm or bench"')
