"""The tuning table and figure: every value tried, its validation score, the selection.

The table (:func:`tuning_table`, written by :func:`write_outputs` as CSV and Markdown)
has one row per grid point, partition and split: the mean validation score over the
tuning seeds, the round it was reached, the budget's last round, the ξ contrast and
whether the point was selected. A selected point carries a ``warning`` where the
selection may not be the optimum the grid was meant to find: a value at the grid's
lowest or highest value (:func:`pflrepro.tuning.edge`), or, under ``best_mean``, a best
validation round that is the budget's last (the curve was still rising when the budget
ended). The warnings are listed under the Markdown table and by ``pflrepro status``.

The figure: one panel per tuned key (x: its values, log-scaled where the grid is
logarithmic; y: the mean validation accuracy over the tuning seeds, in %, the other
keys at their selected values when several are tuned); the selected value is ringed.
Lines are named by the partitions' labels (``labels``: id -> label; with the split where
a partition has several) in one legend below the panels, in the style every figure
shares (:mod:`pflrepro.reporting.figures.common`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

    from pflrepro.tuning.grid import Grid

#: The warning of a selected point whose best validation round is the budget's last.
LAST_ROUND = "best validation round is the budget's last (the score may still rise)"


def _warning(grids: Sequence[Grid], row: Mapping[str, object], criterion: str) -> str:
    """The selected row's warnings, ``"; "``-joined (``""``: none)."""
    from pflrepro.tuning.grid import edge

    values = {g.key: float(row[f"value_{g.key}"]) for g in grids}
    out = [f"{g.key} = {values[g.key]:.3g}: {edge(g, values[g.key]).strip(' ()')}"
           for g in grids if edge(g, values[g.key])]
    if criterion == "best_mean" and row["best_round"] >= row["last_round"]:
        out.append(LAST_ROUND)
    return "; ".join(out)


def tuning_table(scores: pd.DataFrame, grids: Sequence[Grid],
                 chosen: Mapping[tuple[str, int], Mapping[str, float]],
                 criterion: str = "best_mean") -> pd.DataFrame:
    """Every value tried: mean score (and ξ contrast) over seeds, which was chosen, warnings.

    ``scores``: :func:`pflrepro.tuning.score_trials`' rows.
    """
    from pflrepro.tuning.grid import point_id

    keys = [f"value_{g.key}" for g in grids]
    table = (scores.groupby(["partition", "split", "point", *keys], sort=False)
             .agg(score=("score", "mean"), seeds=("seed", "nunique"),
                  best_round=("round", "mean"), last_round=("last_round", "max"),
                  xi_within=("xi_within", "mean"), xi_across=("xi_across", "mean"))
             .reset_index())
    chosen_ids = {(p, s): point_id(pt) for (p, s), pt in chosen.items()}
    table["selected"] = [chosen_ids.get((p, int(s))) == pid for p, s, pid in
                         zip(table["partition"], table["split"], table["point"], strict=True)]
    table["warning"] = [_warning(grids, row, criterion) if row["selected"] else ""
                        for row in table.to_dict("records")]
    return table


def _number(value: float, digits: int) -> str:
    """``value`` with ``digits`` decimals; an integer without; ``–`` for NaN (none)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if digits == 0 or float(value).is_integer():
        return str(int(value)) if float(value).is_integer() else f"{value:.1f}"
    return f"{value:.{digits}f}"


def write_outputs(table: pd.DataFrame, note_text: str, md: str, csv: str,
                  title: str) -> None:
    """The tuning table as CSV and Markdown (with the note and warnings), atomically.

    Markdown: scores in %, rounds as integers (a mean over seeds that is not whole
    with one decimal), ξ with 4 decimals and ``–`` where a run has no pair of that kind
    (e.g. no two clients of different groups), the ξ columns left out where no run
    logs ξ; the selected points' warnings listed under the table.
    """
    from pflrepro.store.io import atomic_path

    with atomic_path(csv) as tmp:
        table.to_csv(tmp, index=False)
    shown = table.drop(columns="warning").copy()
    shown["score"] = (100 * shown["score"]).map(lambda v: f"{v:.2f}")
    for col in ("best_round", "last_round"):
        shown[col] = shown[col].map(lambda v: _number(v, 0))
    for col in ("xi_within", "xi_across"):
        if shown[col].isna().all():
            shown = shown.drop(columns=col)
        else:
            shown[col] = shown[col].map(lambda v: _number(v, 4))
    shown = shown.rename(columns={"score": "validation acc (%)"})
    header = "| " + " | ".join(shown.columns) + " |"
    lines = [f"# {title}", "", header, "|" + "---|" * len(shown.columns)]
    lines += ["| " + " | ".join(str(v) for v in row) + " |"
              for row in shown.itertuples(index=False)]
    warned = table[table["warning"].fillna("") != ""]
    if not warned.empty:
        lines += ["", "Warnings (the selection may not be the optimum):"]
        lines += [f"- {r.partition} split {r.split}: {r.warning}"
                  for r in warned.itertuples(index=False)]
    with atomic_path(md) as tmp, open(tmp, "w") as fh:
        fh.write("\n".join(lines) + f"\n\n{note_text}\n")


def _set_scale(ax: object, grid: Grid) -> None:
    """The x scale of ``grid``'s panel.

    Log for a log grid or positive values over two decades or more; with a 0 among
    values over such a span, symlog (linear below the smallest positive value).
    """
    positive = [v for v in grid.values if v > 0]
    wide = len(positive) >= 2 and max(positive) >= 100 * min(positive)
    if grid.log or (wide and len(positive) == len(grid.values)):
        ax.set_xscale("log")
    elif wide and min(grid.values) == 0:
        ax.set_xscale("symlog", linthresh=min(positive))


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
            _set_scale(ax, grid)
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
