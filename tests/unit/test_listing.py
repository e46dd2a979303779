"""pflrepro.inspect.listing: hyperparameters stated by the paper, set by us, tuned or default."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from pflrepro.config import parse
from pflrepro.inspect.listing import hyperparameters, render

REPO = Path(__file__).resolve().parents[2]
TINY = yaml.safe_load((REPO / "tests/workflow/config.yaml").read_text())


def _config() -> dict:
    raw = copy.deepcopy(TINY)
    raw["methods"]["federico"]["sources"] = {"beta": "paper: FedeRiCo's default 0.6",
                                             "epsilon": "unstated: our reading"}
    raw["methods"]["fedamp"] = {"algorithm": "fedamp", "distance": "mean",
                                "sources": {"sigma": "unstated: no value in the text"}}
    tiny = raw["experiments"]["tiny"]
    tiny["methods"] = [*tiny["methods"], "fedamp"]
    other = copy.deepcopy(tiny)
    other.pop("tune", None)
    raw["experiments"]["other"] = other
    tiny["tune"] = {"rounds": 1, "methods": {"fedamp": {"sigma": [1e-5, 1e-3]}}}
    return raw


def _lines(text: str, method: str) -> list[str]:
    block = text.split(f"## {method} (")[1].split("\n\n")[0]
    return block.splitlines()[1:]


def test_each_value_says_where_it_comes_from() -> None:
    text = hyperparameters(parse(_config()))
    fed = _lines(text, "federico")
    assert "  - beta = 0.6: stated by the paper (FedeRiCo's default 0.6)" in fed
    assert "  - epsilon = 0.3: the algorithm's default (unstated: our reading)" in fed
    assert "  - neighbors = 3: the algorithm's default" in fed
    amp = _lines(text, "fedamp")
    assert ("  - sigma = tuned: tuned on validation by tiny (unstated: no value in the text); "
            "the algorithm's default 1e-05 in other") in amp
    # alpha and lam follow sigma (FedAMP.tied_values) where it is tuned
    assert ("  - alpha = tuned: tied to the tuned values by tiny; the algorithm's default "
            "1e-07 in other") in amp
    assert "  - distance = 'mean': set by us (no reason given in the config)" in amp
    assert "  - init = 'shared': the algorithm's default" in amp


def test_a_value_the_config_fixes_is_set_not_tuned() -> None:
    raw = _config()
    raw["methods"]["fedamp"]["sigma"] = 1e-4
    raw["methods"]["fedamp"]["sources"]["sigma"] = "unstated: calibrated by hand"
    raw["experiments"]["tiny"]["tune"]["methods"]["fedamp"]["prox"] = [1.0]
    amp = _lines(hyperparameters(parse(raw)), "fedamp")
    assert "  - sigma = 0.0001: set by us: calibrated by hand" in amp
    assert any(line.startswith("  - prox = tuned: tuned on validation by tiny") for line in amp)


def test_render_needs_a_config_for_hyperparameters() -> None:
    with pytest.raises(ValueError, match="needs a config"):
        render("hyperparameters")
    # `pflrepro list` is one screen: the hyperparameters' provenance (~300 lines for
    # config.yaml) only behind `list hyperparameters`
    assert "## fedamp (fedamp)" not in render("all", parse(_config()))
    overview = render("all")
    assert "# Hyperparameters of the config" not in overview
    assert "pflrepro list hyperparameters" in overview and "pflrepro list methods" in overview
    assert len(overview.splitlines()) <= 60


def test_long_experiment_lists_are_named_once() -> None:
    # "tuned on validation by" and 17 experiment names, repeated for every tuned key
    raw = _config()
    for i in range(4):
        raw["experiments"][f"copy{i}"] = raw["experiments"]["tiny"]
    text = hyperparameters(parse(raw))
    amp = _lines(text, "fedamp")
    assert any("tuned on validation by the 5 experiments of E1" in line for line in amp)
    assert "  - E1: tiny, copy0, copy1, copy2, copy3" in text
    assert text.count("copy3") == 1
