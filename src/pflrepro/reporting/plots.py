"""Figures from an aggregate of run tables, each written as a PDF and a PNG.

Figures are drawn on a :class:`matplotlib.figure.Figure` attached to the Agg canvas
directly (never through :mod:`matplotlib.pyplot`), so importing this module changes
no global backend or state and leaks no figures. Every figure is drawn and saved
inside one fixed style (:data:`STYLE`, seaborn ``whitegrid``/``paper`` with a fixed
font), and the PDF is saved without a creation date, so the same inputs and the same
library versions give byte-identical files. Both files are written atomically.
"""

from __future__ import annotations

import math
import os
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import matplotlib
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.cm import ScalarMappable
from matplotlib.colors import ListedColormap, Normalize
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from pflrepro.io import atomic_path
from pflrepro.reporting.tables import (
    RUN_KEYS,
    SETTING_KEYS,
    check_aggregate,
    check_cells,
    order_values,
    weighted_accuracy_per_round,
)
from pflrepro.results import GROUP, WEIGHT

PathLike = str | os.PathLike[str]

#: rcParams every figure is drawn and saved under.
STYLE: dict[str, Any] = {
    **sns.axes_style("whitegrid"),
    **sns.plotting_context("paper"),
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans"],
    "pdf.fonttype": 42,
    "ps.fonttype": 42,
    "svg.hashsalt": "pflrepro",
    "figure.dpi": 100,
    "savefig.dpi": 200,
    "legend.frameon": False,
}
#: Colours of the methods, in order (seaborn's colour-blind safe palette).
METHOD_PALETTE = "colorblind"
#: Colours of the client distributions (groups); ``-1`` (no group) is grey.
GROUP_PALETTE = "Set2"
NO_GROUP_COLOUR = (0.8, 0.8, 0.8)
#: Saved-figure metadata: no creation date, so PDFs are reproducible.
PDF_METADATA: dict[str, Any] = {"CreationDate": None}


def _new_figure(width: float, height: float) -> Figure:
    """Return a constrained-layout figure drawn by the Agg canvas (no pyplot)."""
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def save_figure(fig: Figure, pdf: PathLike, png: PathLike) -> None:
    """Save ``fig`` to ``pdf`` and ``png``, each atomically, with reproducible metadata."""
    with matplotlib.rc_context(STYLE):
        with atomic_path(pdf) as tmp:
            fig.savefig(tmp, format="pdf", metadata=PDF_METADATA)
        with atomic_path(png) as tmp:
            fig.savefig(tmp, format="png")


def _wrap(text: str, width: int = 34) -> str:
    """Wrap a long label (partition ids are long) after ``-`` or at spaces."""
    text = str(text)
    if len(text) <= width:
        return text
    lines = textwrap.wrap(text.replace("-", "- "), width, break_long_words=True)
    return "\n".join(line.replace("- ", "-") for line in lines)


def _grid(n: int, max_cols: int = 3) -> tuple[int, int]:
    """Rows and columns of a facet grid holding ``n`` panels."""
    cols = max(1, min(n, max_cols))
    return math.ceil(n / cols), cols


