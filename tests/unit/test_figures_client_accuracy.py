"""One client's accuracy figure: the client's rows by hand, the panels, fit, errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from _figure_helpers import (
    assert_figure_files,
    captured_figures,
    check_fits,
    grid_aggregate,
    make_run,
    many_methods,
    texts,
    weights_aggregate,
)

from pflrepro.reporting.figures.client_accuracy import (
    client_accuracy_per_round,
    plot_client_accuracy,
)


def test_client_accuracy_per_round_picks_client() -> None:
    out = client_accuracy_per_round(weights_aggregate(), client=2)
    fed = out[(out["method"] == "federico")
              & (out["partition"] == "label_groups-clients3-groups2") & (out["split_seed"] == 0)]
    assert fed["round"].tolist() == [0, 2]
    assert fed["accuracy"].tolist() == pytest.approx([0.3, 0.8])
    assert set(fed["group"]) == {1}
    assert set(out.loc[out["method"] == "fedavg", "accuracy"]) == {0.1, 0.5}


def test_plot_client_accuracy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    figures = captured_figures(monkeypatch)
    pdf, png = tmp_path / "c.pdf", tmp_path / "c.png"
    plot_client_accuracy(weights_aggregate(), pdf, png, client=1, methods_order=["federico"],
                         labels={"label_groups-clients3-groups2": "2 distributions"})
    assert_figure_files(pdf, png)
    ax = figures[0].axes[0]
    assert "client 1: distribution 0" in ax.get_title()
    assert "2 distributions" in texts(figures[0]) and "groups2" not in texts(figures[0])
    # panel 1 (groups1, natural order first), federico: mean of 2 runs, client 1 = 20 %, 70 %
    federico = ax.get_lines()[0]
    assert federico.get_xdata().tolist() == [0, 2]
    assert federico.get_ydata().tolist() == pytest.approx([20.0, 70.0])


@pytest.mark.parametrize(("partitions", "methods"), [(1, 1), (5, 9)])
def test_fits_any_number_of_panels_and_methods(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               partitions: int, methods: int) -> None:
    agg = grid_aggregate(partitions, many_methods(methods), rounds=3, seeds=1)
    check_fits(monkeypatch, tmp_path, lambda pdf, png: plot_client_accuracy(agg, pdf, png,
                                                                            client=3))


def test_plot_client_accuracy_errors(tmp_path: Path) -> None:
    agg = weights_aggregate()
    paths = tmp_path / "c.pdf", tmp_path / "c.png"
    with pytest.raises(ValueError, match=r"client 5 \(clients present: \[0, 1, 2\]\)"):
        plot_client_accuracy(agg, *paths, client=5)
    with pytest.raises(ValueError, match="client must be"):
        plot_client_accuracy(agg, *paths, client=-1)
    with pytest.raises(ValueError, match="client must be"):
        plot_client_accuracy(agg, *paths, client="0")  # type: ignore[arg-type]
    nan = make_run({1: [0.5, float("nan")]}, n_test=(3, 0))
    with pytest.raises(ValueError, match="NaN for client 1"):
        plot_client_accuracy(nan, *paths, client=1)
    with pytest.raises(ValueError, match="fedprox"):
        plot_client_accuracy(agg, *paths, methods_order=["fedprox"])
    assert not any(p.exists() for p in paths)
