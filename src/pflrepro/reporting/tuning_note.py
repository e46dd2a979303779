"""The short sentence a results table says about a tuned method, pointing at its tuning table.

The full account of a tuning (every value tried, its score, the criterion, budget and
held-out share) is the tuning table ``results/tuning/<experiment>/<method>.md``; every
table built from the final runs says only which values were selected, per partition,
and where that table is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from pflrepro.reporting.names import method_name
from pflrepro.tuning_grid import edge

if TYPE_CHECKING:
    from pflrepro.tuning_grid import Grid

#: Where a tuning table is (as ``pflrepro.workflow.TUNE_TABLE`` writes it, Markdown).
TUNING_TABLE = "results/tuning/{experiment}/{method}.md"


def short_note(experiment: str, method: str, grids: Sequence[Grid],
               chosen: Mapping[tuple[str, int], Mapping[str, float]],
               labels: Mapping[str, str] | None = None, where: str = "",
               shared: bool = False) -> str:
    """The sentence: ``FedAMP: chosen on validation, practical: sigma=0.001, ... (...md).``.

    ``chosen``: (partition id, split) -> selected grid point; ``labels``: partition id ->
    shown label; the split is named where a partition's splits took different values
    (one value for all of them, e.g. a selection pooled over the splits, is said once). A
    value at an
    edge of its grid says so (:func:`pflrepro.tuning_grid.edge`): the best value may lie
    outside the grid.
    ``where``: text after the method's name (the experiment, in a table over several).
    ``shared``: the values are training settings every method of the experiment uses,
    selected by ``method``'s validation score.
    """
    shown = dict(labels or {})
    points: dict[str, list[tuple[int, Mapping[str, float]]]] = {}
    for (partition, split), point in sorted(chosen.items()):
        points.setdefault(partition, []).append((split, point))
    picked = []
    for partition, rows in points.items():
        same = all(dict(point) == dict(rows[0][1]) for _, point in rows)
        for split, point in rows[:1] if same else rows:
            name = shown.get(partition, partition)
            if not same:
                name += f" split {split}"
            values = ", ".join(f"{g.key}={point[g.key]:.3g}{edge(g, point[g.key])}"
                               for g in grids)
            picked.append(f"{name}: {values}")
    table = TUNING_TABLE.format(experiment=experiment, method=method)
    subject = (f"Every method's training settings (by {method_name(method)}'s score)"
               if shared else method_name(method))
    return (f"{subject}{where}: chosen on validation, " + "; ".join(picked)
            + f" (every value tried: {table}).")
