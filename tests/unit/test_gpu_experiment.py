"""benchmarks/gpu_experiment.py and gpu_check.sh: the GPU check's steps run without Snakemake.

The GPU machine has PyTorch, pandas and PyYAML but neither Snakemake nor jsonschema, so
the experiment step runs here with both made unimportable (a folder first on PYTHONPATH
whose ``snakemake`` and ``jsonschema`` modules raise ImportError), on the demo config's
digits experiment, one round on the CPU: it must prepare, partition, train both methods
through the job commands and print the per-round table.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.workflow_full


def test_experiment_step_runs_with_the_job_commands_alone(tmp_path: Path) -> None:
    block = tmp_path / "block"
    block.mkdir()
    for name in ("snakemake", "jsonschema"):
        (block / f"{name}.py").write_text("raise ImportError('not on the GPU machine')\n")
    env = {**os.environ, "PYTHONPATH": f"{block}{os.pathsep}{REPO / 'src'}"}
    proc = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "gpu_experiment.py"), "--config",
         str(REPO / "config" / "demo.yaml"), "--experiment", "demo_fedamp", "--methods",
         "fedamp,fedavg", "--mirror", str(tmp_path), "--work", str(tmp_path / "work"),
         "--devices", "cpu", "--cpu-rounds", "1", "--threads", "1"],
        env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = [ln for ln in proc.stdout.splitlines() if ln.startswith("| fed")]
    assert [r.split("|")[1].strip() for r in rows] == ["fedamp", "fedavg"]
    for row in rows:  # the job log gives tenths of a second: a digits round may show 0.0
        assert float(row.split("|")[2]) >= 0
    assert (tmp_path / "work" / "runs" / "fedamp-cpu.parquet").is_file()


def test_an_unknown_method_is_refused_before_any_work(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "gpu_experiment.py"), "--config",
         str(REPO / "config" / "demo.yaml"), "--experiment", "demo_fedamp", "--methods",
         "fedamp,nosuch", "--mirror", str(tmp_path), "--work", str(tmp_path / "work")],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "no method(s) ['nosuch']" in proc.stderr
    assert not (tmp_path / "work").exists()


def test_the_check_script_parses() -> None:
    subprocess.run(["bash", "-n", str(REPO / "benchmarks" / "gpu_check.sh")], check=True)
