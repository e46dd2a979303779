"""pflrepro.tuning_training: a shared training setting selected by one method's score."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import yaml

import pflrepro.tuning_training as TT
import pflrepro.workflow as W
from pflrepro import results as R
from pflrepro import tuning as T
from pflrepro.config import ConfigError, parse

REPO = Path(__file__).resolve().parents[2]
RAW = yaml.safe_load((REPO / "tests/workflow/config.yaml").read_text())


def _shared(**tune: object) -> dict:
    """The tiny config, SGD, FedMix (K = 1 and 4) beside FedAvg, the lr tuned by FedAvg."""
    raw = copy.deepcopy(RAW)
    raw["training"].update(optimizer="sgd", lr=0.05)
    raw["methods"]["fedmix"] = {"algorithm": "fedmix", "experts": 4}
    raw["methods"]["fedmix_k1"] = {"algorithm": "fedmix", "experts": 1}
    tiny = raw["experiments"]["tiny"]
    tiny.pop("public")
    tiny["methods"] = ["local", "fedavg", "fedmix", "fedmix_k1"]
    tiny["tune"] = {"rounds": 2, "criterion": "final_mean",
                    "training": {"by": "fedavg", "lr": [0.05, 0.2, 0.4]}, **tune}
    return raw


def _wildcards(cfg, method: str, **more: object) -> SimpleNamespace:  # noqa: ANN001
    pid = cfg.experiments["tiny"].partitions[0].id
    return SimpleNamespace(experiment="tiny", partition=pid, method=method, split="0",
                           seed="0", **more)


def test_a_training_block_tunes_the_lr_by_one_method() -> None:
    cfg = parse(_shared())
    tune = cfg.experiments["tiny"].tune
    assert tune.training == TT.SharedTune("fedavg", (T.Grid("lr", (0.05, 0.2, 0.4)),))
    assert tune.methods == {"fedavg": tune.training.grids}  # fedavg runs the grid
    assert W.tuned_methods(cfg, "tiny") == ["fedavg"]
    # every method's final runs read fedavg's selection (and only it)
    for method in ("local", "fedavg", "fedmix", "fedmix_k1"):
        assert TT.selection_sources(cfg, "tiny", method) == ["fedavg"]
    plan = json.loads(W.tune_plan_json(cfg, "tiny", "fedavg"))
    assert plan["training"] is True and plan["grids"] == {"lr": [0.05, 0.2, 0.4]}


@pytest.mark.parametrize(("training", "more", "match"), [
    ({"by": "fedprox", "lr": [0.1]}, {}, "not a method"),
    ({"by": "fedavg", "momentum": [0.9]}, {}, "shared training keys"),
    ({"by": "fedavg", "lr": [0.0, 0.1]}, {}, "> 0"),
    ({"by": "fedavg", "lr": [0.1, 0.2]}, {"methods": {"fedmix": {"beta": [1, 2]}}},
     "tunes alone"),
])
def test_a_bad_training_block_is_refused(training: dict, more: dict, match: str) -> None:
    raw = _shared(**more)
    raw["experiments"]["tiny"]["tune"]["training"] = training
    with pytest.raises(ConfigError, match=match):
        parse(raw)


def test_the_tuning_run_trains_the_point_and_the_final_runs_train_fedavgs_choice() -> None:
    cfg = parse(_shared())
    plain = json.loads(W.run_spec_json(cfg, _wildcards(cfg, "fedavg")))
    # a tuning run of FedAvg: the grid point's lr, the budget's rounds, no new params
    spec = json.loads(TT.tune_run_spec_json(cfg, _wildcards(cfg, "fedavg", point="lr0.2")))
    assert spec["training"] == {**plain["training"], "lr": 0.2, "rounds": 2}
    assert spec["params"] == plain["params"]
    # the selection FedAvg's validation score made: every method trains at it
    pid = cfg.experiments["tiny"].partitions[0].id
    selection = json.loads(T.selection_json({(pid, 0): {"lr": 0.4}}, {(pid, 0): {}},
                                            training=True))
    specs = {m: json.loads(TT.tuned_run_spec_json(cfg, _wildcards(cfg, m),
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
    from pflrepro.io import write_parquet

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
    T.select_job(json.dumps(plan), paths, out["md"], out["csv"], out["json"], None, "t")
    selection = json.loads(Path(out["json"]).read_text())
    assert selection == {"p": {"0": {"point": {"lr": 0.2}, "params": {},
                                     "training": {"lr": 0.2}}}}
    assert TT.selected_training(selection, "p", 0) == {"lr": 0.2}
