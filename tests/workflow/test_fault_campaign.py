"""The fault campaign's quick subset holds: 0 silent, 0 stuck, 0 tracebacks.

Tier ``workflow_full`` (``pytest -m workflow_full``): ``benchmarks/fault_campaign.py
--quick`` builds a tiny project of its own and runs one or two trials of every group
(hostile nodes, links, archives, servers, inputs, configs, damaged state, a SIGKILL of
Snakemake while a training job starts), a few minutes on 2 cores. The whole campaign is
``python benchmarks/fault_campaign.py`` (docs/reliability.md).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.workflow, pytest.mark.workflow_full]


def test_the_quick_campaign_has_nothing_silent_stuck_or_a_traceback(tmp_path: Path) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "fault_campaign.py"),
                           "--quick", "--scratch", str(tmp_path)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=1200)
    out = proc.stdout + proc.stderr
    totals = re.search(r"^\| \*\*all\*\* \| (\d+) \| (\d+) \| (\d+) \| (\d+) \| (\d+) \| (\d+) \|",
                       out, re.MULTILINE)
    assert totals, out
    trials, held, silent, stuck, traceback, unclear = map(int, totals.groups())
    assert trials >= 20, out
    assert (silent, stuck, traceback) == (0, 0, 0), out
    assert proc.returncode == 0, out
    assert held + unclear == trials
