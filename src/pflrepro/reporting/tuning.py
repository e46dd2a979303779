"""The tuning figure: validation score against the value tried, one line per partition.

One panel per tuned key (x: its values, log-scaled where the grid is logarithmic;
y: the mean validation accuracy over the tuning seeds, in %, the other keys at their
selected values when several are tuned); the selected value is ringed. Lines are
named by the partitions' labels (``labels``: id -> label; with the split where a
partition has several) in one legend below the panels, in the style every figure
shares (:mod:`pflrepro.reporting.figures.common`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

    from pflrepro.tuning import Grid


def line_labels(table: pd.DataFrame,
                labels: Mapping[str, str] | None) -> dict[tuple[str, int], str]:
    """Each (partition, split) line's legend label.

    The partition's label (``labels``: id -> label; unlabelled ids show as themselves),
    then the split where its partition has several.
    """
    shown = dict(labels or {})
    pairs = sorted({(str(p), int(s)) for p, s in zip(table["partition"], table["split"],
                                                     strict=True)})
    splits: dict[str, int] = {}
    for partition, _ in pairs:
        splits[partition] = splits.get(partition, 0) + 1
    return {(p, s): shown.get(p, p) + (f", split {s}" if splits[p] > 1 else "")
            for p, s in pairs}


def plot_tuning(table: pd.DataFrame, grids: Sequence[Grid], pdf: str, png: str,
                title: str = "", labels: Mapping[str, str] | None = None) -> None:
    """Draw :func:`pflrepro.tuning.tuning_table` ``table`` to ``pdf`` and ``png``."""
    import matplotlib
    from matplotlib.lines import Line2D

    from pflrepro.reporting.figures.common import STYLE, LegendSpec, finish, new_figure
    from pflrepro.reporting.method_styles import method_styles

    names = line_labels(table, labels)
    styles = method_styles([f"{p}\0{s}" for p, s in names])
    style_of = {key: styles[f"{key[0]}\0{key[1]}"] for key in names}
    with matplotlib.rc_context(STYLE):
        fig = new_figure(3.0 * len(grids), 2.4)
        axes = fig.subplots(1, len(grids), squeeze=False, sharey=True)[0]
        for k, (ax, grid) in enumerate(zip(axes, grids, strict=True)):
            col = f"value_{grid.key}"
            others = [f"value_{g.key}" for g in grids if g.key != grid.key]
            for (partition, split), sub in table.groupby(["partition", "split"], sort=True):
                style = style_of[(str(partition), int(split))]
                chosen = sub[sub["selected"]]
                if others and not chosen.empty:  # the other keys at their selected values
                    sub = sub[(sub[others] == chosen[others].iloc[0]).all(axis=1)]
                sub = sub.sort_values(col)
                ax.plot(sub[col], 100 * sub["score"], color=style.colour,
                        linestyle=style.linestyle, marker=style.marker, ms=3.5, lw=1.4)
                picked = sub[sub["selected"]]
                ax.plot(picked[col], 100 * picked["score"], "o", ms=10, mfc="none", mew=1.2,
                        color=style.colour)
            if grid.log:
                ax.set_xscale("log")
            ax.set_xlabel(grid.key)
            if k == 0:
                ax.set_ylabel("validation accuracy (%)")
        if title:
            fig.suptitle(title)
    handles = [Line2D([], [], **style_of[key].legend_line()) for key in names]
    handles.append(Line2D([], [], marker="o", ms=8, mfc="none", mew=1.2, color="0.3",
                          linestyle="none"))
    finish(fig, pdf, png, [LegendSpec(handles, [*names.values(), "selected value"],
                                      "partition (mean over tuning seeds)")])
