"""The short tuning sentence of a results table (pflrepro.reporting.tuning_note)."""

from __future__ import annotations

from pflrepro.reporting.tuning_note import short_note
from pflrepro.tuning import Grid


def test_short_note_names_values_per_partition_and_the_tuning_table() -> None:
    grids = [Grid("sigma", (1e-5, 1e-3), log=True), Grid("prox", (0.1, 1.0, 10.0))]
    chosen = {("p1", 0): {"sigma": 1e-3, "prox": 1.0}, ("p2", 0): {"sigma": 1e-5, "prox": 1.0}}
    text = short_note("e", "fedamp", grids, chosen, labels={"p1": "practical"})
    assert text == ("FedAMP: chosen on validation, practical: sigma=0.001 (the grid's highest "
                    "value), "
                    "prox=1; p2: sigma=1e-05 (the grid's lowest value), prox=1 "
                    "(every value tried: results/tuning/e/fedamp.md).")


def test_splits_are_named_only_where_a_partition_has_several_values() -> None:
    grids = [Grid("mu", (0.1, 1.0))]
    chosen = {("p", 0): {"mu": 0.1}, ("p", 1): {"mu": 1.0}, ("q", 0): {"mu": 1.0},
              ("q", 1): {"mu": 1.0}}
    text = short_note("e", "fedprox", grids, chosen, where=" (exp)")
    assert text.startswith("FedProx (exp): chosen on validation, "
                           "p split 0: mu=0.1 (the grid's lowest value); "
                           "p split 1: mu=1 (the grid's highest value); "
                           "q: mu=1 (the grid's highest value) (")
