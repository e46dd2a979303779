"""pflrepro.reporting.settings_table: every setting's value beside its source."""

from __future__ import annotations

import copy
from pathlib import Path

import yaml

from pflrepro.config import load_config_file, parse
from pflrepro.reporting.settings_table import render, setting_values, unsourced

REPO = Path(__file__).resolve().parents[2]
TINY = yaml.safe_load((REPO / "tests/workflow/config.yaml").read_text())


def _tiny(**sources: str) -> dict:
    raw = copy.deepcopy(TINY)
    raw["experiments"]["tiny"]["sources"] = dict(sources)
    return raw


def test_values_are_read_from_the_config() -> None:
    cfg = parse(_tiny())
    values = setting_values(cfg.experiments["tiny"], cfg)
    assert values["clients"] == "4"
    assert values["samples"] == ("max_samples=1500, sizes=by_group; "
                                 "max_samples=1500, min_samples=2")
    assert values["partition"].startswith("label_groups: groups=2")
    assert values["test"] == "each client's own rows, 0.2 held out"
    assert values["metric"] == "figures only (no table)"
    assert values["model"] == "mlp {'hidden': [16]}"
    assert (values["optimizer"], values["lr"], values["batch_size"]) == ("adam", "0.01", "32")
    assert (values["local_epochs"], values["rounds"]) == ("1", "3")
    assert values["participation"] == "every client every round"


def test_a_table_names_its_metric() -> None:
    raw = _tiny()
    raw["tables"] = {"t": {"experiments": ["tiny"], "metric": "mean_bmta", "caption": "c"}}
    cfg = parse(raw)
    assert setting_values(cfg.experiments["tiny"], cfg)["metric"].startswith("mean_bmta (best")


def test_unsourced_lists_every_missing_setting() -> None:
    cfg = parse(_tiny(rounds="unstated: 3, a test's budget"))
    missing = unsourced(cfg)
    assert ("tiny", "rounds") not in missing
    assert ("tiny", "clients") in missing
    assert len(missing) == 11
    assert unsourced(cfg, scale="cpu") == []


def test_the_markdown_shows_value_and_source() -> None:
    text = render(parse(_tiny(rounds="unstated: 3, a test's budget")))
    assert "| rounds | 3 | unstated: 3, a test's budget |" in text
    assert "| clients | 4 | **none** |" in text


def test_every_paper_scale_setting_of_the_shipped_config_has_a_source() -> None:
    cfg = parse(load_config_file(REPO / "config.yaml"))
    assert unsourced(cfg) == []


def test_docs_settings_is_the_generated_table() -> None:
    cfg = parse(load_config_file(REPO / "config.yaml"))
    assert (REPO / "docs/settings.md").read_text() == render(cfg) + "\n", (
        "docs/settings.md is stale: pflrepro list settings > docs/settings.md")
