"""``pflrepro plan`` on the tiny config: what a first ``snakemake`` would run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from _wf import new_workdir

pytestmark = pytest.mark.workflow


def _plan(wd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PFLREPRO_ANY_SOURCE"}
    env.update(PYTHONPATH=str(wd / "src"),
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}")
    return subprocess.run([sys.executable, "-m", "pflrepro", "plan", *args], cwd=wd, env=env,
                          capture_output=True, text=True, timeout=600, check=False)


def test_plan_of_a_fresh_project(tmp_path: Path) -> None:
    wd = new_workdir(tmp_path / "wd")
    proc = _plan(wd)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    runs = 2 * 4 * 1 * 2  # partitions x methods x split seeds x train seeds
    assert out.startswith(f"42 job(s) would run ({runs} training run(s), 0 tuning run(s)): "
                          "42 build missing outputs, 0 rebuild stale ones\n")
    lines = [line.split() for line in out.splitlines()]
    assert ["train", str(runs)] in lines and ["prepare_data", "1"] in lines
    # by paper, then experiment: jobs, training runs, tuning runs, GPU-hours from FLOPs
    # of the config the workflow merged (every run priced)
    tiny = [line for line in lines if line[:1] == ["tiny"]]
    assert len(tiny) == 2 and tiny[0] == tiny[1] and tiny[0][1:4] == ["26", str(runs), "0"]
    assert float(tiny[0][4]) > 0
    assert f"projected GPU-hours of the {runs} training and 0 tuning run(s): {tiny[0][4]}" in out
    assert "not priced" not in out
    assert ["missing", "output", "files", "42"] in lines
    assert "all" not in [line[0] for line in lines if line]  # the target rule is no work
    # a Snakemake error is one line
    bad = _plan(wd, "--", "no/such/target.txt")
    assert bad.returncode == 1 and bad.stdout == ""
    assert bad.stderr.strip().splitlines() == [
        "pflrepro plan: error: snakemake -n no/such/target.txt failed (exit 1): No rule to "
        "produce no/such/target.txt (if you use input functions make sure that they don't "
        "raise unexpected exceptions)."]
