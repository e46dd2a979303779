"""benchmarks/fedamp_design.py: the oracle's fixed ξ and the readings' parameters by hand."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
if str(REPO / "benchmarks") not in sys.path:
    sys.path.insert(0, str(REPO / "benchmarks"))

import fedamp_design as D  # noqa: E402

from pflrepro.algorithms.fedamp import FedAMP  # noqa: E402


def test_oracle_xi_by_hand() -> None:
    groups = np.array([0, 1, 0, 0, 1])
    block = D.oracle_xi("block", groups)
    third, half = 1.0 / 3.0, 0.5
    expected = torch.tensor([[third, 0, third, third, 0], [0, half, 0, 0, half],
                             [third, 0, third, third, 0], [third, 0, third, third, 0],
                             [0, half, 0, 0, half]], dtype=torch.float64)
    torch.testing.assert_close(block, expected)
    torch.testing.assert_close(D.oracle_xi("identity", groups), torch.eye(5, dtype=torch.float64))
    torch.testing.assert_close(D.oracle_xi("uniform", groups),
                               torch.full((5, 5), 0.2, dtype=torch.float64))
    with pytest.raises(ValueError):
        D.oracle_xi("flat", groups)


def test_oracle_patch_is_undone() -> None:
    original = FedAMP.attention
    with D.oracle("block"):
        assert FedAMP.attention is not original
    assert FedAMP.attention is original


def test_xi_stats_and_reading_params() -> None:
    groups = np.array([0, 0, 1, 1])
    xi = np.array([[0.5, 0.3, 0.1, 0.1], [0.3, 0.5, 0.1, 0.1],
                   [0.1, 0.1, 0.5, 0.3], [0.1, 0.1, 0.3, 0.5]])
    within, across, mass = D.xi_stats(xi, groups)
    assert within == pytest.approx(0.3) and across == pytest.approx(0.1)
    assert mass == pytest.approx(0.3 / 0.5)
    assert D.reading_params("1e-6/0.25/capped/2") == {
        "sigma": 1e-6, "alpha": 2.5e-7, "lam": 5e-7, "step": "capped"}


def test_design_names_mean_their_options() -> None:
    assert D.design_from_name("fashion_g2_d100_h16") == (
        "fashion_mnist", {"groups": 2, "dominant_share": 1.0}, {"model_options": {"hidden": [16]}})
    assert D.design_from_name("fashion_g2_d95_half") == (
        "fashion_mnist", {"groups": 2, "dominant_share": 0.95, "max_samples": 1500}, {})
    assert D.design_from_name("fashion_d95_x4") == (
        "fashion_mnist", {"dominant_share": 0.95, "max_samples": 12000}, {})
    assert D.design_from_name("fashion_base") == ("fashion_mnist", {}, {})
    for name, spec in D.DESIGNS.items():
        assert D.design_from_name(name) == spec, name
    for bad in ("fashion_q3", "fashion_dx", "fashion__base", "cifar_base"):
        with pytest.raises(ValueError):
            D.design_from_name(bad)


def test_the_xi_claims_are_checked_on_the_design_the_oracle_chooses() -> None:
    # config.yaml's fedamp_grouped_fashion_cpu is the oracle's design fashion_g2_d100 (2
    # groups of disjoint classes, the practical design's model and data), and the
    # oracle's table in docs/methods/fedamp.md gives it at least the stated 1 point
    import re

    import yaml

    from pflrepro.config import parse
    from pflrepro.reporting.claims.parse import load_claims

    raw = yaml.safe_load((REPO / "config.yaml").read_text())
    exp = parse({**raw, "scale": "cpu"}).experiments["fedamp_grouped_fashion_cpu"]
    dataset, popts, topts = D.design_from_name("fashion_g2_d100")
    (part,) = raw["experiments"]["fedamp_grouped_fashion_cpu"]["partitions"]
    assert exp.dataset == dataset and part["scheme"] == "practical"
    assert {k: v for k, v in part.items() if k not in ("scheme", "label")} == {
        **D.BASE_PARTITION, **popts}
    training = {**D.BASE_TRAINING, **topts}
    assert exp.training.model_options == training["model_options"]
    assert (exp.training.rounds, exp.training.lr) == (training["rounds"], training["lr"])
    doc = (REPO / "docs/methods/fedamp.md").read_text()
    (margin,) = re.findall(r"^\| fashion_g2_d100 \|.*\| ([+-]\d+\.\d+) \|$", doc, re.M)
    assert float(margin) >= 1.0
    claims = {c.id: c for c in load_claims(REPO / "config/claims.yaml")}
    for cid in ("fedamp-xi-within-groups", "heurfedamp-xi-within-groups"):
        assert "fedamp_grouped_fashion_cpu" in claims[cid].experiments["cpu"]
