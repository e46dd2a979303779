"""Which paper-vs-ours cells are in the paper's setting, and which rows are equal.

Helpers of :mod:`pflrepro.reporting.paper`: per-run values of a cell by seed pair
(:func:`per_run`), why our runs are not in a cell's setting (:func:`other_setting`) and
the paper's methods whose per-run values are equal everywhere (:func:`equal_groups`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

    from pflrepro.reporting.paper_cell import PaperCell


def per_run(agg: pd.DataFrame, metric: str) -> dict[tuple[int, int], float]:
    """Per-run values of ``metric`` in ``agg`` (one cell's runs) by seed pair, unscaled."""
    if metric == "total_communication":
        from pflrepro.reporting.communication import per_run_traffic

        runs, column = per_run_traffic(agg), "total"
    else:
        from pflrepro.reporting.accuracy import run_accuracies

        table_metric = "weighted_final" if metric == "weighted_final" else "mean_bmta"
        runs, column = run_accuracies(agg, table_metric), metric
    return {(int(s), int(t)): float(v) for s, t, v in
            zip(runs["split_seed"], runs["train_seed"], runs[column], strict=True)}


def _words(text: str) -> set[str]:
    """The words of a text, lower case, without ``-`` and ``_`` (``CIFAR-10``: ``cifar10``)."""
    return {w.replace("-", "").replace("_", "") for w in re.findall(r"[\w-]+", text.lower())}


def other_setting(cell: PaperCell, scale: str, datasets: Iterable[str]) -> str:
    """Why our runs are not in the paper's setting of ``cell`` (``""``: they are).

    Not at the paper scale: a design analogue (other data set, model and rounds). At the
    paper scale: a data set of the runs that the cell's ``setting`` does not name.
    """
    if scale != "paper":
        return f"a {scale}-scale design analogue: other data set, model and rounds"
    named = _words(cell.setting)
    other = sorted(d for d in set(datasets) if _words(d) and not _words(d) <= named)
    if other:
        return f"our runs are on {', '.join(other)}, not the paper's {cell.setting.split(',')[0]}"
    return ""


def equal_groups(frame: pd.DataFrame, runs: Sequence[Mapping[tuple[int, int], float]],
                ) -> list[tuple[str, list[str]]]:
    """Per quantity, groups of the paper's methods equal in every run of every setting.

    Equal to full precision; ``runs``: the per-run values of each row of ``frame``.
    """
    from pflrepro.reporting.render import equal_rows

    out = []
    for quantity in dict.fromkeys(frame["quantity"]):
        at = [i for i, q in enumerate(frame["quantity"]) if q == quantity]
        settings = list(dict.fromkeys(frame["setting"].iloc[i] for i in at))
        methods = list(dict.fromkeys(frame["paper_method"].iloc[i] for i in at))
        cells = {(frame["paper_method"].iloc[i], frame["setting"].iloc[i]): runs[i] for i in at}
        rows = [[sorted(cells.get((m, s), {}).items()) for s in settings] for m in methods]
        out += [(quantity, group) for group in
                equal_rows(methods, rows, empty=lambda row: not any(row))]
    return out
