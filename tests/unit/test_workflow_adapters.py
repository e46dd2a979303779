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


def test_targets_include_weights_figure_only_with_federico() -> None:
    targets = W.all_targets(CFG)
    assert "results/tables/tiny.md" in targets
    assert "figures/tiny-weights.pdf" in targets
    raw = yaml.safe_load((REPO / "tests/workflow/config.yaml").read_text())
    raw["experiments"]["tiny"]["methods"] = ["local", "fedavg"]
    assert "figures/tiny-weights.pdf" not in W.all_targets(parse(raw))
    with pytest.raises(ValueError, match="no method with client weights"):
        W.weights_method(parse(raw), "tiny")


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
