"""Clustered FL's cluster id of every client against round, one heatmap per partition.

Clustered FL (:mod:`pflrepro.algorithms.clustered_fl`) logs each client's cluster id
every round (``cluster`` rows, client = i, value = id). The figure shows, for the run
with the lowest split seed (then train seed) of each partition, when the clusters
split and whether they follow the clients' distributions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import matplotlib
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.colors import ListedColormap
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from pflrepro.reporting.figures.common import (
    STYLE,
    LegendSpec,
    PathLike,
    finish,
    first_run_rows,
    grid,
    group_colours,
    new_figure,
    run_groups,
    run_mask,
    strip,
    wrap,
)
from pflrepro.config.figure_kinds import FigureKind
from pflrepro.reporting.accuracy import check_aggregate
from pflrepro.reporting.ordering import display_labels, order_values
from pflrepro.reporting.names import group_name, method_name
from pflrepro.store.results import CLUSTER

KIND = FigureKind(
    name="clusters", file="clusters-{method}", draw="plot_clusters",
    caption="Cluster id of each client over rounds ({method}).",
    label="clusters: {method}", input="method", options=("method",), records=CLUSTER,
    entry="weights")

@dataclass(frozen=True)
class ClusterPanel:
    """The data of one panel of :func:`plot_clusters`."""

    partition: str
    #: Config of the run shown (the lowest split seed, then train seed).
    run: dict[str, Any]
    #: Cluster id per client and round: index = client ids (display order), columns =
    #: rounds (ascending).
    clusters: pd.DataFrame
    #: Distribution id of each row (``-1``: none or unknown).
    client_groups: list[int]
    #: Whether every client had a ``group`` row.
    groups_known: bool


def cluster_panels(agg: pd.DataFrame, method: str, metric: str = CLUSTER, *,
                   partitions_order: Sequence[str] | None = None) -> list[ClusterPanel]:
    """Return the cluster id of every client and round of the first run of each partition.

    The first run is the one with the lowest split seed, then train seed; clients are
    ordered by (group, id) when every group is known. Raises ``ValueError`` naming
    ``method`` when it has no ``metric`` rows, when a (method, partition) mixes
    settings, when a (client, round) is given twice, or when an id is not an integer.
    """
    what = "plot_clusters"
    check_aggregate(agg, (), what)
    rows = agg[(agg["method"] == method) & (agg["metric"] == metric)
               & (agg["client"] >= 0) & (agg["peer"] < 0)]
    if rows.empty:
        having = sorted(agg.loc[agg["metric"] == metric, "method"].dropna().unique().tolist())
        raise ValueError(f"{what}: no {metric!r} rows for method {method!r} "
                         f"(methods with {metric!r} rows: {having})")
    values = rows["value"].to_numpy(dtype=float)
    if not np.all(np.isfinite(values) & (values == np.round(values))):
        raise ValueError(f"{what}: {metric!r} values of method {method!r} are not all "
                         "integer cluster ids")
    partitions = order_values(rows["partition"], partitions_order, f"{what} partitions")
    groups_all = run_groups(agg)
    panels = []
    for partition in partitions:
        run, mine = first_run_rows(rows[rows["partition"] == partition], what, method,
                                   partition)
        if mine.duplicated(["client", "round"]).any():
            raise ValueError(f"{what}: a (client, round) {metric!r} is given twice in "
                             f"method {method!r}, partition {partition!r}")
        table = mine.pivot(index="client", columns="round", values="value").sort_index(axis=1)
        grp = groups_all[run_mask(groups_all, run)]
        groups = {int(c): int(g) for c, g in zip(grp["client"], grp["group"], strict=True)}
        clients = sorted(int(c) for c in table.index)
        known = all(c in groups for c in clients)
        if known:
            clients = sorted(clients, key=lambda c: (groups[c] < 0, groups[c], c))
        table = table.reindex(index=clients)
        table.columns = table.columns.astype("int64")
        table.index.name, table.columns.name = "client", "round"
        panels.append(ClusterPanel(partition=partition, run=run, clusters=table,
                                   client_groups=[groups.get(c, -1) for c in clients],
                                   groups_known=known))
    return panels


def _edges(x: np.ndarray) -> np.ndarray:
    """Cell edges around sorted centres ``x`` (midpoints; half a step beyond the ends)."""
    x = np.asarray(x, dtype=float)
    if len(x) == 1:
        return np.array([x[0] - 0.5, x[0] + 0.5])
    mid = (x[1:] + x[:-1]) / 2
    return np.concatenate([[x[0] - (mid[0] - x[0])], mid, [x[-1] + (x[-1] - mid[-1])]])


def _draw_panel(ax: Any, ax_left: Any, panel: ClusterPanel, ids: Sequence[int], cmap: Any,
                colours: Mapping[int, Any], title: str) -> None:
    """Draw one partition's clients × rounds grid of cluster ids and its distribution strip."""
    codes = panel.clusters.to_numpy(dtype=float)
    index = np.vectorize(lambda v: np.nan if np.isnan(v) else ids.index(int(v)))(codes)
    rounds = panel.clusters.columns.to_numpy()
    n_c = codes.shape[0]
    ax.pcolormesh(_edges(rounds), np.arange(n_c + 1), np.ma.masked_invalid(index), cmap=cmap,
                  vmin=-0.5, vmax=len(ids) - 0.5, edgecolors="white",
                  linewidth=0.3 if len(rounds) <= 60 else 0.0)
    ax.set_ylim(n_c, 0)
    ax.set_yticks([])
    ax.grid(False)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if codes.size <= 200:
        for i in range(n_c):
            for j, rnd in enumerate(rounds):
                if not np.isnan(codes[i, j]):
                    ax.text(rnd, i + 0.5, str(int(codes[i, j])), ha="center", va="center",
                            fontsize=6, color="white")
    if panel.groups_known:
        for i in range(1, n_c):
            if panel.client_groups[i] != panel.client_groups[i - 1]:
                ax.axhline(i, color="0.15", lw=1.0)
    strip(ax_left, np.array(panel.client_groups), colours, vertical=True)
    ax_left.set_yticks(np.arange(n_c) + 0.5, [str(c) for c in panel.clusters.index])
    ax_left.tick_params(axis="y", length=0)
    ax_left.set_ylabel("client")
    ax.set_xlabel("round")
    ax.set_title(f"{title}\nsplit seed {panel.run['split_seed']}, "
                 f"train seed {panel.run['train_seed']}")


