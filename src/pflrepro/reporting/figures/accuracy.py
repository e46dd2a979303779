"""Weighted test accuracy against round, one panel per partition, one line per method.

:func:`method_lines` draws the panels; :mod:`.client_accuracy` draws one client's
accuracy with it too. Each method has its own colour, line style and staggered
markers (:mod:`pflrepro.reporting.method_styles`), so curves drawn on top of each
other stay apart, and the legend names the methods whose curves coincide; methods
show by their papers' names (:mod:`pflrepro.reporting.names`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from pflrepro.reporting.figures.common import (
    STYLE,
    LegendSpec,
    PathLike,
    facets,
    finish,
    wrap,
)
from pflrepro.config.figure_kinds import FigureKind
from pflrepro.reporting.accuracy import RUN_KEYS, check_cells, diverged_runs, weighted_accuracy_per_round
from pflrepro.reporting.method_styles import (
    coincide_note,
    coinciding,
    marker_step,
    method_styles,
)
from pflrepro.reporting.names import method_names
from pflrepro.reporting.ordering import display_labels, order_values

KIND = FigureKind(
    name="accuracy", file="accuracy", draw="plot_accuracy_vs_round",
    caption="Test accuracy (weighted by client test-set size) per round, mean over runs, "
            "one line per method.",
    label="accuracy vs round", options=("methods",))


def mean_band_stats(per_run_round: pd.DataFrame, value: str) -> pd.DataFrame:
    """Mean, std (``ddof=1``) and count of ``value`` × 100 per (partition, method, round)."""
    percent = per_run_round.assign(percent=per_run_round[value] * 100.0)
    return (percent.groupby(["partition", "method", "round"], sort=True)["percent"]
            .agg(mean="mean", std=lambda s: s.std(ddof=1), n="count").reset_index())


def span(counts: Sequence[int]) -> str:
    """Describe run counts: ``n=3``, or ``n=2–3`` when panels differ."""
    lo, hi = min(counts), max(counts)
    return f"n={lo}" if lo == hi else f"n={lo}–{hi}"


def method_lines(stats: pd.DataFrame, runs: pd.Series, methods: Sequence[str],
                 partitions: Sequence[str], titles: Mapping[str, str], ylabel: str,
                 pdf: PathLike, png: PathLike,
                 diverged: Mapping[str, int] | None = None) -> None:
    """Draw and save one panel per partition, one mean line (± 1 sd band) per method.

    ``stats`` holds :func:`mean_band_stats` rows, ``runs`` the number of runs per
    (method, partition) and ``titles`` each partition's panel title; ``diverged``
    (method -> runs that diverged) marks those methods in the legend, whose title
    names the methods whose curves coincide (:func:`.method_styles.coinciding`).
    """
    styles = method_styles(methods)
    shown = method_names(methods)
    with matplotlib.rc_context(STYLE):
        fig, axes, cols = facets(len(partitions), 3.4, 2.6, sharex=False, sharey=True)
        for k, (ax, partition) in enumerate(zip(axes, partitions, strict=True)):
            for method in methods:
                cur = stats[(stats["partition"] == partition) & (stats["method"] == method)]
                if cur.empty:
                    continue
                x = cur["round"].to_numpy()
                mean = cur["mean"].to_numpy()
                std = cur["std"].to_numpy()
                ax.plot(x, mean, lw=1.4,
                        **styles[method].line(len(x), marker_step(len(methods), len(x))))
                band = ~np.isnan(std)
                if band.any():
                    ax.fill_between(x[band], (mean - std)[band], (mean + std)[band],
                                    color=styles[method].colour, alpha=0.15, lw=0)
            ax.set_title(titles[partition])
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            if k % cols == 0:
                ax.set_ylabel(ylabel)
            if k + cols >= len(partitions):  # no panel below it
                ax.set_xlabel("round")
    handles = [Line2D([], [], **styles[m].legend_line()) for m in methods]
    diverged = diverged or {}
    names = [f"{shown[m]} ({span(runs.loc[m].tolist())}"
             + (f", {diverged[m]} diverged" if diverged.get(m) else "") + ")" for m in methods]
    title = "method (n runs per panel): mean ± 1 sd over runs"
    note = coincide_note(coinciding(stats, methods), shown)
    finish(fig, pdf, png, [LegendSpec(handles, names, f"{title}\n{note}" if note else title)])


def plot_accuracy_vs_round(agg: pd.DataFrame, pdf: PathLike, png: PathLike, *,
                           methods_order: Sequence[str] | None = None,
                           partitions_order: Sequence[str] | None = None,
                           labels: Mapping[str, str] | None = None) -> None:
    """Plot weighted test accuracy (%) against round, one panel per partition.

    One line per method: the mean over its runs (split seeds × train seeds) of the
    weighted accuracy (:func:`~pflrepro.reporting.accuracy.weighted_accuracy_per_round`),
    with a band of ±1 standard deviation (``ddof=1``) where a method has two or more
    runs at a round. Panels are titled by ``labels`` (partition id -> display label;
    unlabelled ids show as themselves). Runs that diverged end where they stopped and
    are counted in the legend (``k diverged``). Raises ``ValueError`` when accuracy or
    size metrics are missing, a (method, partition) mixes settings, or two panels would
    share a label.
    """
    what = "plot_accuracy_vs_round"
    per_round = weighted_accuracy_per_round(agg)
    last = per_round.groupby(list(RUN_KEYS), dropna=False, sort=False).tail(1)
    last = last.assign(diverged=diverged_runs(agg, last))
    check_cells(last, what)
    stats = mean_band_stats(per_round, "weighted_accuracy")
    methods = order_values(stats["method"], methods_order, f"{what} methods")
    partitions = order_values(stats["partition"], partitions_order, f"{what} partitions")
    shown = display_labels(partitions, labels, f"{what} labels")
    runs = per_round.drop_duplicates(list(RUN_KEYS)).groupby(["method", "partition"]).size()
    diverged = last[last["diverged"]].groupby("method").size()
    method_lines(stats, runs, methods, partitions, {p: wrap(shown[p]) for p in partitions},
                 "weighted test accuracy (%)", pdf, png,
                 diverged={str(m): int(n) for m, n in diverged.items()})
