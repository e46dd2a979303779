"""Each client's model size against its data size (PerFed-CKT Fig. 2a).

With model heterogeneity (``training.architectures``) a client's architecture is drawn
with a larger model the more likely the more data it holds. One point per client of
one run (the first split and training seed of the first method that records
architectures), coloured by architecture; one panel per partition. Data size is the
client's training-set size (``n_train``), model size its scalar count
(``model_size``), both logged at round 0.
"""

from __future__ import annotations

from collections.abc import Mapping

import matplotlib
import pandas as pd
import seaborn as sns
from matplotlib.lines import Line2D

from pflrepro.reporting.figures.common import (
    STYLE,
    LegendSpec,
    PathLike,
    facets,
    finish,
    wrap,
)
from pflrepro.config.figure_kinds import FigureKind
from pflrepro.reporting.ordering import display_labels, order_values
from pflrepro.store.results import ARCHITECTURE, MODEL_SIZE, N_TRAIN

KIND = FigureKind(
    name="architectures", file="architectures", draw="plot_architectures",
    caption="Which model architecture each client runs, against its data size.",
    label="architectures", options=("names",), heterogeneous=True)


def client_architectures(agg: pd.DataFrame) -> pd.DataFrame:
    """Per partition, one run's clients: ``client``, ``n_train``, ``model_size``, ``architecture``.

    The run is the first (split seed, training seed, method) of the partition that
    logged architectures. Raises ``ValueError`` when no run did (a homogeneous
    experiment).
    """
    rows = agg[(agg["round"] == 0) & agg["metric"].isin([ARCHITECTURE, MODEL_SIZE, N_TRAIN])]
    logged = rows[rows["metric"] == ARCHITECTURE]
    if logged.empty:
        raise ValueError("plot_architectures: no run logged per-client architectures; the "
                         "figure needs training.architectures with two or more models")
    out = []
    for partition, runs in logged.groupby("partition", sort=False, observed=True):
        first = runs.sort_values(["split_seed", "train_seed", "method"]).iloc[0]
        run = rows[(rows["partition"] == partition) & (rows["method"] == first["method"])
                   & (rows["split_seed"] == first["split_seed"])
                   & (rows["train_seed"] == first["train_seed"])]
        wide = run.pivot_table(index="client", columns="metric", values="value",
                               observed=True).reset_index()
        wide["partition"] = partition
        wide["method"] = first["method"]
        out.append(wide)
    table = pd.concat(out, ignore_index=True)
    table[ARCHITECTURE] = table[ARCHITECTURE].astype(int)
    return table


def plot_architectures(agg: pd.DataFrame, pdf: PathLike, png: PathLike, *,
                       names: Mapping[int, str] | None = None,
                       labels: Mapping[str, str] | None = None) -> None:
    """Model size (log) against data size, a point per client, coloured by architecture.

    ``names``: a display name per architecture index (default ``architecture k``).
    """
    table = client_architectures(agg)
    partitions = order_values(table["partition"], None, "plot_architectures partitions")
    shown = display_labels(partitions, labels, "plot_architectures labels")
    archs = sorted(int(a) for a in table[ARCHITECTURE].unique())
    colours = dict(zip(archs, sns.color_palette("viridis", len(archs)), strict=True))
    named = {a: (names or {}).get(a, f"architecture {a}") for a in archs}
    with matplotlib.rc_context(STYLE):
        fig, axes, cols = facets(len(partitions), 3.4, 2.8)
        for k, (ax, partition) in enumerate(zip(axes, partitions, strict=True)):
            cur = table[table["partition"] == partition]
            for arch in archs:
                pts = cur[cur[ARCHITECTURE] == arch]
                ax.scatter(pts[N_TRAIN], pts[MODEL_SIZE], color=colours[arch], s=18,
                           zorder=3)
            ax.set_yscale("log")
            ax.set_title(wrap(shown[partition]))
            ax.set_xlabel("client's training samples")
            if k % cols == 0:
                ax.set_ylabel("model size (scalars)")
            ax.grid(True, which="major", alpha=0.3)
    handles = [Line2D([], [], color=colours[a], marker="o", lw=0) for a in archs]
    finish(fig, pdf, png, [LegendSpec(handles, [named[a] for a in archs], "architecture")])
