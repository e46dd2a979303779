"""Distance figure: same-distribution vs other pairs by hand, the files, fit, bad input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from _figure_helpers import (
    assert_figure_files,
    assert_names_not_ids,
    captured_figures,
    check_fits,
    grid_aggregate,
    make_run,
)

from pflrepro.reporting.figures.distances import OTHER, SAME, distance_curves, plot_distances
from pflrepro.store.results import MODEL_DISTANCE

# clients 0, 1 in distribution 0, client 2 in distribution 1
D1 = np.array([[0.0, 1.0, 4.0], [1.0, 0.0, 6.0], [4.0, 6.0, 0.0]])
D2 = np.array([[0.0, 2.0, 8.0], [2.0, 0.0, 10.0], [8.0, 10.0, 0.0]])


def _aggregate() -> pd.DataFrame:
    runs = []
    for seed, scale in ((0, 1.0), (1, 3.0)):
        runs.append(make_run({1: [0.5, 0.5, 0.5], 2: [0.6, 0.6, 0.6]}, n_test=(1, 1, 1),
                             method="fedamp", split_seed=seed, groups=[0, 0, 1],
                             matrices={MODEL_DISTANCE: {1: scale * D1, 2: scale * D2}}))
    runs.append(make_run({1: [0.5, 0.5, 0.5]}, n_test=(1, 1, 1), method="fedavg",
                         groups=[0, 0, 1]))
    return pd.concat(runs, ignore_index=True)


def test_curves_by_hand() -> None:
    curves = distance_curves(_aggregate()).set_index(["round", "pairs"])
    assert set(curves["method"]) == {"fedamp"}  # fedavg logs no distances
    # round 1, seed 0: same pairs (0,1),(1,0) -> 1; other (0,2),(2,0),(1,2),(2,1) -> 5
    # seed 1 is three times that; the mean over the two runs is twice seed 0
    assert curves.loc[(1, SAME), "mean"] == pytest.approx(2.0)
    assert curves.loc[(1, OTHER), "mean"] == pytest.approx(10.0)
    assert curves.loc[(2, SAME), "mean"] == pytest.approx(4.0)
    assert curves.loc[(2, OTHER), "mean"] == pytest.approx(18.0)
    assert (curves["runs"] == 2).all()


def test_plot_writes_both_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    figures = captured_figures(monkeypatch)
    # the experiment's method order may name methods that log no distances
    labels = {"label_groups-clients3-groups2": "two groups"}
    curves = plot_distances(_aggregate(), tmp_path / "d.pdf", tmp_path / "d.png",
                            methods_order=["fedavg", "fedamp"], labels=labels)
    assert_figure_files(tmp_path / "d.pdf", tmp_path / "d.png")
    assert len(curves) == 4
    assert_names_not_ids(figures[0], ["fedamp"], labels)


@pytest.mark.parametrize(("partitions", "methods"), [(1, 1), (3, 3)])
def test_fits_any_number_of_panels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   partitions: int, methods: int) -> None:
    agg = grid_aggregate(partitions, ["fedamp", "heurfedamp", "fedamp_long_variant"][:methods],
                         rounds=3, seeds=1)
    fig = check_fits(monkeypatch, tmp_path, lambda pdf, png: plot_distances(agg, pdf, png))
    assert len([ax for ax in fig.axes if ax.get_title()]) == partitions * methods


def test_no_distances_raises(tmp_path: Path) -> None:
    agg = make_run({1: [0.5, 0.5, 0.5]}, n_test=(1, 1, 1), method="fedavg", groups=[0, 0, 1])
    with pytest.raises(ValueError, match="FedAMP"):
        plot_distances(agg, tmp_path / "d.pdf", tmp_path / "d.png")


def test_missing_groups_raise() -> None:
    agg = _aggregate()
    agg = agg[agg["metric"] != "group"]
    with pytest.raises(ValueError, match="distributions"):
        distance_curves(agg)