# --------------------------------------------------------------------------- accuracy
def plot_accuracy_vs_round(agg: pd.DataFrame, pdf: PathLike, png: PathLike, *,
                           methods_order: Sequence[str] | None = None,
                           partitions_order: Sequence[str] | None = None) -> None:
    """Plot weighted test accuracy (%) against round, one panel per partition.

    One line per method: the mean over its runs (split seeds × train seeds) of the
    weighted accuracy (:func:`~pflrepro.reporting.tables.weighted_accuracy_per_round`),
    with a band of ±1 standard deviation (``ddof=1``) where a method has two or more
    runs at a round. Raises ``ValueError`` when accuracy or size metrics are missing
    or a (method, partition) mixes settings.
    """
    per_round = weighted_accuracy_per_round(agg)
    check_cells(per_round.groupby(list(RUN_KEYS), dropna=False, sort=False).tail(1),
                "plot_accuracy_vs_round")
    per_round = per_round.assign(percent=per_round["weighted_accuracy"] * 100.0)
    stats = (per_round.groupby(["partition", "method", "round"], sort=True)["percent"]
             .agg(mean="mean", std=lambda s: s.std(ddof=1), n="count").reset_index())
    methods = order_values(stats["method"], methods_order, "plot_accuracy_vs_round methods")
    partitions = order_values(stats["partition"], partitions_order,
                              "plot_accuracy_vs_round partitions")
    runs = per_round.drop_duplicates(list(RUN_KEYS)).groupby(["method", "partition"]).size()
    colours = dict(zip(methods, sns.color_palette(METHOD_PALETTE, len(methods)), strict=True))

    with matplotlib.rc_context(STYLE):
        rows, cols = _grid(len(partitions))
        fig = _new_figure(3.4 * cols, 2.6 * rows + 0.5)
        axes = fig.subplots(rows, cols, sharex=False, sharey=True, squeeze=False)
        for k, partition in enumerate(partitions):
            ax = axes[k // cols][k % cols]
            for method in methods:
                cur = stats[(stats["partition"] == partition) & (stats["method"] == method)]
                if cur.empty:
                    continue
                x = cur["round"].to_numpy()
                mean = cur["mean"].to_numpy()
                std = cur["std"].to_numpy()
                ax.plot(x, mean, color=colours[method], lw=1.4,
                        marker="o" if len(x) <= 12 else None, ms=3)
                band = ~np.isnan(std)
                if band.any():
                    ax.fill_between(x[band], (mean - std)[band], (mean + std)[band],
                                    color=colours[method], alpha=0.2, lw=0)
            ax.set_title(_wrap(partition))
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            if k % cols == 0:
                ax.set_ylabel("weighted test accuracy (%)")
            if k // cols == rows - 1 or k + cols >= len(partitions):
                ax.set_xlabel("round")
        for k in range(len(partitions), rows * cols):
            axes[k // cols][k % cols].remove()
        handles = [Line2D([], [], color=colours[m], lw=1.6) for m in methods]
        labels = [f"{m} ({_span(runs.loc[m].tolist())})" for m in methods]
        fig.legend(handles, labels, loc="outside lower center",
                   ncols=min(len(methods), 6 if cols > 1 else 3),
                   title="method (n runs per panel): mean ± 1 sd over runs")
    save_figure(fig, pdf, png)


def _span(counts: Sequence[int]) -> str:
    """Describe run counts: ``n=3``, or ``n=2–3`` when panels differ."""
    lo, hi = min(counts), max(counts)
    return f"n={lo}" if lo == hi else f"n={lo}–{hi}"


# --------------------------------------------------------------------------- weights
def _first_run(rows: pd.DataFrame) -> dict[str, Any]:
    """Config of the run with the lowest split seed, then train seed (then the rest)."""
    runs = rows[list(RUN_KEYS)].drop_duplicates()
    runs = runs.sort_values(["split_seed", "train_seed",
                             *[k for k in RUN_KEYS if k not in ("split_seed", "train_seed")]])
    return runs.iloc[0].to_dict()


def _run_mask(frame: pd.DataFrame, run: Mapping[str, Any]) -> pd.Series:
    """Boolean mask of the rows of ``frame`` that belong to ``run``."""
    mask = pd.Series(True, index=frame.index)
    for key in RUN_KEYS:
        mask &= frame[key] == run[key]
    return mask


def _group_colours(groups: Sequence[int]) -> dict[int, tuple[float, float, float]]:
    """Map each distribution id to a colour (``-1``: grey), stable for a given set of ids."""
    real = sorted({g for g in groups if g >= 0})
    palette = sns.color_palette(GROUP_PALETTE, max(len(real), 1))
    colours = {g: tuple(palette[i % len(palette)]) for i, g in enumerate(real)}
    colours[-1] = NO_GROUP_COLOUR
    return colours


def _strip(ax: Any, codes: np.ndarray, colours: Mapping[int, Any], vertical: bool) -> None:
    """Draw a one-cell-wide strip coloured by group ids ``codes`` on ``ax``."""
    keys = sorted(colours)
    cmap = ListedColormap([colours[g] for g in keys])
    index = np.array([keys.index(int(g)) for g in codes], dtype=float)
    n = len(codes)
    if vertical:
        ax.pcolormesh(np.arange(2), np.arange(n + 1), index[:, None], cmap=cmap,
                      vmin=-0.5, vmax=len(keys) - 0.5, edgecolors="white", linewidth=0.5)
        ax.set_xlim(0, 1)
        ax.set_ylim(n, 0)
    else:
        ax.pcolormesh(np.arange(n + 1), np.arange(2), index[None, :], cmap=cmap,
                      vmin=-0.5, vmax=len(keys) - 0.5, edgecolors="white", linewidth=0.5)
        ax.set_xlim(0, n)
        ax.set_ylim(1, 0)
    ax.grid(False)
    for spine in ax.spines.values():
        spine.set_visible(False)
    ax.set_xticks([])
    ax.set_yticks([])


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
        settings = prow[list(SETTING_KEYS)].drop_duplicates()
        if len(settings) > 1:
            raise ValueError(f"{what}: method {method!r}, partition {partition!r} mixes "
                             f"settings {settings.to_dict('records')}; filter the aggregate")
        run = _first_run(prow)
        mine = prow[_run_mask(prow, run)]
        last = int(mine["round"].max())
        final = mine[mine["round"] == last]
        if final.duplicated(["client", "peer"]).any():
            raise ValueError(f"{what}: a (client, peer) {metric!r} is given twice at round "
                             f"{last} of method {method!r}, partition {partition!r}")
        matrix = final.pivot(index="client", columns="peer", values="value")
        clients = sorted(int(c) for c in matrix.index)
        peers = sorted(int(p) for p in matrix.columns)
        grp = group_rows[_run_mask(group_rows, run)]
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
                        peer_label: str | None = None) -> None:
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
    (FedEM, ``peer`` = component); ``peer_label`` overrides the column axis label.

    Raises ``ValueError`` naming ``method`` when the aggregate has no ``metric`` rows
    for it, or when a (client, peer) is given twice at the final round.
    """
    panels = weight_panels(agg, method, metric, peers_are_clients=peers_are_clients,
                           sort_by_group=sort_by_group, partitions_order=partitions_order)
    all_groups = sorted({g for p in panels for g in p.client_groups}, key=lambda g: (g < 0, g))
    colours = _group_colours(all_groups)
    cmap = sns.color_palette("rocket_r", as_cmap=True)
    norm = Normalize(vmin=0.0, vmax=1.0)
    xlabel = peer_label or ("peer $j$" if all(p.peer_groups is not None for p in panels)
                            else "component $j$")

    with matplotlib.rc_context(STYLE):
        n_rows, n_cols = _grid(len(panels))
        biggest = max(max(p.matrix.shape) for p in panels)
        side = float(np.clip(1.2 + 0.32 * biggest, 3.0, 6.0))
        fig = _new_figure(side * n_cols + 0.8, side * n_rows + 0.6)
        outer = fig.add_gridspec(n_rows, n_cols + 1, width_ratios=[1.0] * n_cols + [0.04])
        for k, panel in enumerate(panels):
            matrix, cgroups, pgroups = panel.matrix, panel.client_groups, panel.peer_groups
            sub = outer[k // n_cols, k % n_cols].subgridspec(
                2, 2, width_ratios=[1, 22], height_ratios=[1, 22], wspace=0.0, hspace=0.0)
            ax_top = fig.add_subplot(sub[0, 1])
            ax_left = fig.add_subplot(sub[1, 0])
            ax = fig.add_subplot(sub[1, 1])
            n_c = matrix.shape[0]
            sns.heatmap(matrix.to_numpy(dtype=float), ax=ax, cmap=cmap, vmin=0.0, vmax=1.0,
                        cbar=False, annot=n_c <= 10, fmt=".2f",
                        annot_kws={"fontsize": 6.5}, linewidths=0.5, linecolor="white",
                        xticklabels=[str(p) for p in matrix.columns], yticklabels=False)
            ax.tick_params(axis="x", rotation=0, length=0)
            ax.set_xlabel(xlabel)
            _strip(ax_left, np.array(cgroups), colours, vertical=True)
            ax_left.set_yticks(np.arange(n_c) + 0.5, [str(c) for c in matrix.index])
            ax_left.tick_params(axis="y", length=0)
            ax_left.set_ylabel("client $i$")
            if pgroups is not None:
                _strip(ax_top, np.array(pgroups), colours, vertical=False)
            else:
                ax_top.axis("off")
            if panel.groups_known:
                _outline_blocks(ax, cgroups, pgroups)
            ax_top.set_title(_wrap(panel.partition)
                             + f"\nsplit seed {panel.run['split_seed']}, "
                             f"train seed {panel.run['train_seed']}, round {panel.round}")
        cax = fig.add_subplot(outer[:, -1])
        fig.colorbar(ScalarMappable(norm=norm, cmap=cmap), cax=cax,
                     label=f"{metric} $w_{{ij}}$" if metric == WEIGHT else metric)
        handles = [Patch(facecolor=colours[g], edgecolor="none") for g in all_groups]
        labels = [f"distribution {g}" if g >= 0 else "no distribution id" for g in all_groups]
        if not all(p.groups_known for p in panels):
            labels = [x if x != "no distribution id" else "unknown" for x in labels]
        fig.legend(handles, labels, loc="outside lower center",
                   ncols=min(len(handles), 6), title=f"client distribution ({method})")
    save_figure(fig, pdf, png)


def _outline_blocks(ax: Any, cgroups: Sequence[int], pgroups: Sequence[int] | None) -> None:
    """Draw lines between consecutive clients (and peers) of different groups."""
    for i in range(1, len(cgroups)):
        if cgroups[i] != cgroups[i - 1]:
            ax.axhline(i, color="0.15", lw=1.0)
    if pgroups is not None:
        for j in range(1, len(pgroups)):
            if pgroups[j] != pgroups[j - 1]:
                ax.axvline(j, color="0.15", lw=1.0)


# --------------------------------------------------------------------------- labels
def label_counts(partition_frame: pd.DataFrame, labels: np.ndarray,
                 num_classes: int) -> np.ndarray:
    """Return the (clients × classes) count of samples (train and test) per client and class.

    Raises ``ValueError`` on a malformed partition table, an out-of-range index, or
    labels outside ``[0, num_classes)``.
    """
    what = "plot_label_distribution"
    if not isinstance(partition_frame, pd.DataFrame):
        raise ValueError(f"{what}: expected a partition DataFrame, got "
                         f"{type(partition_frame).__name__}")
    missing = [c for c in ("client", "index") if c not in partition_frame.columns]
    if missing:
        raise ValueError(f"{what}: the partition table lacks column(s) {missing}")
    if partition_frame.empty:
        raise ValueError(f"{what}: the partition table is empty")
    if int(num_classes) < 1:
        raise ValueError(f"{what}: num_classes must be >= 1, got {num_classes}")
    labels = np.asarray(labels)
    if labels.ndim != 1:
        raise ValueError(f"{what}: labels must be 1-D, got shape {labels.shape}")
    index = partition_frame["index"].to_numpy(dtype=np.int64)
    clients = partition_frame["client"].to_numpy(dtype=np.int64)
    if index.min() < 0 or index.max() >= len(labels):
        raise ValueError(f"{what}: partition indices span [{index.min()}, {index.max()}] "
                         f"but there are {len(labels)} labels")
    if clients.min() < 0:
        raise ValueError(f"{what}: negative client id {clients.min()}")
    y = labels[index].astype(np.int64)
    if y.min() < 0 or y.max() >= num_classes:
        raise ValueError(f"{what}: labels span [{y.min()}, {y.max()}], outside "
                         f"[0, {num_classes})")
    counts = np.zeros((int(clients.max()) + 1, int(num_classes)), dtype=np.int64)
    np.add.at(counts, (clients, y), 1)
    return counts


def _nice(value: float) -> int:
    """Round ``value`` to 1, 2 or 5 times a power of ten (at least 1)."""
    if value <= 1:
        return 1
    power = 10 ** math.floor(math.log10(value))
    for step in (5, 2, 1):
        if step * power <= value:
            return int(step * power)
    return int(power)


def plot_label_distribution(partition_frame: pd.DataFrame, labels: np.ndarray,
                            num_classes: int, pdf: PathLike, png: PathLike, *,
                            title: str | None = None) -> None:
    """Dot plot of each client's label distribution (PerFed-CKT Fig. 2b style).

    ``partition_frame`` is a partition table (:mod:`pflrepro.data.partition`: columns
    ``client``, ``index``, optionally ``group``) and ``labels`` the data set's label
    vector, indexed by ``index``. x = client, y = class; a dot's area is proportional
    to the number of samples (train and test) of that class at that client. Dots are
    coloured by the client's distribution when the table has non-negative ``group``
    values. Raises ``ValueError`` on malformed input.
    """
    counts = label_counts(partition_frame, labels, num_classes)
    n_clients, n_classes = counts.shape
    groups = np.full(n_clients, -1, dtype=np.int64)
    if "group" in partition_frame.columns:
        per_client = partition_frame.groupby("client")["group"].first()
        groups[per_client.index.to_numpy(dtype=np.int64)] = per_client.to_numpy(dtype=np.int64)
    coloured = bool((groups >= 0).any())
    colours = _group_colours(groups.tolist())

    with matplotlib.rc_context(STYLE):
        width = float(np.clip(1.8 + 0.3 * n_clients, 4.5, 14.0))
        height = float(np.clip(1.2 + 0.25 * n_classes, 3.0, 10.0))
        fig = _new_figure(width, height)
        ax = fig.add_subplot()
        # Largest dot: ~90 % of the smaller of a client column / class row, in points.
        cell_pt = min((width - 1.8) * 72 / max(n_clients, 1),
                      (height - 0.9) * 72 / max(n_classes, 1))
        max_area = (0.9 * max(cell_pt, 2.0)) ** 2
        top = int(counts.max())
        xs, ys = np.nonzero(counts)
        sizes = counts[xs, ys] / top * max_area
        dot_colours = [colours[int(groups[x])] if coloured else sns.color_palette()[0]
                       for x in xs]
        ax.scatter(xs, ys, s=sizes, c=dot_colours, alpha=0.85, linewidths=0)
        ax.set_xlim(-0.7, n_clients - 0.3)
        ax.set_ylim(-0.7, n_classes - 0.3)
        ax.set_xlabel("client")
        ax.set_ylabel("class")
        if n_clients <= 40:
            ax.set_xticks(np.arange(n_clients))
        else:
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        if n_classes <= 20:
            ax.set_yticks(np.arange(n_classes))
        else:
            ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        if title:
            ax.set_title(title)

        refs = sorted({_nice(top), _nice(top / 4), _nice(top / 16)}, reverse=True)
        size_handles = [Line2D([], [], ls="", marker="o", color="0.4",
                               markersize=math.sqrt(r / top * max_area)) for r in refs]
        fig.legend(size_handles, [str(r) for r in refs], loc="outside right upper",
                            title="samples", labelspacing=1.2, borderpad=0.8)
        if coloured:
            present = sorted(set(groups.tolist()), key=lambda g: (g < 0, g))
            fig.legend([Patch(facecolor=colours[g]) for g in present],
                       [f"distribution {g}" if g >= 0 else "none" for g in present],
                       loc="outside right lower", title="client distribution")
    save_figure(fig, pdf, png)
