"""Heatmaps of the final-round client weights ``w_ij`` (FedeRiCo Fig. 3), per partition."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import matplotlib
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.cm import ScalarMappable
from matplotlib.colors import Normalize
from matplotlib.patches import Patch

from pflrepro.reporting.figures.common import (
    STYLE,
    LegendSpec,
    PathLike,
    finish,
    first_run_rows,
    grid,
    group_colours,
    new_figure,
    run_mask,
    strip,
    wrap,
)
from pflrepro.config.figure_kinds import FigureKind
from pflrepro.reporting.accuracy import check_aggregate
from pflrepro.reporting.ordering import display_labels, order_values
from pflrepro.reporting.names import group_name, method_name
from pflrepro.store.results import GROUP, WEIGHT

KIND = FigureKind(
    name="weights", file="weights-{method}", draw="plot_client_weights",
    caption="Client weights learned by {method} at the final round (rows: clients, "
            "columns: the clients or components they weigh).",
    label="client weights: {method}", input="method", options=("method",), records=WEIGHT)


@dataclass(frozen=True)
class WeightPanel:
    """The data of one heatmap of :func:`plot_client_weights`."""

    partition: str
    #: Config of the run shown (the lowest split seed, then train seed).
    run: dict[str, Any]
    #: The run's last round with weights.
    round: int
    #: ``w_ij``: index = client ids, columns = peer ids, in display order.
    matrix: pd.DataFrame
    #: Distribution id of each row (``-1``: none or unknown).
    client_groups: list[int]
    #: Distribution id of each column, or ``None`` when peers are not clients.
    peer_groups: list[int] | None
    #: Whether every client had a ``group`` row.
    groups_known: bool


def weight_panels(agg: pd.DataFrame, method: str = "federico", metric: str = WEIGHT, *,
                  peers_are_clients: bool | None = None, sort_by_group: bool = True,
                  partitions_order: Sequence[str] | None = None) -> list[WeightPanel]:
    """Return the final-round weight matrix of the first run of each partition.

    The first run is the one with the lowest split seed, then train seed. With
    ``sort_by_group`` (and every client's ``group`` known) rows are ordered by
    (group, client id), and so are the columns when the peers are clients
    (``peers_are_clients``; default: whether the peer ids equal the client ids).

    Raises ``ValueError`` naming ``method`` when the aggregate has no ``metric`` rows
    for it, when a (method, partition) mixes settings, or when a (client, peer) is
    given twice at the final round.
    """
    what = "plot_client_weights"
    check_aggregate(agg, (), what)
    rows = agg[(agg["method"] == method) & (agg["metric"] == metric)
               & (agg["client"] >= 0) & (agg["peer"] >= 0)]
    if rows.empty:
        having = sorted(agg.loc[agg["metric"] == metric, "method"].dropna().unique().tolist())
        raise ValueError(f"{what}: no {metric!r} rows for method {method!r} "
                         f"(methods with {metric!r} rows: {having})")
    partitions = order_values(rows["partition"], partitions_order, f"{what} partitions")
    group_rows = agg[(agg["method"] == method) & (agg["metric"] == GROUP) & (agg["client"] >= 0)]

    panels = []
    for partition in partitions:
        prow = rows[rows["partition"] == partition]
        run, mine = first_run_rows(prow, what, method, partition)
        last = int(mine["round"].max())
        final = mine[mine["round"] == last]
        if final.duplicated(["client", "peer"]).any():
            raise ValueError(f"{what}: a (client, peer) {metric!r} is given twice at round "
                             f"{last} of method {method!r}, partition {partition!r}")
        matrix = final.pivot(index="client", columns="peer", values="value")
        clients = sorted(int(c) for c in matrix.index)
        peers = sorted(int(p) for p in matrix.columns)
        grp = group_rows[run_mask(group_rows, run)]
        groups = {int(c): int(v) for c, v in zip(grp["client"], grp["value"], strict=True)}
        known = all(c in groups for c in clients)
        as_clients = (set(peers) == set(clients) if peers_are_clients is None
                      else bool(peers_are_clients))
        if sort_by_group and known:
            clients = sorted(clients, key=lambda c: (groups[c] < 0, groups[c], c))
            if as_clients:
                peers = ([p for p in clients if p in set(peers)]
                         + [p for p in peers if p not in set(clients)])
        matrix = matrix.reindex(index=clients, columns=peers)
        matrix.index.name, matrix.columns.name = "client", "peer"
        panels.append(WeightPanel(
            partition=partition, run=run, round=last, matrix=matrix,
            client_groups=[groups.get(c, -1) for c in clients],
            peer_groups=[groups.get(p, -1) for p in peers] if as_clients else None,
            groups_known=known))
    return panels


def plot_client_weights(agg: pd.DataFrame, pdf: PathLike, png: PathLike,
                        method: str = "federico", metric: str = WEIGHT, *,
                        peers_are_clients: bool | None = None, sort_by_group: bool = True,
                        partitions_order: Sequence[str] | None = None,
                        peer_label: str | None = None,
                        labels: Mapping[str, str] | None = None,
                        value_label: str | None = None) -> None:
    """Heatmaps of the final-round weights ``w_ij``, one panel per partition.

    FedeRiCo Fig. 3 style (the data come from :func:`weight_panels`). For each
    partition the run with the lowest split seed (then train seed) is shown: rows are
    clients ``i``, columns peers ``j``, colours ``w_ij`` on a fixed ``[0, 1]`` scale,
    annotated when there are at most 10 clients. A strip left of the rows (and above
    the columns, when the peers are clients) colours each client by its distribution
    (``group``); with ``sort_by_group`` the clients are ordered by (group, id), so
    same-distribution blocks are contiguous and outlined. Tick labels are always the
    original client/peer ids.

    ``peers_are_clients`` (default: whether the peer ids equal the client ids) tells
    client-to-client weights (FedeRiCo) from client-to-component mixture weights
    (FedEM, ``peer`` = component); ``peer_label`` overrides the column axis label;
    ``labels`` maps partition ids to display labels for the panel titles;
    ``value_label`` overrides the colour bar's label.

    Raises ``ValueError`` naming ``method`` when the aggregate has no ``metric`` rows
    for it, or when a (client, peer) is given twice at the final round.
    """
    panels = weight_panels(agg, method, metric, peers_are_clients=peers_are_clients,
                           sort_by_group=sort_by_group, partitions_order=partitions_order)
    shown = display_labels([p.partition for p in panels], labels, "plot_client_weights labels")
    all_groups = sorted({g for p in panels for g in p.client_groups}, key=lambda g: (g < 0, g))
    colours = group_colours(all_groups)
    cmap = sns.color_palette("rocket_r", as_cmap=True)
    to_clients = all(p.peer_groups is not None for p in panels)
    xlabel = peer_label or ("peer $j$" if to_clients else "component $j$")
    # client-to-client weights (FedeRiCo's w_ij) or a client's mixture over components
    # (FedEM's pi_ij): the colour bar says which
    default_value = (f"{metric} $w_{{ij}}$" if to_clients else "mixture weight $\\pi_{ij}$")

    with matplotlib.rc_context(STYLE):
        n_rows, n_cols = grid(len(panels))
        biggest = max(max(p.matrix.shape) for p in panels)
        side = float(np.clip(1.2 + 0.32 * biggest, 3.0, 6.0))
        fig = new_figure(side * n_cols + 0.8, side * n_rows)
        outer = fig.add_gridspec(n_rows, n_cols + 1, width_ratios=[1.0] * n_cols + [0.04])
        for k, panel in enumerate(panels):
            _heatmap(fig, outer[k // n_cols, k % n_cols], panel, cmap, colours, xlabel,
                     wrap(shown[panel.partition]))
        fig.colorbar(ScalarMappable(norm=Normalize(vmin=0.0, vmax=1.0), cmap=cmap),
                     cax=fig.add_subplot(outer[:, -1]),
                     label=value_label or (default_value if metric == WEIGHT else metric))
    handles = [Patch(facecolor=colours[g], edgecolor="none") for g in all_groups]
    unknown = "no distribution id" if all(p.groups_known for p in panels) else "unknown"
    names = [group_name(g, [p.partition for p in panels], unknown) for g in all_groups]
    finish(fig, pdf, png, [LegendSpec(handles, names, f"client distribution ({method_name(method)})")])


def _heatmap(fig: Any, cell: Any, panel: WeightPanel, cmap: Any,
             colours: Mapping[int, Any], xlabel: str, title: str) -> None:
    """Draw one panel: the heatmap, the distribution strips, the block outlines."""
    matrix, cgroups, pgroups = panel.matrix, panel.client_groups, panel.peer_groups
    sub = cell.subgridspec(2, 2, width_ratios=[1, 22], height_ratios=[1, 22],
                           wspace=0.0, hspace=0.0)
    ax_top = fig.add_subplot(sub[0, 1])
    ax_left = fig.add_subplot(sub[1, 0])
    ax = fig.add_subplot(sub[1, 1])
    n_c = matrix.shape[0]
    sns.heatmap(matrix.to_numpy(dtype=float), ax=ax, cmap=cmap, vmin=0.0, vmax=1.0,
                cbar=False, annot=n_c <= 10, fmt=".2f", annot_kws={"fontsize": 6.5},
                linewidths=0.5, linecolor="white",
                xticklabels=[str(p) for p in matrix.columns], yticklabels=False)
    ax.tick_params(axis="x", rotation=0, length=0)
    ax.set_xlabel(xlabel)
    strip(ax_left, np.array(cgroups), colours, vertical=True)
    ax_left.set_yticks(np.arange(n_c) + 0.5, [str(c) for c in matrix.index])
    ax_left.tick_params(axis="y", length=0)
    ax_left.set_ylabel("client $i$")
    if pgroups is not None:
        strip(ax_top, np.array(pgroups), colours, vertical=False)
    else:
        ax_top.axis("off")
    if panel.groups_known:
        _outline_blocks(ax, cgroups, pgroups)
    ax_top.set_title(f"{title}\nsplit seed {panel.run['split_seed']}, "
                     f"train seed {panel.run['train_seed']}, round {panel.round}")


def _outline_blocks(ax: Any, cgroups: Sequence[int], pgroups: Sequence[int] | None) -> None:
    """Draw lines between consecutive clients (and peers) of different groups."""
    for i in range(1, len(cgroups)):
        if cgroups[i] != cgroups[i - 1]:
            ax.axhline(i, color="0.15", lw=1.0)
    if pgroups is not None:
        for j in range(1, len(pgroups)):
            if pgroups[j] != pgroups[j - 1]:
                ax.axvline(j, color="0.15", lw=1.0)
