"""Accuracy figure: files written (real PDF/PNG, atomically, reproducibly), labels, fit, errors."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pandas as pd
import pytest
from _figure_helpers import (
    assert_figure_files,
    captured_figures,
    check_fits,
    grid_aggregate,
    many_methods,
    texts,
    weights_aggregate,
)

from pflrepro.reporting.accuracy import weighted_accuracy_per_round
from pflrepro.reporting.figures.accuracy import mean_band_stats, plot_accuracy_vs_round, span

LABELS = {"label_groups-clients3-groups2": "2 distributions",
          "label_groups-clients3-groups1": "1 distribution"}


def test_plot_accuracy_vs_round(tmp_path: Path) -> None:
    pdf, png = tmp_path / "acc.pdf", tmp_path / "out" / "acc.png"
    plot_accuracy_vs_round(weights_aggregate(), pdf, png, methods_order=["federico"])
    assert_figure_files(pdf, png)


def test_plots_are_reproducible(tmp_path: Path) -> None:
    agg = weights_aggregate()
    digests = []
    for k in range(2):
        pdf, png = tmp_path / f"a{k}.pdf", tmp_path / f"a{k}.png"
        plot_accuracy_vs_round(agg, pdf, png)
        digests.append([hashlib.sha256(p.read_bytes()).hexdigest() for p in (pdf, png)])
    assert digests[0] == digests[1]


def test_mean_band_by_hand() -> None:
    stats = mean_band_stats(weighted_accuracy_per_round(weights_aggregate()),
                            "weighted_accuracy").set_index(["partition", "method", "round"])
    # federico, round 2: both seeds (0.6*10 + 0.7*20 + 0.8*30) / 60 = 0.7333...
    row = stats.loc[("label_groups-clients3-groups2", "federico", 2)]
    assert row["mean"] == pytest.approx(220 / 3) and row["std"] == pytest.approx(0.0)
    assert row["n"] == 2
    assert (span([2, 2]), span([3, 1, 2])) == ("n=2", "n=1–3")


def test_labels_title_the_panels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    figures = captured_figures(monkeypatch)
    plot_accuracy_vs_round(weights_aggregate(), tmp_path / "a.pdf", tmp_path / "a.png",
                           labels=LABELS)
    shown = texts(figures[0])
    assert "2 distributions" in shown and "1 distribution" in shown
    assert "groups2" not in shown
    with pytest.raises(ValueError, match="both be shown"):
        plot_accuracy_vs_round(weights_aggregate(), tmp_path / "x.pdf", tmp_path / "x.png",
                               labels=dict.fromkeys(LABELS, "same"))
    assert not (tmp_path / "x.pdf").exists()


@pytest.mark.parametrize(("partitions", "methods"), [(1, 1), (1, 3), (4, 12)])
def test_fits_any_number_of_panels_and_methods(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               partitions: int, methods: int) -> None:
    agg = grid_aggregate(partitions, many_methods(methods), rounds=3, seeds=1)
    fig = check_fits(monkeypatch, tmp_path, lambda pdf, png: plot_accuracy_vs_round(
        agg, pdf, png))
    assert len([ax for ax in fig.axes if ax.get_title()]) == partitions


def test_plot_accuracy_vs_round_errors(tmp_path: Path) -> None:
    agg = weights_aggregate()
    with pytest.raises(ValueError, match="test_accuracy"):
        plot_accuracy_vs_round(agg[agg["metric"] != "test_accuracy"],
                               tmp_path / "a.pdf", tmp_path / "a.png")
    with pytest.raises(ValueError, match="fedprox"):
        plot_accuracy_vs_round(agg, tmp_path / "a.pdf", tmp_path / "a.png",
                               methods_order=["fedprox"])
    assert not (tmp_path / "a.pdf").exists() and not (tmp_path / "a.png").exists()


def test_diverged_runs_end_early_and_are_named_in_the_legend(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pflrepro.store.results import DIVERGED

    agg = grid_aggregate(1, ["fedavg", "local"], rounds=4, seeds=2)
    bad = (agg["method"] == "fedavg") & (agg["split_seed"] == 1)
    mark = agg[bad].iloc[:1].copy()
    agg = agg[~bad | (agg["round"] <= 2)]  # it stopped at round 2
    mark[["round", "client", "peer", "metric", "value"]] = [2, -1, -1, DIVERGED, 2.0]
    agg = pd.concat([agg, mark], ignore_index=True)
    figures = captured_figures(monkeypatch)
    plot_accuracy_vs_round(agg, tmp_path / "a.pdf", tmp_path / "a.png")
    shown = texts(figures[0])
    assert "FedAvg (n=2, 1 diverged)" in shown and "Local (n=2)" in shown


def test_legend_shows_papers_names_and_names_curves_on_top_of_each_other(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    agg = grid_aggregate(1, ["fedavg", "local", "fedprox_ft"], rounds=4, seeds=2)
    # fedprox: fedavg's runs again, so its curve lies on fedavg's
    agg = pd.concat([agg, agg[agg["method"] == "fedavg"].assign(method="fedprox")],
                    ignore_index=True)
    figures = captured_figures(monkeypatch)
    plot_accuracy_vs_round(agg, tmp_path / "a.pdf", tmp_path / "a.png",
                           methods_order=["fedavg", "local", "fedprox", "fedprox_ft"])
    legend = figures[0].legends[0]
    assert [t.get_text() for t in legend.get_texts()] == [
        "FedAvg (n=2)", "Local (n=2)", "FedProx (n=2)", "FedProx-FT (n=2)"]
    assert "\nCurves on top of each other" in legend.get_title().get_text()  # its own line
    title = " ".join(legend.get_title().get_text().split())
    assert title.endswith("Curves on top of each other (means within 0.5 points at every "
                          "round): FedAvg = FedProx")
    shown = texts(figures[0])
    assert "fedavg" not in shown and "fedprox_ft" not in shown
    # every method is drawn its own way; the two on top of each other differ in colour
    # and marker (styles follow from the names: method_styles)
    lines = legend.get_lines()
    assert len({(ln.get_color(), ln.get_linestyle(), ln.get_marker()) for ln in lines}) == 4
    assert lines[0].get_color() != lines[2].get_color()
    assert lines[0].get_marker() != lines[2].get_marker()
