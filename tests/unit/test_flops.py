"""Counted FLOPs per model and the paper grid's projection (pflrepro.reporting.flops)."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
import yaml

from pflrepro.config import parse
from pflrepro.reporting import flops as F

REPO = Path(__file__).resolve().parents[2]
HIDDEN = 16


def _mlp_options(*hidden: int) -> tuple:
    return F._freeze({"hidden": list(hidden)})


def test_an_mlp_layer_counts_two_flops_per_multiply_add_forward_and_four_backward() -> None:
    forward, both = F.model_flops("mlp", _mlp_options(HIDDEN), (1, 28, 28), 10)
    first, second = 784 * HIDDEN, HIDDEN * 10  # multiply-adds per sample of each layer
    assert forward == 2 * (first + second)
    # backward: the weight gradient of both layers; the input gradient of the second only
    # (the data needs none)
    assert both == 2 * (first + second) + 2 * first + 4 * second


def test_deeper_models_cost_more_per_sample() -> None:
    cnn = F.model_flops("cnn", (), (3, 32, 32), 10)
    vgg11 = F.model_flops("vgg11", (), (3, 32, 32), 10)
    vgg13 = F.model_flops("vgg13", (), (3, 32, 32), 10)
    assert cnn[0] < vgg11[0] < vgg13[0]
    for forward, both in (cnn, vgg11, vgg13):
        assert 2 * forward < both < 3.1 * forward  # backward ~ twice the forward


def _tiny(**training) -> dict:
    return {
        "methods": {"fedavg": {"algorithm": "fedavg"},
                    "fedem": {"algorithm": "fedem", "components": 3},
                    "ft": {"algorithm": "fedavg_plus", "finetune_epochs": 2}},
        "experiments": {"e": {
            "description": "d", "dataset": "mnist",
            "partitions": [{"scheme": "iid", "clients": 10, "max_samples": 1000}],
            "methods": ["fedavg", "fedem", "ft"], "split_seeds": [0, 1], "train_seeds": [0],
            "training": {"rounds": 4, "eval_every": 2, "batch_size": 10, "model": "mlp",
                         "model_options": {"hidden": [HIDDEN]}, "device": "cpu",
                         **training}}},
    }


def test_a_run_is_rounds_times_training_rows_times_a_step_plus_its_evaluations() -> None:
    cfg = parse(_tiny())
    forward, step = F.model_flops("mlp", _mlp_options(HIDDEN), (1, 28, 28), 10)
    table = F.grid_projection(cfg, peak_tflops=1.0, utilisation=0.5).set_index("method")
    train_rows = 1000 * 0.8
    evals = 4 // 2 + 1
    fedavg = table.loc["fedavg"]
    assert fedavg["runs"] == 2
    assert fedavg["train_flops"] == pytest.approx(2 * 4 * train_rows * step)
    assert fedavg["eval_flops"] == pytest.approx(2 * evals * 1000 * forward)
    assert fedavg["extra_flops"] == 0
    assert fedavg["gpu_hours"] == pytest.approx(fedavg["flops"] / 0.5e12 / 3600)
    fedem = table.loc["fedem"]  # 3 components: three models trained and evaluated
    assert fedem["train_flops"] == pytest.approx(3 * fedavg["train_flops"])
    assert fedem["eval_flops"] == pytest.approx(3 * fedavg["eval_flops"])
    ft = table.loc["ft"]  # 2 epochs of fine-tuning before each evaluation
    assert ft["extra_flops"] == pytest.approx(2 * evals * 2 * train_rows * step)


def test_client_sampling_scales_the_training_not_the_evaluation() -> None:
    def fedavg(**training) -> pd.Series:
        raw = _tiny(**training)
        raw["experiments"]["e"]["methods"] = ["fedavg"]
        return F.grid_projection(parse(raw)).set_index("method").loc["fedavg"]

    full, half = fedavg(), fedavg(client_fraction=0.5)
    assert half["train_flops"] == pytest.approx(full["train_flops"] / 2)
    assert half["eval_flops"] == pytest.approx(full["eval_flops"])


def test_tuning_runs_are_grid_points_times_seeds_per_partition_and_split() -> None:
    raw = _tiny()
    raw["methods"]["prox"] = {"algorithm": "fedprox"}
    raw["experiments"]["e"]["methods"].append("prox")
    raw["experiments"]["e"]["tune"] = {"rounds": 2, "seeds": [0, 1],
                                       "methods": {"prox": {"mu": [0.1, 1, 10]}}}
    row = F.grid_projection(parse(raw)).set_index("method").loc["prox"]
    assert row["tuning_runs"] == 3 * 2 * 2  # points x seeds x split seeds
    assert row["tuning_flops"] > 0
    assert F.grid_projection(parse(raw)).set_index("method").loc["fedavg", "tuning_runs"] == 0


def test_bad_device_assumptions_are_refused() -> None:
    with pytest.raises(ValueError, match="utilisation"):
        F.grid_projection(parse(_tiny()), utilisation=0.0)


def test_the_paper_grid_projection_covers_every_paper_experiment(tmp_path: Path) -> None:
    md, csv = tmp_path / "p.md", tmp_path / "p.csv"
    table = F.write_grid_projection([REPO / "config.yaml"], md, csv, peak_tflops=67.0,
                                    utilisation=0.1)
    raw = yaml.safe_load((REPO / "config.yaml").read_text())
    paper = {n for n, e in raw["experiments"].items() if e.get("scale", "paper") == "paper"}
    assert set(table["experiment"]) == paper
    assert (table["gpu_hours"] > 0).all() and table["flops"].map(math.isfinite).all()
    text = md.read_text()
    assert "PROJECTED" in text and "grid total" in text and "utilisation" in text
    out = pd.read_csv(csv)
    assert out["kind"].eq("projection").all()
    assert out.iloc[-1]["paper"] == "total"
    assert out.iloc[-1]["flops"] == pytest.approx(table["flops"].sum())


def test_the_projection_is_a_target_at_paper_scale_only() -> None:
    raw = _tiny()
    assert F.projection_targets(parse(raw)) == ["results/tables/paper-grid-projection.md",
                                                "results/tables/paper-grid-projection.csv"]
    raw["experiments"]["e"]["scale"] = "cpu"
    assert F.projection_targets(parse({**raw, "scale": "cpu"})) == []


def test_algorithms_that_score_peers_or_distil_add_extra_work() -> None:
    assert F.algorithm_work("fedfomo", {"downloads": -1, "val_fraction": 0.2}, 11
                            ).peer_scoring == pytest.approx(2.0)
    assert F.algorithm_work("federico", {"neighbors": 3}, 8).peer_scoring == 3
    assert F.algorithm_work("feddf", {"server_steps": 100}, 8).server_steps == 100
    assert F.algorithm_work("fedavg", {}, 8) == F.Work()
