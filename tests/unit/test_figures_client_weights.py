"""One client's weights over rounds: the series by hand, the files, labels, fit, errors."""

from __future__ import annotations

import hashlib
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
    many_methods,
    texts,
    weights_aggregate,
)

from pflrepro.reporting.figures.client_weights import (
    client_weight_series,
    plot_client_weights_over_rounds,
    spread,
)
from pflrepro.store.results import WEIGHT


def test_client_weight_series_picks_client_and_first_run() -> None:
    grid = client_weight_series(weights_aggregate(), client=1)
    # one row per partition (natural order), one entry per method with weights
    assert len(grid) == 2 and all(len(line) == 1 for line in grid)
    series = grid[0][0]
    assert series is not None
    assert (series.method, series.partition) == ("federico", "label_groups-clients3-groups1")
    assert series.run["split_seed"] == 0 and series.client == 1 and series.client_group == 0
    assert series.weights.index.tolist() == [0, 2]
    assert list(series.weights.columns) == [0, 1, 2]
    np.testing.assert_allclose(series.weights.loc[2].to_numpy(), W_FIRST[1])  # row i = 1
    np.testing.assert_allclose(series.weights.loc[0].to_numpy(), [1 / 3] * 3)
    assert series.peer_groups == [0, 0, 1] and series.groups_known


def test_client_weight_series_orders_peers_by_group_and_handles_components() -> None:
    w = np.arange(9, dtype=float).reshape(3, 3) / 10
    run = make_run({1: [0.5] * 3}, n_test=(1, 1, 1), groups=[1, 0, 1], weights={1: w})
    series = client_weight_series(run, client=2)[0][0]
    assert list(series.weights.columns) == [1, 0, 2]
    assert series.weights.loc[1, 0] == pytest.approx(0.6)  # w_20
    assert series.peer_groups == [0, 1, 1] and series.client_group == 1
    # FedEM: 3 clients x 2 components; components are not clients
    mix = make_run({1: [0.5] * 3}, n_test=(1, 1, 1), method="fedem",
                   weights={1: np.array([[0.9, 0.1], [0.5, 0.5], [0.0, 1.0]])})
    series = client_weight_series(mix, client=0)[0][0]
    assert series.peer_groups is None
    assert series.weights.loc[1].tolist() == pytest.approx([0.9, 0.1])


def test_client_weight_series_methods_and_missing_rows() -> None:
    agg = pd.concat([
        weights_aggregate(),
        make_run({0: [0.5] * 3}, n_test=(1, 1, 1), method="federico_beta0.1",
                 partition="label_groups-clients3-groups2", weights={0: np.eye(3)}),
    ], ignore_index=True)
    grid = client_weight_series(agg, methods_order=["federico_beta0.1"])
    assert [s.method if s else None for s in grid[0]] == [None, "federico"]
    assert [s.method for s in grid[1]] == ["federico_beta0.1", "federico"]
    with pytest.raises(ValueError, match=r"no 'weight' rows for method\(s\) \['fedavg'\]"):
        client_weight_series(agg, methods_order=["fedavg"])
    with pytest.raises(ValueError, match="no 'weight' rows for any method.*fedavg"):
        client_weight_series(agg[agg["metric"] != WEIGHT])
    with pytest.raises(ValueError, match="client 3 .*clients with rows: \\[0, 1, 2\\]"):
        client_weight_series(agg, client=3)
    dup = pd.concat([agg, agg[(agg["metric"] == WEIGHT) & (agg["split_seed"] == 0)]])
    with pytest.raises(ValueError, match="twice"):
        client_weight_series(dup)


def test_plot_client_weights_over_rounds(tmp_path: Path) -> None:
    agg = weights_aggregate()
    one = agg[agg["partition"] == "label_groups-clients3-groups2"]
    for k, frame in enumerate((agg, one)):
        pdf, png = tmp_path / f"o{k}.pdf", tmp_path / f"o{k}.png"
        plot_client_weights_over_rounds(frame, pdf, png, client=1)
        assert_figure_files(pdf, png)
    mix = make_run({1: [0.5, 0.5, 0.5]}, n_test=(1, 1, 1), method="fedem",
                   weights={0: np.full((3, 2), 0.5),
                            1: np.array([[0.9, 0.1], [0.5, 0.5], [0.0, 1.0]])})
    plot_client_weights_over_rounds(mix, tmp_path / "m.pdf", tmp_path / "m.png")
    assert_figure_files(tmp_path / "m.pdf", tmp_path / "m.png")
    digests = []
    for k in range(2):
        pdf, png = tmp_path / f"r{k}.pdf", tmp_path / f"r{k}.png"
        plot_client_weights_over_rounds(agg, pdf, png)
        digests.append([hashlib.sha256(p.read_bytes()).hexdigest() for p in (pdf, png)])
    assert digests[0] == digests[1]


def test_labels_name_the_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    figures = captured_figures(monkeypatch)
    plot_client_weights_over_rounds(weights_aggregate(), tmp_path / "o.pdf", tmp_path / "o.png",
                                    labels={"label_groups-clients3-groups2": "two"})
    # unlabelled ids show as themselves
    assert "two" in texts(figures[0]) and "groups1" in texts(figures[0])
    labels = {"label_groups-clients3-groups2": "two", "label_groups-clients3-groups1": "one"}
    plot_client_weights_over_rounds(weights_aggregate(), tmp_path / "o.pdf", tmp_path / "o.png",
                                    labels=labels)
    assert_names_not_ids(figures[1], ["federico"], labels)


@pytest.mark.parametrize(("partitions", "methods"), [(1, 1), (1, 6), (3, 4)])
def test_fits_any_number_of_panels_and_methods(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               partitions: int, methods: int) -> None:
    agg = grid_aggregate(partitions, many_methods(methods), rounds=3, seeds=1)
    check_fits(monkeypatch, tmp_path, lambda pdf, png: plot_client_weights_over_rounds(
        agg, pdf, png, client=1))


def test_plot_client_weights_over_rounds_errors(tmp_path: Path) -> None:
    paths = tmp_path / "o.pdf", tmp_path / "o.png"
    with pytest.raises(ValueError, match="fedavg"):
        plot_client_weights_over_rounds(weights_aggregate(), *paths, methods_order=["fedavg"])
    with pytest.raises(ValueError, match="client must be"):
        plot_client_weights_over_rounds(weights_aggregate(), *paths, client=-2)
    assert not any(p.exists() for p in paths)


def test_spread_keeps_labels_apart_and_centred() -> None:
    assert spread([0.0, 0.5], 0.1) == pytest.approx([0.0, 0.5])
    assert spread([0.3, 0.3], 0.1) == pytest.approx([0.25, 0.35])
    assert spread([0.2, 0.2, 0.2, 0.26], 0.1) == pytest.approx([0.065, 0.165, 0.265, 0.365])