def plot_clusters(agg: pd.DataFrame, pdf: PathLike, png: PathLike,
                  method: str = "clustered_fl", metric: str = CLUSTER, *,
                  partitions_order: Sequence[str] | None = None,
                  labels: Mapping[str, str] | None = None) -> None:
    """Heatmap of every client's cluster id against round (Clustered FL), per partition.

    Data from :func:`cluster_panels`: for each partition the run with the lowest split
    seed, then train seed; rows are clients (ordered by distribution when known, with
    a strip left of the rows colouring each client's distribution), columns rounds,
    colours cluster ids (annotated when the grid is small). ``labels`` maps partition
    ids to display labels. Raises ``ValueError`` as :func:`cluster_panels` does.
    """
    panels = cluster_panels(agg, method, metric, partitions_order=partitions_order)
    shown = display_labels([p.partition for p in panels], labels, "plot_clusters labels")
    ids = sorted({int(v) for p in panels for v in np.unique(p.clusters.to_numpy(dtype=float))
                  if not np.isnan(v)})
    palette = sns.color_palette("tab10" if len(ids) <= 10 else "husl", len(ids))
    all_groups = sorted({g for p in panels for g in p.client_groups}, key=lambda g: (g < 0, g))
    colours = group_colours(all_groups)

    with matplotlib.rc_context(STYLE):
        n_rows, n_cols = grid(len(panels), 2)
        biggest = max(p.clusters.shape[0] for p in panels)
        height = float(np.clip(1.2 + 0.22 * biggest, 2.4, 7.0))
        fig = new_figure(5.0 * n_cols, height * n_rows)
        outer = fig.add_gridspec(n_rows, n_cols)
        for k, panel in enumerate(panels):
            sub = outer[k // n_cols, k % n_cols].subgridspec(1, 2, width_ratios=[1, 40],
                                                             wspace=0.0)
            ax_left = fig.add_subplot(sub[0, 0])
            _draw_panel(fig.add_subplot(sub[0, 1]), ax_left, panel, ids,
                        ListedColormap(list(palette)), colours,
                        wrap(shown[panel.partition], 60))
    names = [f"cluster {c}" for c in ids]
    finish(fig, pdf, png, [
        LegendSpec([Patch(facecolor=palette[k]) for k in range(len(ids))], names,
                   f"{method_name(method)}: cluster id of each client", most_cols=8),
        LegendSpec([Patch(facecolor=colours[g]) for g in all_groups],
                   [group_name(g, [p.partition for p in panels]) for g in all_groups],
                   "left strip:\nclient distribution", loc="outside right upper"),
    ])
