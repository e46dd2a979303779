"""Each client's label distribution (PerFed-CKT Fig. 2b), from a partition table."""

from __future__ import annotations

import math

import matplotlib
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from pflrepro.reporting.figures.common import (
    STYLE,
    LegendSpec,
    PathLike,
    finish,
    group_colours,
    new_figure,
)
from pflrepro.config.figure_kinds import FigureKind

KIND = FigureKind(
    name="labels", file="", draw="plot_label_distribution",
    caption="Label distribution per client of one partition (one split seed).",
    label="partition", input="partition", options=("title",), entry="", rule="plot_partition")


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


def nice(value: float) -> int:
    """Round ``value`` down to 1, 2 or 5 times a power of ten (at least 1)."""
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
    colours = group_colours(groups.tolist())

    with matplotlib.rc_context(STYLE):
        width = float(np.clip(0.6 + 0.3 * n_clients, 3.3, 12.8))
        height = float(np.clip(1.2 + 0.25 * n_classes, 3.0, 10.0))
        fig = new_figure(width, height)
        ax = fig.add_subplot()
        # Largest dot: ~90 % of the smaller of a client column / class row, in points.
        cell_pt = min((width - 0.6) * 72 / max(n_clients, 1),
                      (height - 0.9) * 72 / max(n_classes, 1))
        max_area = (0.9 * max(cell_pt, 2.0)) ** 2
        top = int(counts.max())
        xs, ys = np.nonzero(counts)
        dot_colours = [colours[int(groups[x])] if coloured else sns.color_palette()[0]
                       for x in xs]
        ax.scatter(xs, ys, s=counts[xs, ys] / top * max_area, c=dot_colours, alpha=0.85,
                   linewidths=0)
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

    refs = sorted({nice(top), nice(top / 4), nice(top / 16)}, reverse=True)
    legends = [LegendSpec([Line2D([], [], ls="", marker="o", color="0.4",
                                  markersize=math.sqrt(r / top * max_area)) for r in refs],
                          [str(r) for r in refs], "samples", loc="outside right upper",
                          options={"labelspacing": 1.2, "borderpad": 0.8})]
    if coloured:
        present = sorted(set(groups.tolist()), key=lambda g: (g < 0, g))
        legends.append(LegendSpec([Patch(facecolor=colours[g]) for g in present],
                                  [f"distribution {g}" if g >= 0 else "none" for g in present],
                                  "client distribution", loc="outside right lower"))
    finish(fig, pdf, png, legends)
