"""pflrepro.tuning.shared: a shared training setting selected by one method's score."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

import pflrepro.pipeline.tuning_jobs as TJ
import pflrepro.pipeline.workflow as W
import pflrepro.tuning.shared as TT
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
        assert TJ.selection_sources(cfg, "tiny", method) == ["fedavg"]
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
