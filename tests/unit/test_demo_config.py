"""config/demo.yaml: the demo shows every method of the four papers on bundled data."""

from __future__ import annotations

from pathlib import Path

import yaml

from pflrepro.algorithms.registry import INFOS
from pflrepro.config import parse

REPO = Path(__file__).resolve().parents[2]
#: Algorithms that are no paper's method: the majority-class reference row.
REFERENCES = {"majority"}


def test_the_demo_runs_every_method_of_the_four_papers_on_digits() -> None:
    cfg = parse(yaml.safe_load((REPO / "config/demo.yaml").read_text()))
    ran = {cfg.methods[m].algorithm for exp in cfg.experiments.values() for m in exp.methods}
    assert ran == set(INFOS) - REFERENCES, sorted(set(INFOS) - REFERENCES - ran)
    assert {exp.dataset for exp in cfg.experiments.values()} == {"digits"}  # no download
    # one experiment per paper, named for it; FedMix's gate and posterior figures drawn
    assert sorted(cfg.experiments) == ["demo_fedamp", "demo_federico", "demo_fedmix",
                                       "demo_perfedckt"]
    assert "weights" in cfg.experiments["demo_fedmix"].figures
