"""pflrepro.config.settings_sources: an experiment's ``sources:`` per setting, checked."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from pflrepro.config import ConfigError, parse
from pflrepro.config.settings_sources import SETTINGS, parse_setting_sources

REPO = Path(__file__).resolve().parents[2]
TINY = yaml.safe_load((REPO / "tests/workflow/config.yaml").read_text())


def test_sources_parse_into_the_experiment() -> None:
    raw = copy.deepcopy(TINY)
    raw["experiments"]["tiny"]["sources"] = {"rounds": "unstated: 3, a test's budget",
                                             "lr": "paper: Sec. 4, 'learning rate 0.01'"}
    exp = parse(raw).experiments["tiny"]
    assert exp.sources == {"rounds": "unstated: 3, a test's budget",
                           "lr": "paper: Sec. 4, 'learning rate 0.01'"}


def test_no_sources_is_an_empty_mapping() -> None:
    assert parse(copy.deepcopy(TINY)).experiments["tiny"].sources == {}


@pytest.mark.parametrize(("spec", "message"), [
    ({"round": "unstated: typo"}, "sources.round: not a setting"),
    ({"rounds": "ours: 3"}, "sources.rounds: must read 'paper: <where"),
    ({"rounds": "paper:   "}, "sources.rounds: must read"),
    ({"rounds": 3}, "sources.rounds: must read"),
    (["rounds"], "sources: a mapping setting"),
])
def test_bad_sources_name_the_key(spec: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        parse_setting_sources(spec, "experiments.tiny.sources")


def test_the_vocabulary_covers_what_a_setting_table_needs() -> None:
    # the settings a reader needs to rebuild an experiment (issue: clients, samples per
    # client, partition, test assignment, metric, model, optimiser, lr, batch, epochs,
    # rounds, participation), each with a description
    assert list(SETTINGS) == ["clients", "samples", "partition", "test", "metric", "model",
                              "optimizer", "lr", "batch_size", "local_epochs", "rounds",
                              "participation"]
    assert all(SETTINGS.values())
