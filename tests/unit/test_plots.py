"""Figures: files are written (real PDF/PNG, atomically, reproducibly) and bad input raises."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib.text
import numpy as np
import pandas as pd
import pytest

from pflrepro.reporting import plots as plots_module
from pflrepro.reporting.plots import (
    _spread,
    client_accuracy_per_round,
    client_weight_series,
    cluster_panels,
    label_counts,
    plot_accuracy_vs_round,
    plot_client_accuracy,
    plot_client_weights,
    plot_client_weights_over_rounds,
    plot_clusters,
    plot_label_distribution,
    weight_panels,
)
from pflrepro.reporting.tables import RUN_KEYS
from pflrepro.results import GROUP, N_TEST, TEST_ACCURACY, WEIGHT, MetricLog

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def make_run(
    accuracies: Mapping[int, Sequence[float]],
    n_test: Sequence[int],
    *,
    method: str = "federico",
    partition: str = "label_groups-clients3-groups2",
    split_seed: int = 0,
    groups: Sequence[int] | None = None,
    weights: Mapping[int, np.ndarray] | None = None,
) -> pd.DataFrame:
    """One synthetic run table (same shape as the helper in test_tables.py)."""
    log = MetricLog()
    log.add_per_client(0, N_TEST, n_test)
    log.add_per_client(0, GROUP, groups if groups is not None else [-1] * len(n_test))
    for round_, accs in accuracies.items():
        log.add_per_client(round_, TEST_ACCURACY, accs)
    for round_, matrix in (weights or {}).items():
        log.add_matrix(round_, WEIGHT, matrix)
    return log.to_frame({
        "experiment": "fig3", "dataset": "cifar10", "partition": partition, "method": method,
        "algorithm": method, "params": "default", "split_seed": split_seed, "train_seed": 0,
        "package_version": "0.1.0", "git_revision": "abc",
    })


def assert_figure_files(pdf: Path, png: Path) -> None:
    assert pdf.stat().st_size > 1000 and pdf.read_bytes().startswith(b"%PDF")
    assert png.stat().st_size > 1000 and png.read_bytes().startswith(PNG_MAGIC)
    assert not list(pdf.parent.glob(".*.tmp")) and not list(png.parent.glob(".*.tmp"))


W_FIRST = np.array([[0.7, 0.3, 0.0], [0.4, 0.6, 0.0], [0.0, 0.0, 1.0]])


def weights_aggregate() -> pd.DataFrame:
    """federico on two partitions (3 clients), two seeds each; fedavg without weights."""
    runs = []
    for part in ("label_groups-clients3-groups2", "label_groups-clients3-groups1"):
        for seed in (1, 0):
            runs.append(make_run(
                {0: [0.1, 0.2, 0.3], 2: [0.6, 0.7, 0.8]}, n_test=(10, 20, 30),
                partition=part, split_seed=seed, groups=[0, 0, 1],
                weights={0: np.full((3, 3), 1 / 3), 2: W_FIRST if seed == 0 else np.eye(3)}))
        runs.append(make_run({0: [0.1, 0.1, 0.1], 2: [0.5, 0.5, 0.5]}, n_test=(10, 20, 30),
                             method="fedavg", partition=part))
    return pd.concat(runs, ignore_index=True)


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


def test_plot_accuracy_vs_round_errors(tmp_path: Path) -> None:
    agg = weights_aggregate()
    with pytest.raises(ValueError, match="test_accuracy"):
        plot_accuracy_vs_round(agg[agg["metric"] != "test_accuracy"],
                               tmp_path / "a.pdf", tmp_path / "a.png")
    with pytest.raises(ValueError, match="fedprox"):
        plot_accuracy_vs_round(agg, tmp_path / "a.pdf", tmp_path / "a.png",
                               methods_order=["fedprox"])
    assert not (tmp_path / "a.pdf").exists() and not (tmp_path / "a.png").exists()


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


def test_plot_client_weights(tmp_path: Path) -> None:
    pdf, png = tmp_path / "w.pdf", tmp_path / "w.png"
    plot_client_weights(weights_aggregate(), pdf, png)
    assert_figure_files(pdf, png)


def test_plot_client_weights_mixture_and_no_groups(tmp_path: Path) -> None:
    # FedEM-style: 3 clients x 2 components
    mix = make_run({1: [0.5, 0.5, 0.5]}, n_test=(1, 1, 1), method="fedem",
                   weights={1: np.array([[0.9, 0.1], [0.5, 0.5], [0.0, 1.0]])})
    plot_client_weights(mix, tmp_path / "m.pdf", tmp_path / "m.png", method="fedem",
                        peer_label="component")
    assert_figure_files(tmp_path / "m.pdf", tmp_path / "m.png")
    # more than 10 clients (no annotations), no group rows at all
    k = 11
    big = make_run({1: [0.5] * k}, n_test=[1] * k, weights={1: np.full((k, k), 1 / k)})
    big = big[big["metric"] != GROUP]
    plot_client_weights(big, tmp_path / "b.pdf", tmp_path / "b.png", sort_by_group=False)
    assert_figure_files(tmp_path / "b.pdf", tmp_path / "b.png")


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


def partition_frame() -> tuple[pd.DataFrame, np.ndarray]:
    """3 clients over 12 samples of 3 classes; client 2 holds only class 2."""
    labels = np.array([0, 0, 1, 1, 1, 2, 2, 2, 2, 0, 1, 2])
    frame = pd.DataFrame({
        "client": np.array([0, 0, 0, 1, 1, 1, 2, 2, 2, 2], dtype=np.int32),
        "index": np.array([0, 1, 2, 3, 4, 9, 5, 6, 7, 8], dtype=np.int64),
        "split": pd.array(["train", "test"] * 5, dtype="string"),
        "group": np.array([0, 0, 0, 0, 0, 0, 1, 1, 1, 1], dtype=np.int32),
    })
    return frame, labels


def test_label_counts_by_hand() -> None:
    frame, labels = partition_frame()
    counts = label_counts(frame, labels, 4)
    assert counts.tolist() == [[2, 1, 0, 0], [1, 2, 0, 0], [0, 0, 4, 0]]


def test_plot_label_distribution(tmp_path: Path) -> None:
    frame, labels = partition_frame()
    pdf, png = tmp_path / "l.pdf", tmp_path / "l.png"
    plot_label_distribution(frame, labels, 3, pdf, png)
    assert_figure_files(pdf, png)
    plot_label_distribution(frame.drop(columns="group"), labels, 3, pdf, png, title="t")
    assert_figure_files(pdf, png)


def test_plot_label_distribution_errors(tmp_path: Path) -> None:
    frame, labels = partition_frame()
    paths = (tmp_path / "l.pdf", tmp_path / "l.png")
    with pytest.raises(ValueError, match="outside"):
        plot_label_distribution(frame, labels, 2, *paths)
    with pytest.raises(ValueError, match="indices"):
        plot_label_distribution(frame, labels[:5], 3, *paths)
    with pytest.raises(ValueError, match="lacks column"):
        plot_label_distribution(frame.drop(columns="index"), labels, 3, *paths)
    with pytest.raises(ValueError, match="empty"):
        plot_label_distribution(frame.iloc[:0], labels, 3, *paths)
    assert not any(p.exists() for p in paths)


# ------------------------------------------------------------------ labels in figures
def captured_figures(monkeypatch: pytest.MonkeyPatch) -> list:
    """Keep every figure the plots module saves (and still save it)."""
    figures: list = []
    real = plots_module.save_figure

    def keep(fig, pdf, png):
        figures.append(fig)
        real(fig, pdf, png)

    monkeypatch.setattr(plots_module, "save_figure", keep)
    return figures


def texts(fig) -> str:
    """All titles, axis labels and texts of a figure, one string."""
    out = [t.get_text() for t in fig.findobj(matplotlib.text.Text)]
    return "\n".join(out)


LABELS = {"label_groups-clients3-groups2": "2 distributions",
          "label_groups-clients3-groups1": "1 distribution"}


def test_labels_title_panels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    figures = captured_figures(monkeypatch)
    agg = weights_aggregate()
    plot_accuracy_vs_round(agg, tmp_path / "a.pdf", tmp_path / "a.png", labels=LABELS)
    plot_client_weights(agg, tmp_path / "w.pdf", tmp_path / "w.png", labels=LABELS)
    plot_client_accuracy(agg, tmp_path / "c.pdf", tmp_path / "c.png", labels=LABELS)
    plot_client_weights_over_rounds(agg, tmp_path / "o.pdf", tmp_path / "o.png",
                                    labels={"label_groups-clients3-groups2": "two"})
    assert len(figures) == 4
    for fig in figures[:3]:
        assert "2 distributions" in texts(fig) and "1 distribution" in texts(fig)
        assert "groups2" not in texts(fig)
    # unlabelled ids show as themselves
    assert "two" in texts(figures[3]) and "groups1" in texts(figures[3])
    with pytest.raises(ValueError, match="both be shown"):
        plot_accuracy_vs_round(agg, tmp_path / "x.pdf", tmp_path / "x.png",
                               labels=dict.fromkeys(LABELS, "same"))
    assert not (tmp_path / "x.pdf").exists()


# ------------------------------------------------------------------ one client's accuracy
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
    plot_client_accuracy(weights_aggregate(), pdf, png, client=1, methods_order=["federico"])
    assert_figure_files(pdf, png)
    ax = figures[0].axes[0]
    assert "client 1: distribution 0" in ax.get_title()
    # panel 1 (groups1, natural order first), federico: mean of 2 runs, client 1 = 20 %, 70 %
    federico = ax.get_lines()[0]
    assert federico.get_xdata().tolist() == [0, 2]
    assert federico.get_ydata().tolist() == pytest.approx([20.0, 70.0])


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


# ------------------------------------------------------------------ weights over rounds
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


def test_plot_client_weights_over_rounds_errors(tmp_path: Path) -> None:
    paths = tmp_path / "o.pdf", tmp_path / "o.png"
    with pytest.raises(ValueError, match="fedavg"):
        plot_client_weights_over_rounds(weights_aggregate(), *paths, methods_order=["fedavg"])
    with pytest.raises(ValueError, match="client must be"):
        plot_client_weights_over_rounds(weights_aggregate(), *paths, client=-2)
    assert not any(p.exists() for p in paths)


def test_spread_keeps_labels_apart_and_centred() -> None:
    assert _spread([0.0, 0.5], 0.1) == pytest.approx([0.0, 0.5])
    assert _spread([0.3, 0.3], 0.1) == pytest.approx([0.25, 0.35])
    assert _spread([0.2, 0.2, 0.2, 0.26], 0.1) == pytest.approx([0.065, 0.165, 0.265, 0.365])


# ------------------------------------------------------------------ clusters
def clusters_aggregate() -> pd.DataFrame:
    """clustered_fl, 3 clients (groups 1, 0, 1) over rounds 0-2; client 1 splits off."""
    runs = []
    for seed, ids in ((1, [[0, 0, 0]] * 3), (0, [[0, 0, 0], [0, 1, 0], [0, 1, 0]])):
        run = make_run({2: [0.5] * 3}, n_test=(1, 1, 1), method="clustered_fl",
                       groups=[1, 0, 1], split_seed=seed)
        log = MetricLog()
        for rnd, row in enumerate(ids):
            log.add_per_client(rnd, "cluster", row)
        config = run.iloc[0][list(RUN_KEYS)].to_dict()
        runs += [run, log.to_frame(config)]
    return pd.concat(runs, ignore_index=True)


def test_cluster_panels_by_hand() -> None:
    panels = cluster_panels(clusters_aggregate(), "clustered_fl")
    assert len(panels) == 1
    panel = panels[0]
    assert panel.run["split_seed"] == 0
    assert list(panel.clusters.index) == [1, 0, 2]  # by (group, client)
    assert list(panel.clusters.columns) == [0, 1, 2]
    assert panel.clusters.to_numpy().tolist() == [[0, 1, 1], [0, 0, 0], [0, 0, 0]]
    assert panel.client_groups == [0, 1, 1] and panel.groups_known


def test_plot_clusters(tmp_path: Path) -> None:
    pdf, png = tmp_path / "k.pdf", tmp_path / "k.png"
    plot_clusters(clusters_aggregate(), pdf, png, "clustered_fl")
    assert_figure_files(pdf, png)
    with pytest.raises(ValueError, match="'federico'"):
        plot_clusters(weights_aggregate(), tmp_path / "x.pdf", tmp_path / "x.png", "federico")
    bad = clusters_aggregate()
    bad.loc[bad["metric"] == "cluster", "value"] = 0.5
    with pytest.raises(ValueError, match="not all integer"):
        plot_clusters(bad, tmp_path / "x.pdf", tmp_path / "x.png", "clustered_fl")
    assert not (tmp_path / "x.pdf").exists()
