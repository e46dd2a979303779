"""Weight heatmaps: the panels by hand, the files, labels, fit, errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from _figure_helpers import (
    W_FIRST,
    assert_figure_files,
    assert_names_not_ids,
    captured_figures,
    check_fits,
    grid_aggregate,
    make_run,
    texts,
    weights_aggregate,
)

from pflrepro.reporting.figures.weights import plot_client_weights, weight_panels
from pflrepro.store.results import GROUP, WEIGHT


def test_weight_panels_first_run_final_round() -> None:
    panels = weight_panels(weights_aggregate())
    assert [p.partition for p in panels] == ["label_groups-clients3-groups1",
                                             "label_groups-clients3-groups2"]
    for panel in panels:
        assert panel.run["split_seed"] == 0 and panel.round == 2
        np.testing.assert_allclose(panel.matrix.to_numpy(), W_FIRST)
        assert panel.client_groups == [0, 0, 1] and panel.peer_groups == [0, 0, 1]
        assert panel.groups_known


def test_weight_panels_sort_by_group_and_mixtures() -> None:
    w = np.arange(9, dtype=float).reshape(3, 3) / 10
    run = make_run({1: [0.5] * 3}, n_test=(1, 1, 1), groups=[1, 0, 1], weights={1: w})
    panel = weight_panels(run)[0]
    assert list(panel.matrix.index) == [1, 0, 2] and list(panel.matrix.columns) == [1, 0, 2]
    assert panel.matrix.loc[1, 0] == pytest.approx(0.3)  # w_10 stays w_10
    assert panel.client_groups == [0, 1, 1]
    plain = weight_panels(run, sort_by_group=False)[0]
    assert list(plain.matrix.index) == [0, 1, 2] and plain.client_groups == [1, 0, 1]
    mixture = make_run({1: [0.5] * 3}, n_test=(1, 1, 1), method="fedem",
                       weights={1: np.full((3, 2), 0.5)})
    panel = weight_panels(mixture, "fedem")[0]
    assert panel.peer_groups is None and panel.matrix.shape == (3, 2)
    no_groups = mixture[mixture["metric"] != GROUP]
    assert not weight_panels(no_groups, "fedem")[0].groups_known


def test_plot_client_weights(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    figures = captured_figures(monkeypatch)
    pdf, png = tmp_path / "w.pdf", tmp_path / "w.png"
    labels = {"label_groups-clients3-groups2": "2 distributions",
              "label_groups-clients3-groups1": "1 distribution"}
    plot_client_weights(weights_aggregate(), pdf, png, labels=labels)
    assert_figure_files(pdf, png)
    assert "2 distributions" in texts(figures[0]) and "groups2" not in texts(figures[0])
    # the method's paper name and the partitions' labels, no id, in every title
    assert_names_not_ids(figures[0], ["federico"], labels)


def test_plot_client_weights_mixture_and_no_groups(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    figures = captured_figures(monkeypatch)
    # FedEM-style: 3 clients x 2 components
    mix = make_run({1: [0.5, 0.5, 0.5]}, n_test=(1, 1, 1), method="fedem",
                   weights={1: np.array([[0.9, 0.1], [0.5, 0.5], [0.0, 1.0]])})
    plot_client_weights(mix, tmp_path / "m.pdf", tmp_path / "m.png", method="fedem",
                        peer_label="component")
    assert_figure_files(tmp_path / "m.pdf", tmp_path / "m.png")
    # the colour bar names a mixture over components, not client-to-client weights
    assert "mixture weight $\\pi_{ij}$" in texts(figures[0])
    assert not any("w_{ij}" in t for t in texts(figures[0]))
    # more than 10 clients (no annotations), no group rows at all
    k = 11
    big = make_run({1: [0.5] * k}, n_test=[1] * k, weights={1: np.full((k, k), 1 / k)})
    big = big[big["metric"] != GROUP]
    plot_client_weights(big, tmp_path / "b.pdf", tmp_path / "b.png", sort_by_group=False)
    assert_figure_files(tmp_path / "b.pdf", tmp_path / "b.png")


@pytest.mark.parametrize(("partitions", "clients"), [(1, 3), (4, 12)])
def test_fits_any_number_of_panels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   partitions: int, clients: int) -> None:
    agg = grid_aggregate(partitions, ["a_method_with_a_rather_long_name"], clients=clients,
                         rounds=2, seeds=1)
    check_fits(monkeypatch, tmp_path, lambda pdf, png: plot_client_weights(
        agg, pdf, png, method="a_method_with_a_rather_long_name"))


def test_plot_client_weights_errors(tmp_path: Path) -> None:
    agg = weights_aggregate()
    with pytest.raises(ValueError, match="fedavg"):
        plot_client_weights(agg, tmp_path / "w.pdf", tmp_path / "w.png", method="fedavg")
    with pytest.raises(ValueError, match="'federico'"):
        plot_client_weights(agg[agg["metric"] != WEIGHT], tmp_path / "w.pdf",
                            tmp_path / "w.png")
    dup = pd.concat([agg, agg[(agg["metric"] == WEIGHT) & (agg["split_seed"] == 0)]])
    with pytest.raises(ValueError, match="twice"):
        plot_client_weights(dup, tmp_path / "w.pdf", tmp_path / "w.png")
    assert not (tmp_path / "w.pdf").exists()
