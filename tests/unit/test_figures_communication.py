"""pflrepro.reporting.figures.communication: accuracy against communicated scalars."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from _figure_helpers import captured_figures, check_fits, make_run, many_methods, texts

from pflrepro.reporting.figures.communication import plot_communication
from pflrepro.store.results import COMM_DOWN, COMM_UP


def _aggregate(partitions: int, methods: list[str]) -> pd.DataFrame:
    runs = []
    for p in range(partitions):
        for i, method in enumerate(methods):
            traffic = 0.0 if i == 0 else 10.0 ** (i + 2)  # the first sends nothing
            runs.append(make_run(
                {0: [0.1, 0.1], 3: [0.5 + 0.02 * i, 0.6]}, n_test=[10, 30], method=method,
                partition=f"dirichlet-clients2-alpha0.01-k{p}",
                per_client={COMM_UP: {r: [traffic] * 2 for r in range(4)},
                            COMM_DOWN: {r: [traffic] * 2 for r in range(4)}}))
    return pd.concat(runs, ignore_index=True)


def test_one_point_per_method_and_nothing_sent_is_marked(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    figures = captured_figures(monkeypatch)
    plot_communication(_aggregate(1, ["local", "fedavg", "perfedckt"]), tmp_path / "c.pdf",
                       tmp_path / "c.png", labels={"dirichlet-clients2-alpha0.01-k0": "Dir"})
    fig = figures[0]
    shown = texts(fig)
    assert "Dir" in shown and "(nothing communicated)" in shown
    ax = next(a for a in fig.axes if a.get_title())
    assert ax.get_xscale() == "log"
    points = [c.get_offsets()[0].tolist() for c in ax.collections]
    # fedavg: 2 clients x 4 rounds x 2 directions x 1000 = 16000 scalars; accuracy
    # (0.52 * 10 + 0.6 * 30) / 40 = 58 %
    assert [16000.0, pytest.approx(58.0)] in points


@pytest.mark.parametrize(("partitions", "methods"), [(1, 2), (3, 9)])
def test_fits_any_number_of_panels_and_methods(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               partitions: int, methods: int) -> None:
    agg = _aggregate(partitions, many_methods(methods))
    fig = check_fits(monkeypatch, tmp_path, lambda pdf, png: plot_communication(agg, pdf, png))
    assert len([ax for ax in fig.axes if ax.get_title()]) == partitions
