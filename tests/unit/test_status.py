"""The `pflrepro status` scanner (pflrepro.inspect.status) and its command."""

import os
import time
from pathlib import Path

import pytest

from pflrepro.cli import main
from pflrepro.inspect.status import format_status, job_status


def _job(root: Path, log: str | None, run: bool = False, age_s: float = 0.0,
         key: str = "e/p/m/split0-seed0", partial: bool = False) -> None:
    if run:
        path = root / "results/runs" / f"{key}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x")
    if partial:
        path = root / "results/runs" / f"{key}.partial.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x")
    if log is not None:
        path = root / "logs/train" / f"{key}.log"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(log)
        then = time.time() - age_s
        os.utime(path, (then, then))


def test_status_classifies_jobs(tmp_path: Path) -> None:
    prefix = "2026-01-01 10:00:00,000 INFO pflrepro.store.progress: "
    _job(tmp_path, prefix.replace("progress", "run") + "fedavg: 3 rounds in 1.5 s\n",
         run=True, key="e/p/m/split0-seed0")
    _job(tmp_path, prefix + "round 2/5: mean acc 0.5000, weighted acc 0.5000, loss 1.0, "
         "elapsed 2.0s, left ~3.0s\n", key="e/p/m/split0-seed1", partial=True)
    _job(tmp_path, "2026-01-01 10:00:00,000 ERROR pflrepro: boom\n", key="e/p/m/split1-seed0")
    _job(tmp_path, prefix + "round 1/5: ...\n", age_s=7200, key="f/p/m/split0-seed0")
    jobs = job_status(tmp_path / "results", tmp_path / "logs",
                      expected=[("f", "p", "m", "split9-seed9")], stale_after_s=3600)
    states = {(j.experiment, j.run): (j.state, j.detail) for j in jobs}
    assert states[("e", "split0-seed0")] == ("finished", "fedavg: 3 rounds in 1.5 s")
    assert states[("e", "split0-seed1")][0] == "running"
    assert states[("e", "split0-seed1")][1].startswith("round 2/5: mean acc 0.5000")
    assert "split0-seed1.partial.parquet" in states[("e", "split0-seed1")][1]
    assert states[("e", "split1-seed0")][0] == "failed"
    assert states[("e", "split1-seed0")][1].startswith("boom (log: ")
    assert states[("f", "split0-seed0")][0] == "stale"
    assert states[("f", "split9-seed9")] == ("pending", "")
    text = format_status(jobs)
    assert "| e | 1 | 1 | 0 | 1 | 0 |" in text
    assert "| f | 0 | 0 | 1 | 0 | 1 |" in text
    assert "| **all** | 1 | 1 | 1 | 1 | 1 |" in text


def test_status_command_on_an_empty_directory(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "r").mkdir()  # a results directory that does not exist is refused
    assert main(["status", "--results", str(tmp_path / "r"), "--logs",
                 str(tmp_path / "l")]) == 0
    assert "no training jobs found" in capsys.readouterr().out


def test_status_lists_tuning_selections_that_may_miss_their_optimum(tmp_path: Path) -> None:
    import pandas as pd

    from pflrepro.inspect.status import tuning_warnings

    root = tmp_path / "results/tuning/e"
    root.mkdir(parents=True)
    rows = [{"partition": "p", "split": 0, "point": f"s{s}", "value_sigma": s,
             "value_prox": x, "selected": sel}
            for s, x, sel in ((1e-6, 0.0, True), (1e-5, 1.0, False))]
    # a table with the warning column: its text; one without: the edges found here
    pd.DataFrame([{**r, "warning": "w" if r["selected"] else ""} for r in rows]) \
        .to_csv(root / "fedamp.csv", index=False)
    pd.DataFrame(rows).to_csv(root / "heurfedamp.csv", index=False)
    found = tuning_warnings(tmp_path / "results")
    assert found == ["e/fedamp, p split 0: w",
                     "e/heurfedamp, p split 0: sigma = 1e-06: the grid's lowest value"]
    text = format_status([], found)
    assert "tuning selections that may miss their optimum" in text and "  e/fedamp" in text
    main(["status", "--results", str(tmp_path / "results"), "--logs", str(tmp_path / "l")])
