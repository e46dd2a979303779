"""Cluster figure: the panels by hand, the files, fit, bad input, the CLI command."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from _figure_helpers import (
    assert_figure_files,
    assert_names_not_ids,
    captured_figures,
    check_fits,
    grid_aggregate,
    make_run,
    weights_aggregate,
)

from pflrepro.cli import main
from pflrepro.reporting.figures.clusters import CLUSTER, cluster_panels, plot_clusters


def clusters_aggregate() -> pd.DataFrame:
    """clustered_fl, 3 clients (groups 1, 0, 1) over rounds 0-2; client 1 splits off."""
    runs = []
    for seed, ids in ((1, [[0, 0, 0]] * 3), (0, [[0, 0, 0], [0, 1, 0], [0, 1, 0]])):
        runs.append(make_run({2: [0.5] * 3}, n_test=(1, 1, 1), method="clustered_fl",
                             groups=[1, 0, 1], split_seed=seed,
                             per_client={CLUSTER: dict(enumerate(ids))}))
    return pd.concat(runs, ignore_index=True)


def test_metric_is_the_algorithms() -> None:
    from pflrepro.algorithms.clustered_fl import CLUSTER as LOGGED

    assert CLUSTER == LOGGED


def test_cluster_panels_by_hand() -> None:
    panels = cluster_panels(clusters_aggregate(), "clustered_fl")
    assert len(panels) == 1
    panel = panels[0]
    assert panel.run["split_seed"] == 0
    assert list(panel.clusters.index) == [1, 0, 2]  # by (group, client)
    assert list(panel.clusters.columns) == [0, 1, 2]
    assert panel.clusters.to_numpy().tolist() == [[0, 1, 1], [0, 0, 0], [0, 0, 0]]
    assert panel.client_groups == [0, 1, 1] and panel.groups_known


def test_plot_clusters(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    figures = captured_figures(monkeypatch)
    pdf, png = tmp_path / "k.pdf", tmp_path / "k.png"
    labels = {"label_groups-clients3-groups2": "two groups"}
    plot_clusters(clusters_aggregate(), pdf, png, "clustered_fl", labels=labels)
    assert_figure_files(pdf, png)
    # the method's paper name and the partition's label, no id, in every title
    assert_names_not_ids(figures[0], ["clustered_fl"], labels)
    with pytest.raises(ValueError, match="'federico'"):
        plot_clusters(weights_aggregate(), tmp_path / "x.pdf", tmp_path / "x.png", "federico")
    bad = clusters_aggregate()
    bad.loc[bad["metric"] == CLUSTER, "value"] = 0.5
    with pytest.raises(ValueError, match="not all integer"):
        plot_clusters(bad, tmp_path / "x.pdf", tmp_path / "x.png", "clustered_fl")
    assert not (tmp_path / "x.pdf").exists()


@pytest.mark.parametrize(("partitions", "clients"), [(1, 4), (3, 16)])
def test_fits_any_number_of_panels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   partitions: int, clients: int) -> None:
    agg = grid_aggregate(partitions, ["clustered_fl"], clients=clients, rounds=5, seeds=1)
    check_fits(monkeypatch, tmp_path, lambda pdf, png: plot_clusters(agg, pdf, png))


def test_cli_plot_clusters(tmp_path: Path) -> None:
    agg = tmp_path / "agg.parquet"
    from pflrepro.store.io import write_parquet

    write_parquet(clusters_aggregate(), agg)  # with its digest record (issue 27, item 3)
    pdf, png = tmp_path / "k.pdf", tmp_path / "k.png"
    labels = '{"partitions": {"label_groups-clients3-groups2": "two groups"}}'
    assert main(["plot", "clusters", "--aggregate", str(agg), "--method", "clustered_fl",
                 "--labels", labels, "--pdf", str(pdf), "--png", str(png)]) == 0
    assert_figure_files(pdf, png)
    assert main(["plot", "clusters", "--aggregate", str(agg), "--method", "fedavg",
                 "--pdf", str(pdf), "--png", str(png)]) == 1
