"""Method names shown in tables and figures (pflrepro.reporting.names)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pflrepro.reporting.names import METHOD_NAMES, method_name, method_names

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
    ids: set[str] = set()
    for path in [ROOT / "config.yaml", *sorted((ROOT / "config").glob("*.yaml"))]:
        raw = yaml.safe_load(path.read_text())
        if isinstance(raw, dict) and isinstance(raw.get("methods"), dict):
            ids |= set(raw["methods"])
    missing = sorted(ids - set(METHOD_NAMES))
    assert not missing, missing
    names = list(METHOD_NAMES.values())
    assert len(set(names)) == len(names)
