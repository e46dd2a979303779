"""Accuracy against communicated numbers: one point per method, one panel per partition.

PerFed-CKT ranks methods by accuracy *and* by the parameters they move: a method is
better placed the further up (accuracy) and left (fewer scalars) it sits. Each point
is a method's mean over runs of the final weighted test accuracy and of the total
scalars its clients sent and received over the run
(:func:`pflrepro.reporting.communication.communication_table`), on a log axis; a
method that communicates nothing (Local) sits at the axis' left edge, marked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from pflrepro.config.figure_kinds import FigureKind
from pflrepro.reporting.communication import communication_table
from pflrepro.reporting.figures.common import (
    STYLE,
    LegendSpec,
    PathLike,
    facets,
    finish,
    wrap,
)
from pflrepro.reporting.method_styles import method_styles
from pflrepro.reporting.names import method_names
from pflrepro.reporting.ordering import display_labels, order_values

KIND = FigureKind(
    name="communication", file="communication", draw="plot_communication",
    caption="Scalars each method communicated against its accuracy.",
    label="communication vs accuracy", options=("methods",))


def plot_communication(agg: pd.DataFrame, pdf: PathLike, png: PathLike, *,
                       methods_order: Sequence[str] | None = None,
                       labels: Mapping[str, str] | None = None) -> None:
    """Final weighted accuracy (%) against total communicated scalars per run (log x).

    Raises ``ValueError`` when the runs logged no traffic or accuracy.
    """
    what = "plot_communication"
    table = communication_table(agg, methods_order)
    methods = order_values(table["method"], methods_order, f"{what} methods")
    partitions = order_values(table["partition"], None, f"{what} partitions")
    shown = display_labels(partitions, labels, f"{what} labels")
    colours = {m: style.colour for m, style in method_styles(methods).items()}
    positive = table.loc[table["total"] > 0, "total"]
    floor = float(positive.min()) / 10 if not positive.empty else 1.0
    with matplotlib.rc_context(STYLE):
        fig, axes, cols = facets(len(partitions), 3.4, 2.8)
        for k, (ax, partition) in enumerate(zip(axes, partitions, strict=True)):
            cur = table[table["partition"] == partition]
            for row in cur.itertuples(index=False):
                x = row.total if row.total > 0 else floor
                ax.scatter([x], [row.accuracy], color=colours[row.method], s=28, zorder=3,
                           marker="o" if row.total > 0 else "<")
            ax.set_xscale("log")
            ax.set_title(wrap(shown[partition]))
            ax.set_xlabel("scalars communicated per run")
            if k % cols == 0:
                ax.set_ylabel("final weighted test accuracy (%)")
            ax.grid(True, which="major", alpha=0.3)
    handles = [Line2D([], [], color=colours[m], marker="o", lw=0) for m in methods]
    names = list(method_names(methods).values())
    if bool(np.any(table["total"] == 0)):
        handles.append(Line2D([], [], color="0.3", marker="<", lw=0))
        names.append("(nothing communicated)")
    finish(fig, pdf, png, [LegendSpec(handles, names, "method: mean over runs")])
