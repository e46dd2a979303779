"""The cost commands of pflrepro.cli.cost: grid-projection (cost-projection and cost are
tested with their modules, test_cost_projection.py and test_cost.py)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import yaml

from pflrepro.cli import main

REPO = Path(__file__).resolve().parents[2]


def test_grid_projection_writes_both_tables(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    raw = yaml.safe_load((REPO / "tests/workflow/config.yaml").read_text())
    config.write_text(yaml.safe_dump(raw))
    md, csv = tmp_path / "p.md", tmp_path / "p.csv"
    assert main(["grid-projection", "--config", str(config), "--md", str(md), "--csv",
                 str(csv), "--peak-tflops", "10", "--utilisation", "0.5"]) == 0
    table = pd.read_csv(csv)
    assert (table["peak_tflops"] == 10).all() and (table["utilisation"] == 0.5).all()
    assert "PROJECTED" in md.read_text()
    from pflrepro.store.records import record_problem

    assert record_problem(md) is None and record_problem(csv) is None  # pflrepro verify's
