"""The tuning figure: validation score against the value tried, one line per partition.

One panel per tuned key (x: its values, log-scaled where the grid is logarithmic;
y: the mean validation accuracy over the tuning seeds, in %, the other keys at their
selected values when several are tuned); the selected value is ringed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

    from pflrepro.tuning import Grid


def plot_tuning(table: pd.DataFrame, grids: Sequence[Grid], pdf: str, png: str,
                title: str = "") -> None:
    """Draw :func:`pflrepro.tuning.tuning_table` ``table`` to ``pdf`` and ``png``."""
    from pflrepro.reporting.figures.common import finish, new_figure

    fig = new_figure(3.2 * len(grids), 2.6)
    axes = fig.subplots(1, len(grids), squeeze=False)[0]
    for ax, grid in zip(axes, grids, strict=True):
        col = f"value_{grid.key}"
        others = [f"value_{g.key}" for g in grids if g.key != grid.key]
        for (partition, split), sub in table.groupby(["partition", "split"], sort=True):
            chosen = sub[sub["selected"]]
            if others and not chosen.empty:  # the other keys at their selected values
                keep = (sub[others] == chosen[others].iloc[0]).all(axis=1)
                sub = sub[keep]
            sub = sub.sort_values(col)
            label = f"{partition} (split {split})"
            line, = ax.plot(sub[col], 100 * sub["score"], marker="o", ms=3, label=label)
            picked = sub[sub["selected"]]
            ax.plot(picked[col], 100 * picked["score"], "o", ms=9, mfc="none",
                    color=line.get_color())
        if grid.log:
            ax.set_xscale("log")
        ax.set_xlabel(grid.key)
        ax.set_ylabel("validation accuracy (%)")
        ax.legend(fontsize="x-small")
    if title:
        fig.suptitle(title, fontsize="small")
    finish(fig, pdf, png)
