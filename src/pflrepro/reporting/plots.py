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
    display_labels,
    order_values,
    run_label,
    weighted_accuracy_per_round,
)
from pflrepro.results import GROUP, TEST_ACCURACY, WEIGHT

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


def _legend_columns(entries: Sequence[str], width: float, most: int) -> int:
    """Legend columns that fit ``entries`` into a figure ``width`` inches wide."""
    longest = max((len(e) for e in entries), default=1)
    entry = 0.5 + 0.075 * longest  # handle + padding + text at the paper context size
    return max(1, min(len(entries), most, int(width // entry)))


def _grid(n: int, max_cols: int = 3) -> tuple[int, int]:
    """Rows and columns of a facet grid holding ``n`` panels."""
    cols = max(1, min(n, max_cols))
    return math.ceil(n / cols), cols


# --------------------------------------------------------------------------- accuracy
def _mean_band_stats(per_run_round: pd.DataFrame, value: str) -> pd.DataFrame:
    """Mean, std (``ddof=1``) and count of ``value`` × 100 per (partition, method, round)."""
    percent = per_run_round.assign(percent=per_run_round[value] * 100.0)
    return (percent.groupby(["partition", "method", "round"], sort=True)["percent"]
            .agg(mean="mean", std=lambda s: s.std(ddof=1), n="count").reset_index())


def _plot_method_lines(stats: pd.DataFrame, runs: pd.Series, methods: Sequence[str],
                       partitions: Sequence[str], titles: Mapping[str, str], ylabel: str,
                       pdf: PathLike, png: PathLike) -> None:
    """One panel per partition, one mean line (± 1 sd band) per method; see callers."""
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
            ax.set_title(titles[partition])
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            if k % cols == 0:
                ax.set_ylabel(ylabel)
            if k // cols == rows - 1 or k + cols >= len(partitions):
                ax.set_xlabel("round")
        for k in range(len(partitions), rows * cols):
            axes[k // cols][k % cols].remove()
        handles = [Line2D([], [], color=colours[m], lw=1.6) for m in methods]
        legend = [f"{m} ({_span(runs.loc[m].tolist())})" for m in methods]
        fig.legend(handles, legend, loc="outside lower center",
                   ncols=_legend_columns(legend, 3.4 * cols, 6),
                   title="method (n runs per panel): mean ± 1 sd over runs")
    save_figure(fig, pdf, png)


def plot_accuracy_vs_round(agg: pd.DataFrame, pdf: PathLike, png: PathLike, *,
                           methods_order: Sequence[str] | None = None,
                           partitions_order: Sequence[str] | None = None,
                           labels: Mapping[str, str] | None = None) -> None:
    """Plot weighted test accuracy (%) against round, one panel per partition.

    One line per method: the mean over its runs (split seeds × train seeds) of the
    weighted accuracy (:func:`~pflrepro.reporting.tables.weighted_accuracy_per_round`),
    with a band of ±1 standard deviation (``ddof=1``) where a method has two or more
    runs at a round. Panels are titled by ``labels`` (partition id -> display label;
    unlabelled ids show as themselves). Raises ``ValueError`` when accuracy or size
    metrics are missing, a (method, partition) mixes settings, or two panels would
    share a label.
    """
    what = "plot_accuracy_vs_round"
    per_round = weighted_accuracy_per_round(agg)
    check_cells(per_round.groupby(list(RUN_KEYS), dropna=False, sort=False).tail(1), what)
    stats = _mean_band_stats(per_round, "weighted_accuracy")
    methods = order_values(stats["method"], methods_order, f"{what} methods")
    partitions = order_values(stats["partition"], partitions_order, f"{what} partitions")
    shown = display_labels(partitions, labels, f"{what} labels")
    runs = per_round.drop_duplicates(list(RUN_KEYS)).groupby(["method", "partition"]).size()
    _plot_method_lines(stats, runs, methods, partitions,
                       {p: _wrap(shown[p]) for p in partitions},
                       "weighted test accuracy (%)", pdf, png)


def _check_client(client: Any, what: str) -> int:
    """Return ``client`` as an int, raising ``ValueError`` unless it is a client id >= 0."""
    if isinstance(client, bool) or not isinstance(client, int | np.integer) or client < 0:
        raise ValueError(f"{what}: client must be a client id (an int >= 0), got {client!r}")
    return int(client)


def _run_groups(agg: pd.DataFrame) -> pd.DataFrame:
    """Each client's distribution id per run: config columns, ``client``, ``group``."""
    rows = agg[(agg["metric"] == GROUP) & (agg["client"] >= 0) & (agg["peer"] < 0)]
    rows = rows.drop_duplicates([*RUN_KEYS, "client"])
    return rows[[*RUN_KEYS, "client", "value"]].rename(columns={"value": "group"})


def client_accuracy_per_round(agg: pd.DataFrame, client: int = 0) -> pd.DataFrame:
    """Per run and evaluated round: the test accuracy of one client.

    Returns one row per (run, round) with the run's config columns, ``round``,
    ``accuracy`` (a fraction) and ``group`` (the client's distribution id in that run;
    ``-1`` when unknown). Raises ``ValueError`` when the aggregate has no
    ``test_accuracy`` rows for ``client`` (naming the clients it has), when a round's
    accuracy is given twice, or when it is NaN (no test set).
    """
    what = "plot_client_accuracy"
    check_aggregate(agg, (TEST_ACCURACY,), what)
    client = _check_client(client, what)
    keys = list(RUN_KEYS)
    rows = agg[(agg["metric"] == TEST_ACCURACY) & (agg["client"] >= 0) & (agg["peer"] < 0)]
    mine = rows.loc[rows["client"] == client, [*keys, "round", "value"]]
    if mine.empty:
        have = sorted(int(c) for c in rows["client"].unique())
        raise ValueError(f"{what}: no {TEST_ACCURACY!r} rows for client {client} "
                         f"(clients present: {have})")
    dup = mine.duplicated([*keys, "round"])
    if dup.any():
        row = mine[dup].iloc[0]
        raise ValueError(f"{what}: {TEST_ACCURACY!r} given twice for client {client} at round "
                         f"{row['round']} of run {run_label(row)}")
    bad = mine[mine["value"].isna()]
    if not bad.empty:
        row = bad.iloc[0]
        raise ValueError(f"{what}: {TEST_ACCURACY!r} is NaN for client {client} (no test "
                         f"set?) at round {row['round']} of run {run_label(row)}")
    groups = _run_groups(agg)
    groups = groups.loc[groups["client"] == client, [*keys, "group"]]
    out = mine.rename(columns={"value": "accuracy"}).merge(groups, on=keys, how="left",
                                                           validate="many_to_one")
    out["group"] = out["group"].fillna(-1).astype("int64")
    out["round"] = out["round"].astype("int64")
    out = out.sort_values([*keys, "round"], kind="stable").reset_index(drop=True)
    return out[[*keys, "round", "accuracy", "group"]]


def plot_client_accuracy(agg: pd.DataFrame, pdf: PathLike, png: PathLike, client: int = 0,
                         *, methods_order: Sequence[str] | None = None,
                         partitions_order: Sequence[str] | None = None,
                         labels: Mapping[str, str] | None = None) -> None:
    """Plot one client's test accuracy (%) against round, one panel per partition.

    FedeRiCo Fig. 6(c) style. One line per method: the mean over its runs (split
    seeds × train seeds) of ``client``'s test accuracy
    (:func:`client_accuracy_per_round`), with a band of ±1 standard deviation
    (``ddof=1``) where a method has two or more runs at a round. A panel's title
    gives the client's distribution when all of the panel's runs that know it agree.
    ``labels`` maps partition ids to display labels. Raises ``ValueError`` when the
    client has no accuracy rows, a (method, partition) mixes settings, or ordering
    names an absent method or partition.
    """
    what = "plot_client_accuracy"
    per_round = client_accuracy_per_round(agg, client)
    check_cells(per_round.groupby(list(RUN_KEYS), dropna=False, sort=False).tail(1), what)
    stats = _mean_band_stats(per_round, "accuracy")
    methods = order_values(stats["method"], methods_order, f"{what} methods")
    partitions = order_values(stats["partition"], partitions_order, f"{what} partitions")
    shown = display_labels(partitions, labels, f"{what} labels")
    runs = per_round.drop_duplicates(list(RUN_KEYS)).groupby(["method", "partition"]).size()
    titles = {}
    for partition in partitions:
        groups = sorted({int(g) for g in per_round.loc[per_round["partition"] == partition,
                                                         "group"] if g >= 0})
        if len(groups) == 1:
            where = f"client {client}: distribution {groups[0]}"
        elif not groups:
            where = f"client {client}"
        else:
            where = f"client {client}: distribution varies by run"
        titles[partition] = _wrap(shown[partition]) + "\n" + where
    _plot_method_lines(stats, runs, methods, partitions, titles,
                       f"test accuracy of client {client} (%)", pdf, png)


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


def _first_run_rows(prow: pd.DataFrame, what: str, method: str,
                    partition: str) -> tuple[dict[str, Any], pd.DataFrame]:
    """The first run of one (method, partition) and its rows; mixed settings raise."""
    settings = prow[list(SETTING_KEYS)].drop_duplicates()
    if len(settings) > 1:
        raise ValueError(f"{what}: method {method!r}, partition {partition!r} mixes "
                         f"settings {settings.to_dict('records')}; filter the aggregate")
    run = _first_run(prow)
    return run, prow[_run_mask(prow, run)]


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
        run, mine = _first_run_rows(prow, what, method, partition)
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
                        peer_label: str | None = None,
                        labels: Mapping[str, str] | None = None) -> None:
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
    ``labels`` maps partition ids to display labels for the panel titles.

    Raises ``ValueError`` naming ``method`` when the aggregate has no ``metric`` rows
    for it, or when a (client, peer) is given twice at the final round.
    """
    panels = weight_panels(agg, method, metric, peers_are_clients=peers_are_clients,
                           sort_by_group=sort_by_group, partitions_order=partitions_order)
    shown = display_labels([p.partition for p in panels], labels, "plot_client_weights labels")
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
            ax_top.set_title(_wrap(shown[panel.partition])
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


# --------------------------------------------------------------------------- weights over rounds
@dataclass(frozen=True)
class ClientWeightSeries:
    """The data of one panel of :func:`plot_client_weights_over_rounds`."""

    method: str
    partition: str
    #: Config of the run shown (the lowest split seed, then train seed).
    run: dict[str, Any]
    #: The client ``i`` whose weights are shown.
    client: int
    #: Its distribution id (``-1``: none or unknown).
    client_group: int
    #: ``w_ij`` per round: index = rounds (ascending), columns = peer ids ``j``.
    weights: pd.DataFrame
    #: Distribution id of each column, or ``None`` when peers are not clients.
    peer_groups: list[int] | None
    #: Whether the client and every peer that is a client had a ``group`` row.
    groups_known: bool


def client_weight_series(agg: pd.DataFrame, client: int = 0, *,
                         methods_order: Sequence[str] | None = None, metric: str = WEIGHT,
                         partitions_order: Sequence[str] | None = None,
                         peers_are_clients: bool | None = None,
                         ) -> list[list[ClientWeightSeries | None]]:
    """Return client ``i``'s weights ``w_ij`` over rounds, per partition and method.

    The result has one list per partition (``partitions_order``, then natural order)
    holding one entry per method with ``metric`` rows (``methods_order``, then natural
    order): the weights of the run with the lowest split seed, then train seed, of that
    (method, partition), or ``None`` when the method has no run there. Peers that are
    clients (``peers_are_clients``; default: whether the run's peer ids equal its
    client ids) are ordered by (group, id) when every group is known, else by id.

    Raises ``ValueError`` naming the method when ``methods_order`` names a method
    without ``metric`` rows or the aggregate has none at all, naming the client when
    it has no rows in a run shown, and when a (method, partition) mixes settings or a
    (round, peer) is given twice.
    """
    what = "plot_client_weights_over_rounds"
    check_aggregate(agg, (), what)
    client = _check_client(client, what)
    rows = agg[(agg["metric"] == metric) & (agg["client"] >= 0) & (agg["peer"] >= 0)]
    having = sorted({str(m) for m in rows["method"].unique()})
    if methods_order is not None and not isinstance(methods_order, str):
        lacking = [str(m) for m in methods_order if str(m) not in having]
        if lacking:
            raise ValueError(f"{what}: no {metric!r} rows for method(s) {lacking} (methods "
                             f"with {metric!r} rows: {having})")
    if rows.empty:
        methods_present = sorted({str(m) for m in agg["method"].dropna().unique()})
        raise ValueError(f"{what}: no {metric!r} rows for any method (methods in the "
                         f"aggregate: {methods_present})")
    methods = order_values(having, methods_order, f"{what} methods")
    partitions = order_values(rows["partition"], partitions_order, f"{what} partitions")
    groups_all = _run_groups(agg)

    out: list[list[ClientWeightSeries | None]] = []
    for partition in partitions:
        line: list[ClientWeightSeries | None] = []
        for method in methods:
            prow = rows[(rows["method"] == method) & (rows["partition"] == partition)]
            if prow.empty:
                line.append(None)
                continue
            run, mine = _first_run_rows(prow, what, method, partition)
            rows_i = mine[mine["client"] == client]
            if rows_i.empty:
                have = sorted(int(c) for c in mine["client"].unique())
                raise ValueError(f"{what}: no {metric!r} rows for client {client} in the "
                                 f"run shown of method {method!r} ({run_label(run)}; "
                                 f"clients with rows: {have})")
            dup = rows_i.duplicated(["round", "peer"])
            if dup.any():
                row = rows_i[dup].iloc[0]
                raise ValueError(f"{what}: {metric!r} of client {client}, peer "
                                 f"{int(row['peer'])} is given twice at round "
                                 f"{int(row['round'])} of method {method!r}, partition "
                                 f"{partition!r}")
            weights = rows_i.pivot(index="round", columns="peer", values="value")
            weights = weights.sort_index()
            weights.index = weights.index.astype("int64")
            clients = {int(c) for c in mine["client"].unique()}
            peers = sorted(int(p) for p in weights.columns)
            as_clients = (set(peers) == clients if peers_are_clients is None
                          else bool(peers_are_clients))
            grp = groups_all[_run_mask(groups_all, run)]
            groups = {int(c): int(g) for c, g in zip(grp["client"], grp["group"], strict=True)}
            known = client in groups and (not as_clients or all(p in groups for p in peers))
            if as_clients and known:
                peers = sorted(peers, key=lambda p: (groups[p] < 0, groups[p], p))
            weights = weights.reindex(columns=peers)
            weights.index.name, weights.columns.name = "round", "peer"
            line.append(ClientWeightSeries(
                method=method, partition=partition, run=run, client=client,
                client_group=groups.get(client, -1), weights=weights,
                peer_groups=[groups.get(p, -1) for p in peers] if as_clients else None,
                groups_known=known))
        out.append(line)
    return out


def _spread(ys: Sequence[float], gap: float) -> list[float]:
    """Positions near sorted ``ys``, at least ``gap`` apart, each crowd centred on its ys."""
    crowds: list[list[float]] = []  # original ys of labels placed as one evenly spaced run

    def start(crowd: list[float]) -> float:
        return sum(crowd) / len(crowd) - gap * (len(crowd) - 1) / 2

    for y in ys:
        crowds.append([y])
        while len(crowds) > 1 and (start(crowds[-1])
                                   < start(crowds[-2]) + gap * len(crowds[-2]) - 1e-12):
            last = crowds.pop()
            crowds[-1].extend(last)
    return [start(c) + gap * k for c in crowds for k in range(len(c))]


def _label_line_ends(ax: Any, x: float, ends: Sequence[tuple[float, str, Any]],
                     gap: float) -> None:
    """Write labels right of ``x`` near heights ``ends`` (y, text, colour), ``gap`` apart."""
    ends = sorted(ends, key=lambda e: e[0])
    for (_, text, colour), y_text in zip(ends, _spread([e[0] for e in ends], gap),
                                         strict=True):
        ax.annotate(text, xy=(x, y_text), xytext=(4, 0), textcoords="offset points",
                    fontsize=6.5, color=colour, va="center", ha="left",
                    annotation_clip=False)


def plot_client_weights_over_rounds(agg: pd.DataFrame, pdf: PathLike, png: PathLike,
                                    client: int = 0, *,
                                    methods_order: Sequence[str] | None = None,
                                    metric: str = WEIGHT,
                                    partitions_order: Sequence[str] | None = None,
                                    peers_are_clients: bool | None = None,
                                    labels: Mapping[str, str] | None = None) -> None:
    """Plot client ``i``'s weights ``w_ij`` against round, one line per peer ``j``.

    FedeRiCo Fig. 7 style (data from :func:`client_weight_series`): one panel per
    method with ``metric`` rows (e.g. the β variants), one row of panels per partition
    (a single partition's panels wrap at four per row); each panel shows the run with
    the lowest split seed, then train seed. When the peers are clients, lines are
    coloured by the peer's distribution (``group``): solid for peers of the client's
    own distribution, dashed for the others, and black for ``j = i``; otherwise
    (mixture components, e.g. FedEM; ``peers_are_clients`` as in
    :func:`client_weight_series`) each peer has its own colour. Lines ending at 0.05
    or more are labelled with ``j``. ``labels`` maps partition ids to display labels.

    Raises ``ValueError`` as :func:`client_weight_series` does (naming the method
    without ``metric`` rows, or the missing client).
    """
    grid = client_weight_series(agg, client, methods_order=methods_order, metric=metric,
                                partitions_order=partitions_order,
                                peers_are_clients=peers_are_clients)
    partitions = [next(s for s in line if s is not None).partition for line in grid]
    methods = [next(line[k] for line in grid if line[k] is not None).method
               for k in range(len(grid[0]))]
    shown = display_labels(partitions, labels, "plot_client_weights_over_rounds labels")
    series = [s for line in grid for s in line if s is not None]
    all_groups = sorted({g for s in series if s.peer_groups is not None for g in s.peer_groups}
                        | {s.client_group for s in series if s.peer_groups is not None},
                        key=lambda g: (g < 0, g))
    colours = _group_colours(all_groups)
    components = sorted({int(p) for s in series if s.peer_groups is None
                         for p in s.weights.columns})
    comp_colours = dict(zip(components, sns.color_palette("tab10", max(len(components), 1)),
                            strict=False))
    values = np.concatenate([s.weights.to_numpy(dtype=float).ravel() for s in series])
    unit = bool(np.nanmin(values) >= 0.0 and np.nanmax(values) <= 1.0)
    symbol = f"$w_{{{client}j}}$" if metric == WEIGHT else f"{metric} ({client}, j)"

    if len(grid) == 1:
        cells = [(k // min(len(methods), 4), k % min(len(methods), 4), grid[0][k])
                 for k in range(len(methods))]
        n_rows, n_cols = _grid(len(methods), 4)
    else:
        cells = [(r, c, grid[r][c]) for r in range(len(grid)) for c in range(len(methods))]
        n_rows, n_cols = len(grid), len(methods)

    with matplotlib.rc_context(STYLE):
        width = max(3.3 * n_cols, 6.0)
        fig = _new_figure(width, 2.7 * n_rows + 1.1)
        axes = fig.subplots(n_rows, n_cols, sharey=unit, squeeze=False)
        for r, c, s in cells:
            ax = axes[r][c]
            if s is None:
                ax.text(0.5, 0.5, f"no {methods[c]} run", ha="center", va="center",
                        transform=ax.transAxes, color="0.4")
                ax.set_xticks([])
                ax.set_yticks([])
                if c == 0:
                    ax.set_ylabel(_wrap(shown[partitions[r]]))
                continue
            x = s.weights.index.to_numpy()
            ends = []
            peers = [int(p) for p in s.weights.columns]
            peer_group = dict(zip(peers, s.peer_groups or [-1] * len(peers), strict=True))
            # draw same-distribution peers over the others, and the client itself on top
            order = sorted(peers, key=lambda p: (p == s.client, s.peer_groups is not None
                                                 and peer_group[p] == s.client_group))
            for peer in order:
                y = s.weights[peer].to_numpy(dtype=float)
                if s.peer_groups is None:
                    colour, style, lw = comp_colours[peer], "-", 1.3
                else:
                    g = peer_group[peer]
                    same = s.groups_known and g == s.client_group and g >= 0
                    colour = "black" if peer == s.client else colours[g]
                    style = "-" if peer == s.client or same else "--"
                    lw = 2.0 if peer == s.client else (1.6 if same else 1.0)
                ax.plot(x, y, color=colour, ls=style, lw=lw,
                        marker="o" if len(x) <= 12 else None, ms=2.5)
                last = y[~np.isnan(y)]
                if len(last) and last[-1] >= 0.05:
                    ends.append((float(last[-1]), str(int(peer)), colour))
            if unit:
                ax.set_ylim(-0.03, 1.03)
            span = float(x.max() - x.min()) if len(x) > 1 else 1.0
            ax.set_xlim(float(x.min()) - 0.02 * span, float(x.max()) + 0.10 * span)
            _label_line_ends(ax, float(x.max()), ends, gap=0.06 if unit else 0.0)
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            where = (f"client {client}: distribution {s.client_group}"
                     if s.client_group >= 0 else f"client {client}")
            ax.set_title(f"{s.method}\n{where}; seeds {s.run['split_seed']}/"
                         f"{s.run['train_seed']}")
            if c == 0:
                ax.set_ylabel(symbol if len(grid) == 1
                              else f"{_wrap(shown[s.partition])}\n{symbol}")
            if r == n_rows - 1 or (len(grid) == 1 and (r + 1) * n_cols + c >= len(methods)):
                ax.set_xlabel("round")
        for k in range(len(cells), n_rows * n_cols):
            axes[k // n_cols][k % n_cols].remove()
        title = f"weights {symbol} of client {client} over rounds (seeds: split/train)"
        if len(grid) == 1:
            title = f"{shown[partitions[0]]}: {title}"
        fig.suptitle(_wrap(title, int(width * 13)))
        handles: list[Any] = []
        names: list[str] = []
        if any(s.peer_groups is not None for s in series):
            handles += [Line2D([], [], color="black", lw=2.0),
                        Line2D([], [], color="0.45", lw=1.6),
                        Line2D([], [], color="0.45", lw=1.0, ls="--")]
            names += [f"j = {client} (the client itself)", "same distribution as the client",
                      "other distribution"]
            handles += [Patch(facecolor=colours[g]) for g in all_groups]
            names += [f"peer in distribution {g}" if g >= 0 else "peer distribution unknown"
                      for g in all_groups]
        if components:
            handles += [Line2D([], [], color=comp_colours[p], lw=1.3) for p in components]
            names += [f"component {p}" for p in components]
        fig.legend(handles, names, loc="outside lower center",
                   ncols=_legend_columns(names, width, 4),
                   title=f"peer j (line ends: j where the final {symbol} ≥ 0.05)")
    save_figure(fig, pdf, png)


# --------------------------------------------------------------------------- clusters
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


def cluster_panels(agg: pd.DataFrame, method: str, metric: str = "cluster", *,
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
    groups_all = _run_groups(agg)
    panels = []
    for partition in partitions:
        prow = rows[rows["partition"] == partition]
        run, mine = _first_run_rows(prow, what, method, partition)
        if mine.duplicated(["client", "round"]).any():
            raise ValueError(f"{what}: a (client, round) {metric!r} is given twice in "
                             f"method {method!r}, partition {partition!r}")
        table = mine.pivot(index="client", columns="round", values="value").sort_index(axis=1)
        grp = groups_all[_run_mask(groups_all, run)]
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


def plot_clusters(agg: pd.DataFrame, pdf: PathLike, png: PathLike,
                  method: str = "clustered_fl", metric: str = "cluster", *,
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
    cmap = ListedColormap(list(palette))
    all_groups = sorted({g for p in panels for g in p.client_groups}, key=lambda g: (g < 0, g))
    colours = _group_colours(all_groups)

    with matplotlib.rc_context(STYLE):
        n_rows, n_cols = _grid(len(panels), 2)
        biggest = max(p.clusters.shape[0] for p in panels)
        height = float(np.clip(1.2 + 0.22 * biggest, 2.4, 7.0))
        fig = _new_figure(5.0 * n_cols, height * n_rows + 0.6)
        outer = fig.add_gridspec(n_rows, n_cols)
        for k, panel in enumerate(panels):
            sub = outer[k // n_cols, k % n_cols].subgridspec(1, 2, width_ratios=[1, 40],
                                                             wspace=0.0)
            ax_left = fig.add_subplot(sub[0, 0])
            ax = fig.add_subplot(sub[0, 1])
            codes = panel.clusters.to_numpy(dtype=float)
            index = np.vectorize(lambda v: np.nan if np.isnan(v) else ids.index(int(v)))(codes)
            rounds = panel.clusters.columns.to_numpy()
            n_c = codes.shape[0]
            ax.pcolormesh(_edges(rounds), np.arange(n_c + 1), np.ma.masked_invalid(index),
                          cmap=cmap, vmin=-0.5, vmax=len(ids) - 0.5, edgecolors="white",
                          linewidth=0.3 if len(rounds) <= 60 else 0.0)
            ax.set_ylim(n_c, 0)
            ax.set_yticks([])
            ax.grid(False)
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            if codes.size <= 200:
                for i in range(n_c):
                    for j, rnd in enumerate(rounds):
                        if not np.isnan(codes[i, j]):
                            ax.text(rnd, i + 0.5, str(int(codes[i, j])), ha="center",
                                    va="center", fontsize=6, color="white")
            if panel.groups_known:
                for i in range(1, n_c):
                    if panel.client_groups[i] != panel.client_groups[i - 1]:
                        ax.axhline(i, color="0.15", lw=1.0)
            _strip(ax_left, np.array(panel.client_groups), colours, vertical=True)
            ax_left.set_yticks(np.arange(n_c) + 0.5, [str(c) for c in panel.clusters.index])
            ax_left.tick_params(axis="y", length=0)
            ax_left.set_ylabel("client")
            ax.set_xlabel("round")
            ax.set_title(_wrap(shown[panel.partition], 60)
                         + f"\nsplit seed {panel.run['split_seed']}, "
                         f"train seed {panel.run['train_seed']}")
        names = [f"cluster {c}" for c in ids]
        fig.legend([Patch(facecolor=palette[k]) for k in range(len(ids))], names,
                   loc="outside lower center", ncols=_legend_columns(names, 5.0 * n_cols, 8),
                   title=f"{method}: cluster id of each client")
        fig.legend([Patch(facecolor=colours[g]) for g in all_groups],
                   [f"distribution {g}" if g >= 0 else "unknown" for g in all_groups],
                   loc="outside right upper", title="left strip:\nclient distribution")
    save_figure(fig, pdf, png)


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
