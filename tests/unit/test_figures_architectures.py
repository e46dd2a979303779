"""pflrepro.reporting.figures.architectures: model size against data size (Fig. 2a)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from _figure_helpers import captured_figures, check_fits, make_run, texts

from pflrepro.reporting.figures.architectures import client_architectures, plot_architectures
from pflrepro.store.results import ARCHITECTURE, MODEL_SIZE, N_TRAIN


def _aggregate(partitions: int, methods=("perfedckt", "feddf")) -> pd.DataFrame:
    runs = []
    for p in range(partitions):
        for method in methods:
            runs.append(make_run(
                {0: [0.1, 0.1, 0.1], 2: [0.5, 0.6, 0.7]}, n_test=[10, 30, 20], method=method,
                partition=f"dirichlet-clients3-alpha0.01-k{p}",
                per_client={ARCHITECTURE: {0: [0, 2, 1]}, MODEL_SIZE: {0: [100, 9000, 800]},
                            N_TRAIN: {0: [5, 400, 60]}}))
    return pd.concat(runs, ignore_index=True)


def test_one_point_per_client_coloured_by_architecture(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    agg = _aggregate(1)
    table = client_architectures(agg)
    assert table["method"].unique().tolist() == ["feddf"]  # one run: the first by name
    assert table.sort_values("client")[[N_TRAIN, MODEL_SIZE, ARCHITECTURE]].values.tolist() \
        == [[5, 100, 0], [400, 9000, 2], [60, 800, 1]]
    figures = captured_figures(monkeypatch)
    plot_architectures(agg, tmp_path / "a.pdf", tmp_path / "a.png",
                       names={0: "cnn", 1: "vgg11", 2: "vgg13"},
                       labels={"dirichlet-clients3-alpha0.01-k0": "Dir 0.01"})
    fig = figures[0]
    assert all(name in texts(fig) for name in ("cnn", "vgg11", "vgg13", "Dir 0.01"))
    ax = next(a for a in fig.axes if a.get_title())
    assert ax.get_yscale() == "log"
    points = sorted(tuple(pt) for c in ax.collections for pt in c.get_offsets().tolist())
    assert points == [(5.0, 100.0), (60.0, 800.0), (400.0, 9000.0)]


def test_homogeneous_runs_are_refused(tmp_path: Path) -> None:
    agg = make_run({0: [0.1], 2: [0.5]}, n_test=[10])
    with pytest.raises(ValueError, match="training.architectures"):
        plot_architectures(agg, tmp_path / "a.pdf", tmp_path / "a.png")


@pytest.mark.parametrize("partitions", [1, 4])
def test_fits_any_number_of_panels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   partitions: int) -> None:
    agg = _aggregate(partitions)
    fig = check_fits(monkeypatch, tmp_path, lambda pdf, png: plot_architectures(agg, pdf, png))
    assert len([ax for ax in fig.axes if ax.get_title()]) == partitions
