"""The short sentence a results table says about a tuned method, pointing at its tuning table.

The full account of a tuning (every value tried, its score, the criterion, budget and
held-out share) is the tuning table ``results/tuning/<experiment>/<method>.md``; every
table built from the final runs says only which values were selected, per partition,
and where that table is.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pflrepro.reporting.names import method_name
from pflrepro.tuning import selected_params
from pflrepro.tuning.grid import Grid, edge

if TYPE_CHECKING:
    import pandas as pd

#: Where a tuning table is (as ``pflrepro.pipeline.workflow.TUNE_TABLE`` writes it, Markdown).
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
    edge of its grid says so (:func:`pflrepro.tuning.grid.edge`): the best value may lie
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


def table_notes(spec: Sequence[Mapping[str, Any]], runs: pd.DataFrame,
                labels: Mapping[str, str] | None = None,
                experiment_labels: Mapping[str, str] | None = None) -> list[str]:
    """The notes a results table carries for its tuned methods, one per (experiment, method).

    ``spec`` (:func:`pflrepro.pipeline.workflow.table_tuning_json`): per tuned method of an
    experiment of the table, ``experiment``, ``method``, ``algorithm``, ``fixed``,
    ``clients`` (per partition), ``grids``, ``log``, ``criterion``, ``rounds``, ``seeds``,
    ``fraction`` and ``selection`` (the selection file's content). ``runs``: the table's
    aggregated runs; every run of a tuned method must carry the selected values in its
    ``params`` column (else ``ValueError``: the table would describe other runs).
    Entries whose method has no run in ``runs`` are skipped.
    """
    exp_shown = {e["experiment"]: e["experiment"] for e in spec} | dict(experiment_labels or {})
    several = len({e["experiment"] for e in spec}) > 1
    notes = []
    for entry in spec:
        mine = runs[(runs["experiment"] == entry["experiment"])
                    & (runs["method"] == entry["method"])]
        if mine.empty:
            continue
        grids = [Grid(k, tuple(v), log=k in entry.get("log", []))
                 for k, v in entry["grids"].items()]
        selection = entry["selection"]
        chosen = {(p, int(s)): dict(v["point"]) for p, by_split in selection.items()
                  for s, v in by_split.items()}
        for (partition, split), sub in mine.groupby(["partition", "split_seed"]):
            want = selected_params(selection, str(partition), int(split))
            for text in sub["params"].unique():
                got = json.loads(text)
                wrong = sorted(k for k, v in want.items()
                               if k not in got or not math.isclose(float(got[k]), float(v),
                                                                   rel_tol=1e-9))
                if wrong:
                    raise ValueError(
                        f"{entry['experiment']}/{entry['method']}, {partition} split {split}: "
                        f"the runs' {wrong} are not the tuning selection's {want}")
        notes.append(short_note(entry["experiment"], entry["method"], grids, chosen, labels,
                                f" ({exp_shown.get(entry['experiment'])})" if several else "",
                                shared=bool(entry.get("training"))))
    return notes


def notes_for(tuning: str | None, runs: pd.DataFrame | None,
              labels: Mapping[str, str] | None = None,
              experiment_labels: Mapping[str, str] | None = None) -> list[str]:
    """:func:`table_notes` from a job's ``--tuning`` JSON; ``[]`` without one or runs.

    What every writer of a table built from runs (results, paper-vs-ours,
    communication, cost) says about the tuned values those runs used.
    """
    if not tuning or runs is None:
        return []
    return table_notes(json.loads(tuning), runs, labels, experiment_labels)
