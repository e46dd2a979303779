"""benchmarks/run_all.py --quick: every benchmark runs and its correctness checks pass.

Speed targets are printed by the benchmarks, never asserted here; this only checks
that each comparison produces correct results (engine and reference FedAvg agree,
the grid writes its table, ...) and that every section is printed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SECTIONS = ("== cell:", "== grid:", "== pairwise:", "== methods:", "== scale:", "== pipeline:",
            "== gpu:", "== gpu methods:",
            "== targets", "== correctness checks:")


@pytest.mark.workflow
@pytest.mark.bench
def test_run_all_quick() -> None:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks/run_all.py"), "--quick"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-5000:]
    assert out.startswith("machine: "), out[:500]
    for section in SECTIONS:
        assert section in out, f"missing {section!r}:\n{out[-5000:]}"
    assert "FAILED" not in out, out[-5000:]
    assert "correctness checks: 0 of" not in out
