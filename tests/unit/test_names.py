"""Method names shown in tables and figures (pflrepro.reporting.names)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pflrepro.algorithms.registry import INFOS
from pflrepro.reporting.names import METHOD_NAMES, method_labels, method_name, method_names

ROOT = Path(__file__).resolve().parents[2]


def test_papers_names_and_unknown_ids_as_themselves() -> None:
    assert method_name("fedavg_plus") == "FedAvg+"
    assert method_name("fedprox_ft") == "FedProx-FT"
    assert method_name("fedavg_ft") == "FedAvg-FT"
    assert method_name("heurfedamp") == "HeurFedAMP"
    assert method_name("my_variant") == "my_variant"
    assert method_names(["fedavg", "my_variant"]) == {"fedavg": "FedAvg",
                                                      "my_variant": "my_variant"}


def test_two_ids_that_would_look_alike_are_refused() -> None:
    # a user's method called "FedAvg" beside the id fedavg: the legend could not tell them apart
    with pytest.raises(ValueError, match="both be shown as 'FedAvg'"):
        method_names(["fedavg", "FedAvg"])


def test_every_shipped_method_id_has_a_distinct_name() -> None:
    ids: set[str] = set(INFOS)
    labels: dict[str, str] = {}
    for path in [ROOT / "config.yaml", *sorted((ROOT / "config").glob("*.yaml"))]:
        raw = yaml.safe_load(path.read_text())
        if isinstance(raw, dict) and isinstance(raw.get("methods"), dict):
            ids |= set(raw["methods"])
            labels |= {m: spec["label"] for m, spec in raw["methods"].items()
                       if isinstance(spec, dict) and "label" in spec}
    with method_labels(labels):
        shown = {m: method_name(m) for m in ids}
    missing = sorted(m for m, name in shown.items() if name == m)
    assert not missing, missing
    assert len(set(shown.values())) == len(shown)


def test_a_config_label_comes_first_then_the_table_then_the_method_file() -> None:
    # the method file's declaration: fedavg.py says display_name = "FedAvg"
    assert INFOS["fedavg"].display_name == "FedAvg" and "fedavg" not in METHOD_NAMES
    assert method_name("fedavg") == "FedAvg"
    with method_labels({"fedavg": "FedAvg (SGD)", "fedavgm": "FedAvgM"}):
        assert method_name("fedavg") == "FedAvg (SGD)"
        assert method_names(["fedavgm", "local"]) == {"fedavgm": "FedAvgM", "local": "Local"}
    assert method_name("fedavgm") == "fedavgm"  # outside the block: no label


def test_a_variant_label_reaches_the_labels_json() -> None:
    import json

    from pflrepro.config import parse
    from pflrepro.pipeline.workflow import display_labels

    raw = yaml.safe_load((ROOT / "tests/workflow/config.yaml").read_text())
    raw["methods"]["federico"]["label"] = "FedeRiCo (ours)"
    cfg = parse(raw)
    assert cfg.methods["federico"].label == "FedeRiCo (ours)"
    assert json.loads(display_labels(cfg, ["tiny"]))["methods"] == {
        "federico": "FedeRiCo (ours)"}


def test_groups_are_named_by_their_partitions_where_they_agree() -> None:
    from pflrepro.data.schemes.label_permutation import LabelPermutationPartitioner
    from pflrepro.data.schemes.rotation import RotationPartitioner
    from pflrepro.reporting.names import group_name

    rotation = RotationPartitioner(clients=8, groups=4)
    assert rotation.group_names() == ("rotated 0°", "rotated 90°", "rotated 180°",
                                      "rotated 270°")
    permutation = LabelPermutationPartitioner(clients=8, groups=3)
    assert permutation.group_names() == ("labels as given", "label permutation 1",
                                         "label permutation 2")
    with method_labels({}, {"rot": rotation.group_names(),
                            "perm": permutation.group_names()}):
        assert group_name(1, ["rot"]) == "rotated 90°"
        assert group_name(1, ["rot", "perm"]) == "distribution 1"  # they disagree
        assert group_name(1, ["label_groups-x"]) == "distribution 1"  # names none
        assert group_name(-1, ["rot"], "no distribution id") == "no distribution id"
    assert group_name(1, ["rot"]) == "distribution 1"  # outside the block
