"""FedMix's global q(z | y): which experts each class is assigned to, per partition.

FedMix (:mod:`pflrepro.algorithms.fedmix`) logs q(z = k | y = c) every round
(``expert_posterior`` rows: the ``client`` column holds the class c, ``peer`` the
expert k). The figure is a classes × experts heatmap of the final round of the run with
the lowest split seed (then train seed) of each partition: a row concentrated on one
expert means that class is routed to it; uniform rows, no specialisation by class.
"""

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

from pflrepro.reporting.figures.common import (
    STYLE,
    PathLike,
    finish,
    first_run_rows,
    grid,
    new_figure,
    wrap,
)
from pflrepro.config.figure_kinds import FigureKind
from pflrepro.reporting.accuracy import check_aggregate
from pflrepro.reporting.ordering import display_labels, order_values
from pflrepro.reporting.names import method_name
from pflrepro.store.results import EXPERT_POSTERIOR

KIND = FigureKind(
    name="posterior", file="posterior-{method}", draw="plot_expert_posterior",
    caption="FedMix's global q(z|y) of {method}: each label's weights on the experts.",
    label="q(z|y): {method}", input="method", options=("method",), records=EXPERT_POSTERIOR,
    entry="weights")

#: Classes up to which every row is labelled and annotated with its values.
ANNOTATE_CLASSES = 12


@dataclass(frozen=True)
class PosteriorPanel:
    """The data of one heatmap of :func:`plot_expert_posterior`."""

    partition: str
    #: Config of the run shown (the lowest split seed, then train seed).
    run: dict[str, Any]
    #: The run's last round with q.
    round: int
    #: q(z = k | y = c): index = classes, columns = experts, both ascending.
    matrix: pd.DataFrame


def posterior_panels(agg: pd.DataFrame, method: str = "fedmix",
                     partitions_order: Sequence[str] | None = None) -> list[PosteriorPanel]:
    """The final-round q(z | y) of the first run of each partition.

    Raises ``ValueError`` naming ``method`` when the aggregate has no q rows for it,
    when a (method, partition) mixes settings, or when a (class, expert) is given twice
    at the final round.
    """
    what = "plot_expert_posterior"
    check_aggregate(agg, (), what)
    rows = agg[(agg["method"] == method) & (agg["metric"] == EXPERT_POSTERIOR)
               & (agg["client"] >= 0) & (agg["peer"] >= 0)]
    if rows.empty:
        having = sorted(agg.loc[agg["metric"] == EXPERT_POSTERIOR, "method"]
                        .dropna().unique().tolist())
        raise ValueError(f"{what}: no {EXPERT_POSTERIOR!r} rows for method {method!r} "
                         f"(methods with {EXPERT_POSTERIOR!r} rows: {having})")
    panels = []
    for partition in order_values(rows["partition"], partitions_order, f"{what} partitions"):
        run, mine = first_run_rows(rows[rows["partition"] == partition], what, method,
                                   partition)
        last = int(mine["round"].max())
        final = mine[mine["round"] == last]
        if final.duplicated(["client", "peer"]).any():
            raise ValueError(f"{what}: a (class, expert) {EXPERT_POSTERIOR!r} is given twice "
                             f"at round {last} of method {method!r}, partition {partition!r}")
        matrix = final.pivot(index="client", columns="peer", values="value").sort_index()
        matrix = matrix.reindex(columns=sorted(matrix.columns))
        matrix.index.name, matrix.columns.name = "class", "expert"
        panels.append(PosteriorPanel(partition=partition, run=run, round=last, matrix=matrix))
    return panels


def plot_expert_posterior(agg: pd.DataFrame, pdf: PathLike, png: PathLike,
                          method: str = "fedmix", *,
                          partitions_order: Sequence[str] | None = None,
                          labels: Mapping[str, str] | None = None) -> None:
    """Heatmaps of the final-round q(z = k | y = c), classes × experts, one per partition.

    Colours on a fixed [0, 1] scale; with at most :data:`ANNOTATE_CLASSES` classes every
    cell carries its value. ``labels`` maps partition ids to display labels.
    """
    panels = posterior_panels(agg, method, partitions_order)
    shown = display_labels([p.partition for p in panels], labels, "plot_expert_posterior labels")
    cmap = sns.color_palette("rocket_r", as_cmap=True)
    with matplotlib.rc_context(STYLE):
        n_rows, n_cols = grid(len(panels))
        classes = max(p.matrix.shape[0] for p in panels)
        experts = max(p.matrix.shape[1] for p in panels)
        width = float(np.clip(1.6 + 0.5 * experts, 3.0, 6.0))
        height = float(np.clip(1.2 + 0.22 * classes, 3.0, 12.0))
        fig = new_figure(width * n_cols + 0.8, height * n_rows)
        outer = fig.add_gridspec(n_rows, n_cols + 1, width_ratios=[1.0] * n_cols + [0.06])
        for k, panel in enumerate(panels):
            ax = fig.add_subplot(outer[k // n_cols, k % n_cols])
            n_c = panel.matrix.shape[0]
            sns.heatmap(panel.matrix.to_numpy(dtype=float), ax=ax, cmap=cmap, vmin=0.0,
                        vmax=1.0, cbar=False, annot=n_c <= ANNOTATE_CLASSES, fmt=".2f",
                        annot_kws={"fontsize": 6.5}, linewidths=0.5 if n_c <= 30 else 0.0,
                        linecolor="white",
                        xticklabels=[str(c) for c in panel.matrix.columns],
                        yticklabels=[str(c) for c in panel.matrix.index]
                        if n_c <= 30 else max(1, n_c // 10))
            ax.tick_params(axis="both", length=0)
            ax.tick_params(axis="y", rotation=0)
            ax.set_xlabel("expert $k$")
            ax.set_ylabel("class $c$")
            ax.set_title(f"{wrap(shown[panel.partition])}\nsplit seed "
                         f"{panel.run['split_seed']}, train seed {panel.run['train_seed']}, "
                         f"round {panel.round}")
        fig.colorbar(ScalarMappable(norm=Normalize(vmin=0.0, vmax=1.0), cmap=cmap),
                     cax=fig.add_subplot(outer[:, -1]),
                     label=f"$q(z = k \\mid y = c)$ ({method_name(method)})")
    finish(fig, pdf, png)
