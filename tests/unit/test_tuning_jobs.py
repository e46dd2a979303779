"""pflrepro.pipeline.tuning_jobs: the tune-select job and the tuning and final runs' specs."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from test_tuning_training import _shared, _wildcards

import pflrepro.pipeline.tuning_jobs as TJ
import pflrepro.pipeline.workflow as W
import pflrepro.tuning.shared as TT
from pflrepro import tuning as T
from pflrepro.config import parse
from pflrepro.store import results as R


def _curve_run(curve: list[float]) -> pd.DataFrame:
    rows = [{"round": r, "client": c, "peer": -1, "metric": R.TEST_ACCURACY, "value": v}
            for r, v in enumerate(curve) for c in (0, 1)]
    return pd.DataFrame(rows)


def test_select_job_writes_outputs(tmp_path) -> None:  # noqa: ANN001
    from pflrepro.store.io import write_parquet

    points = [{"sigma": 1e-5}, {"sigma": 1e-3}]
    paths = []
    for i, curve in enumerate(([0.5, 0.6], [0.5, 0.9])):
        frame = _curve_run(curve)
        for col in R.CONFIG_COLUMNS:
            frame[col] = 0 if col.endswith("_seed") else "x"
        paths.append(str(tmp_path / f"r{i}.parquet"))
        write_parquet(frame, paths[-1])
    plan = {"algorithm": "fedamp", "fixed": {}, "clients": {"p": 20},
            "grids": {"sigma": [1e-5, 1e-3]}, "log": ["sigma"], "criterion": "best_mean",
            "rounds": 1, "seeds": [0], "fraction": 0.2,
            "trials": [{"point": p, "partition": "p", "split": 0, "seed": 0} for p in points]}
    out = {k: str(tmp_path / f"t.{k}") for k in ("md", "csv", "json", "pdf", "png")}
    TJ.select_job(json.dumps(plan), paths, out["md"], out["csv"], out["json"],
                 (out["pdf"], out["png"]), "t")
    selection = json.loads(open(out["json"]).read())
    assert selection["p"]["0"]["params"] == {"sigma": 1e-3, "alpha": 5e-5, "lam": 5e-5}
    assert "sigma chosen on validation from {1e-05, 0.001}: p split 0: 0.001" in \
        open(out["md"]).read()
    assert len(pd.read_csv(out["csv"])) == 2


def test_the_tuning_run_trains_the_point_and_the_final_runs_train_fedavgs_choice() -> None:
    cfg = parse(_shared())
    plain = json.loads(W.run_spec_json(cfg, _wildcards(cfg, "fedavg")))
    # a tuning run of FedAvg: the grid point's lr, the budget's rounds, no new params
    spec = json.loads(TJ.tune_run_spec_json(cfg, _wildcards(cfg, "fedavg", point="lr0.2")))
    assert spec["training"] == {**plain["training"], "lr": 0.2, "rounds": 2}
    assert spec["params"] == plain["params"]
    # the selection FedAvg's validation score made: every method trains at it
    pid = cfg.experiments["tiny"].partitions[0].id
    selection = json.loads(T.selection_json({(pid, 0): {"lr": 0.4}}, {(pid, 0): {}},
                                            training=True))
    specs = {m: json.loads(TJ.tuned_run_spec_json(cfg, _wildcards(cfg, m),
                                                  {"fedavg": selection}))
             for m in ("local", "fedavg", "fedmix", "fedmix_k1")}
    assert {m: s["training"]["lr"] for m, s in specs.items()} == \
        dict.fromkeys(specs, 0.4)
    assert specs["fedavg"]["training"] == specs["fedmix_k1"]["training"] == \
        {**plain["training"], "lr": 0.4}
    assert specs["fedmix"]["params"] == json.loads(
        W.run_spec_json(cfg, _wildcards(cfg, "fedmix")))["params"]
    with pytest.raises(ValueError, match="no entry"):
        TT.selected_training(selection, "other", 0)


def _fedavg_run(curve: list[float]) -> pd.DataFrame:
    frame = pd.DataFrame([{"round": r, "client": c, "peer": -1, "metric": R.TEST_ACCURACY,
                           "value": v} for r, v in enumerate(curve) for c in (0, 1)])
    for col in R.CONFIG_COLUMNS:
        frame[col] = 0 if col.endswith("_seed") else "x"
    return frame


def test_select_job_picks_the_lr_by_fedavgs_validation_score(tmp_path: Path) -> None:
    from pflrepro.store.io import write_parquet

    # FedAvg's last-round validation accuracy per lr: 0.2 wins (criterion final_mean)
    curves = {0.05: [0.3, 0.5], 0.2: [0.4, 0.8], 0.4: [0.9, 0.6]}
    paths = []
    for lr, curve in curves.items():
        paths.append(str(tmp_path / f"lr{lr}.parquet"))
        write_parquet(_fedavg_run(curve), paths[-1])
    plan = {"algorithm": "fedavg", "fixed": {}, "clients": {"p": 2}, "grids": {"lr": list(curves)},
            "log": [], "criterion": "final_mean", "rounds": 2, "seeds": [0], "fraction": 0.2,
            "training": True,
            "trials": [{"point": {"lr": lr}, "partition": "p", "split": 0, "seed": 0}
                       for lr in curves]}
    out = {k: str(tmp_path / f"t.{k}") for k in ("md", "csv", "json")}
    TJ.select_job(json.dumps(plan), paths, out["md"], out["csv"], out["json"], None, "t")
    selection = json.loads(Path(out["json"]).read_text())
    assert selection == {"p": {"0": {"point": {"lr": 0.2}, "params": {},
                                     "training": {"lr": 0.2}}}}
    assert TT.selected_training(selection, "p", 0) == {"lr": 0.2}
