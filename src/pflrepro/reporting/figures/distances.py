"""Pairwise model distances over rounds: pairs of the same distribution vs the others.

FedAMP's attention ξ_ij = α e^{−x_ij/σ}/σ can tell client groups apart only where
the models of one group are closer to each other than to the rest. Its runs log
x_ij = ‖w_i − w_j‖²/P each round (``results.MODEL_DISTANCE``, also HeurFedAMP's);
this figure shows, per method and partition, the mean of x_ij over ordered pairs
i ≠ j of the same distribution and over pairs of different distributions (the
``group`` rows of the run), averaged over runs (:func:`distance_curves`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from pflrepro.reporting.figures.common import (
    METHOD_PALETTE,
    STYLE,
    LegendSpec,
    PathLike,
    facets,
    finish,
    run_groups,
    wrap,
)
from pflrepro.config.figure_kinds import FigureKind
from pflrepro.reporting.accuracy import RUN_KEYS
from pflrepro.reporting.ordering import display_labels, order_values
from pflrepro.reporting.names import method_name
from pflrepro.store.results import MODEL_DISTANCE

KIND = FigureKind(
    name="distances", file="distances", draw="plot_distances",
    caption="Pairwise model distances between clients of the same and of other groups, "
            "over rounds.",
    label="model distances", options=("methods",), records=MODEL_DISTANCE, if_none="error")

SAME, OTHER = "same distribution", "other distributions"


def distance_curves(agg: pd.DataFrame, metric: str = MODEL_DISTANCE) -> pd.DataFrame:
    """Mean pairwise distance per (method, partition, round, pairs), over runs.

    Columns: ``method``, ``partition``, ``round``, ``pairs`` (:data:`SAME` or
    :data:`OTHER`), ``mean`` (the mean over runs of each run's mean over its pairs),
    ``runs``. Raises ``ValueError`` when no run logged ``metric`` or a run that did
    lacks the clients' distributions.
    """
    rows = agg[(agg["metric"] == metric) & (agg["client"] >= 0) & (agg["peer"] >= 0)
               & (agg["client"] != agg["peer"])]
    if rows.empty:
        raise ValueError(f"distance_curves: no {metric!r} rows (only FedAMP and HeurFedAMP "
                         f"runs log them)")
    keys = list(RUN_KEYS)
    groups = run_groups(agg)
    with_client = rows.merge(groups, on=[*keys, "client"], how="left")
    peer_groups = groups.rename(columns={"client": "peer", "group": "peer_group"})
    pairs = with_client.merge(peer_groups, on=[*keys, "peer"], how="left")
    if pairs[["group", "peer_group"]].isna().any().any():
        raise ValueError("distance_curves: some runs lack the clients' distributions "
                         "('group' rows)")
    pairs["pairs"] = np.where(pairs["group"] == pairs["peer_group"], SAME, OTHER)
    per_run = pairs.groupby([*keys, "round", "pairs"], dropna=False)["value"].mean()
    per_run = per_run.reset_index()
    return (per_run.groupby(["method", "partition", "round", "pairs"], sort=True)["value"]
            .agg(mean="mean", runs="count").reset_index())


def plot_distances(agg: pd.DataFrame, pdf: PathLike, png: PathLike, *,
                   methods_order: Sequence[str] | None = None,
                   labels: Mapping[str, str] | None = None) -> pd.DataFrame:
    """One panel per (method, partition): mean x_ij against round, same vs other pairs.

    ``methods_order`` may list methods without distances (an experiment's whole
    method list); they are left out. The y axis is logarithmic; rounds at distance 0
    (e.g. round 1 after a shared start) are left out of the lines. Returns the curves
    (:func:`distance_curves`).
    """
    what = "plot_distances"
    curves = distance_curves(agg)
    # the experiment's method order, keeping those that log distances
    present = set(curves["method"])
    order = [m for m in methods_order if m in present] if methods_order else None
    methods = order_values(curves["method"], order, f"{what} methods")
    partitions = order_values(curves["partition"], None, f"{what} partitions")
    shown = display_labels(partitions, labels, f"{what} labels")
    panels = [(m, p) for m in methods for p in partitions
              if ((curves["method"] == m) & (curves["partition"] == p)).any()]
    colours = dict(zip((SAME, OTHER), sns.color_palette(METHOD_PALETTE, 2), strict=True))
    with matplotlib.rc_context(STYLE):
        fig, axes, cols = facets(len(panels), 3.4, 2.6, sharey=True)
        for k, (ax, (method, partition)) in enumerate(zip(axes, panels, strict=True)):
            cur = curves[(curves["method"] == method) & (curves["partition"] == partition)]
            for kind, colour in colours.items():
                line = cur[(cur["pairs"] == kind) & (cur["mean"] > 0)]  # log axis
                if not line.empty:
                    ax.plot(line["round"], line["mean"], color=colour, lw=1.4)
            ax.set_yscale("log")
            ax.set_title(wrap(f"{method_name(method)}: {shown[partition]}"))
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            if k % cols == 0:
                ax.set_ylabel("‖w_i − w_j‖² / P")
            ax.set_xlabel("round")
    handles = [Line2D([], [], color=colour, lw=1.6) for colour in colours.values()]
    finish(fig, pdf, png, [LegendSpec(handles, list(colours), "client pairs: mean over "
                                      "pairs, then over runs", most_cols=2)])
    return curves
