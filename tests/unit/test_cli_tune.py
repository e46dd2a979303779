"""The tuning commands of pflrepro.cli.tune: tune-split and tune-select, through main."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from pflrepro.cli import main
from pflrepro.store import results as R


def test_tune_split_holds_out_the_fraction_of_each_clients_training_rows(
        tmp_path: Path) -> None:
    data = tmp_path / "digits"
    assert main(["prepare", "--dataset", "digits", "--out", str(data), "--raw",
                 str(tmp_path / "raw")]) == 0
    part, val = tmp_path / "p.parquet", tmp_path / "v.parquet"
    spec = {"scheme": "iid", "clients": 2}
    assert main(["partition", "--data", str(data / "meta.json"), "--dataset", "digits",
                 "--spec", json.dumps(spec), "--seed", "0", "--out", str(part)]) == 0
    assert main(["tune-split", "--partition", str(part), "--fraction", "0.25", "--seed",
                 "3", "--out", str(val)]) == 0
    frame, split = pd.read_parquet(part), pd.read_parquet(val)
    train = frame[frame["split"] == "train"].groupby("client").size()
    held = split[split["split"] == "test"].groupby("client").size()
    assert set(split["index"]) == set(frame.loc[frame["split"] == "train", "index"])
    assert (held == (0.25 * train).round().astype(int)).all(), (held, train)


def _curve_run(curve: list[float]) -> pd.DataFrame:
    frame = pd.DataFrame([{"round": r, "client": c, "peer": -1, "metric": R.TEST_ACCURACY,
                           "value": v} for r, v in enumerate(curve) for c in (0, 1)])
    for col in R.CONFIG_COLUMNS:
        frame[col] = 0 if col.endswith("_seed") else "x"
    return frame


@pytest.mark.parametrize("figure", [False, True])
def test_tune_select_writes_the_selection_and_records_its_outputs(tmp_path: Path,
                                                                 figure: bool) -> None:
    from pflrepro.store.io import write_parquet
    from pflrepro.store.records import record_problem

    # FedAvg's last-round validation accuracy per lr: 0.2 wins (criterion final_mean)
    curves = {0.05: [0.3, 0.5], 0.2: [0.4, 0.8]}
    runs = []
    for lr, curve in curves.items():
        runs.append(str(tmp_path / f"lr{lr}.parquet"))
        write_parquet(_curve_run(curve), runs[-1])
    plan = {"algorithm": "fedavg", "fixed": {}, "clients": {"p": 2},
            "grids": {"lr": list(curves)}, "log": [], "criterion": "final_mean",
            "rounds": 2, "seeds": [0], "fraction": 0.2, "training": True,
            "trials": [{"point": {"lr": lr}, "partition": "p", "split": 0, "seed": 0}
                       for lr in curves]}
    md, csv, sel = (tmp_path / f"t.{e}" for e in ("md", "csv", "json"))
    pdf, png = tmp_path / "t.pdf", tmp_path / "t.png"
    argv = ["tune-select", "--plan", json.dumps(plan), "--md", str(md), "--csv", str(csv),
            "--selection", str(sel), "--title", "t", *runs]
    if figure:
        argv[1:1] = ["--figure", str(pdf), str(png)]
    assert main(argv) == 0
    assert json.loads(sel.read_text())["p"]["0"]["training"] == {"lr": 0.2}
    assert len(pd.read_csv(csv)) == 2
    assert pdf.is_file() == figure and png.is_file() == figure
    for path in (md, csv, sel):  # the command's outputs carry digest records
        assert record_problem(path) is None, path
