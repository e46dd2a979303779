"""The paper-smoke overlay is checked on every CI run: its config and its whole DAG, planned.

The ``paper_smoke`` tier (tests/workflow/test_paper_smoke.py) builds the paper grid on
``config/paper_smoke.yaml`` and is opt-in (tens of minutes); a change to config.yaml, the
schema or a rule that breaks the overlay would go unseen until someone runs it. Here, in
the default tier and in seconds: ``pflrepro check-config`` of config.yaml with the overlay,
and ``snakemake -n`` of the tier's whole ``rule all`` on a copy of the project, with the
same config files the tier passes (its loopback data mirrors aside, which only change
the prepare jobs' arguments).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from _paper_smoke import OVERLAY, merge, paper_experiments
from _wf import REPO, new_workdir, snakemake

from pflrepro.config import parse

pytestmark = pytest.mark.workflow

RAW = yaml.safe_load((REPO / "config.yaml").read_text())


def job_counts(text: str) -> dict[str, int]:
    """Snakemake's ``Job stats`` table of a dry run: rule -> jobs."""
    block = text.split("Job stats:", 1)[1]
    return {m.group(1): int(m.group(2))
            for m in re.finditer(r"^(\w+)\s+(\d+)$", block, re.M)}


def test_check_config_accepts_the_overlay() -> None:
    proc = subprocess.run([str(Path(sys.executable).parent / "pflrepro"), "check-config",
                           "config.yaml", str(OVERLAY.relative_to(REPO))], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_overlays_whole_dag_plans(tmp_path: Path) -> None:
    work = new_workdir(tmp_path / "run", RAW)
    proc = snakemake(work, "-n", "--quiet", "rules", "--configfile", str(work / "config.yaml"),
                     str(work / "config" / OVERLAY.name), configfile=False, check=False,
                     timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-5000:]
    counts = job_counts(out)
    cfg = parse(merge(RAW, yaml.safe_load(OVERLAY.read_text())))
    experiments = paper_experiments(RAW)
    assert set(cfg.experiments) >= set(experiments)
    # one table per paper experiment, each data set prepared once, training planned
    assert counts.get("table") == len(experiments), counts
    assert counts.get("prepare_data") == len({e["dataset"] for e in experiments.values()}
                                             | {e["public"]["dataset"]
                                                for e in experiments.values()
                                                if "public" in e}), counts
    assert sum(n for rule, n in counts.items() if rule.startswith("train")) > 0, counts
    assert counts.get("all") == 1, counts
