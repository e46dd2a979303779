import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

import pflrepro.workflow as W
from pflrepro.config import parse

REPO = Path(__file__).resolve().parents[2]
CFG = parse(yaml.safe_load((REPO / "tests/workflow/config.yaml").read_text()))
PID = CFG.experiments["tiny"].partitions[0].id


def test_alternation_matches_exact_names_longest_first() -> None:
    import re

    pattern = re.compile(f"^(?:{W.alternation(['fedavg', 'fedavg_plus'])})$")
    assert pattern.match("fedavg") and pattern.match("fedavg_plus")
    assert not pattern.match("fedav")
    assert not re.match(f"^(?:{W.alternation([])})$", "")


def test_targets_have_a_weights_figure_per_weight_learning_method() -> None:
    targets = W.all_targets(CFG)
    assert "results/tables/tiny.md" in targets
    assert "figures/tiny-accuracy.pdf" in targets
    assert "figures/tiny-weights-federico.pdf" in targets
    assert not any("weights-fedavg" in t for t in targets)
    raw = yaml.safe_load((REPO / "tests/workflow/config.yaml").read_text())
    raw["experiments"]["tiny"]["methods"] = ["local", "fedavg"]
    assert not any("-weights" in t for t in W.all_targets(parse(raw)))
    with pytest.raises(ValueError, match="no method with client weights"):
        W.weights_method(parse(raw), "tiny")


def test_figures_and_scale_select_targets() -> None:
    raw = yaml.safe_load((REPO / "tests/workflow/config.yaml").read_text())
    raw["experiments"]["tiny"]["figures"] = ["client_accuracy", "client_weights"]
    raw["experiments"]["tiny"]["focus_client"] = 2
    figures = [t for t in W.all_targets(parse(raw)) if t.startswith("figures/tiny")]
    assert figures == ["figures/tiny-client2-accuracy.pdf", "figures/tiny-client2-accuracy.png",
                       "figures/tiny-client2-weights.pdf", "figures/tiny-client2-weights.png"]
    raw["experiments"]["tiny"]["scale"] = "cpu"
    assert W.all_targets(parse(raw)) == []  # the config's scale is 'paper'
    raw["scale"] = "cpu"
    assert "results/tables/tiny.md" in W.all_targets(parse(raw))


def test_combined_tables_and_labels() -> None:
    raw = yaml.safe_load((REPO / "tests/workflow/config.yaml").read_text())
    raw["experiments"]["tiny"]["partitions"][0]["label"] = "two groups"
    raw["experiments"]["tiny"]["label"] = "Tiny"
    raw["tables"] = {"both": {"experiments": ["tiny"], "caption": "c", "metric": "mean_bmta"}}
    cfg = parse(raw)
    assert "results/tables/both.csv" in W.all_targets(cfg)
    assert W.table_inputs(cfg, "both") == ["results/aggregate/tiny.parquet"]
    pid = cfg.experiments["tiny"].partitions[0].id
    assert json.loads(W.display_labels(cfg, ["tiny"])) == {
        "experiments": {"tiny": "Tiny"}, "partitions": {pid: "two groups"}}
    assert W.table_methods(cfg, ["tiny"]) == "local fedavg fedavg_plus federico"


def test_run_paths_and_inputs() -> None:
    paths = W.run_paths(CFG, "tiny", "federico")
    assert len(paths) == 4
    assert f"results/runs/tiny/{PID}/federico/split0-seed1.parquet" in paths
    wc = SimpleNamespace(experiment="tiny", partition=PID, method="federico", split="0",
                         seed="1")
    assert W.experiment_path(CFG, wc, "meta") == "results/data/digits/meta.json"
    assert W.experiment_path(CFG, wc, "partition") == \
        f"results/partitions/digits/{PID}/split0.parquet"
    assert W.train_resource(CFG, wc, "mem_mb") == 1000
    assert '"algorithm":"federico"' in W.run_spec_json(CFG, wc)


def test_unknown_partition_id_is_an_error() -> None:
    wc = SimpleNamespace(experiment="tiny", partition="nope", method="fedavg", split="0",
                         seed="0")
    with pytest.raises(ValueError, match="nope"):
        W.experiment_path(CFG, wc, "partition")


def test_mirror_args_are_quoted() -> None:
    raw = yaml.safe_load((REPO / "tests/workflow/config.yaml").read_text())
    raw["data"] = {"mirrors": {"digits": ["/a b/c", "http://x/"]}}
    assert W.mirror_args(parse(raw), "digits") == "--mirror '/a b/c' --mirror http://x/"
