"""What the reporting commands read from their options: aggregates and the labels JSON.

The commands that write a table or figure from runs (``table``, ``communication``,
``cost``, ``plot``, ``claims``) read one or more aggregates (:func:`read_aggregates`)
and the workflow's ``--labels`` JSON (:func:`labels_of`), and run with its method labels
and group names in force (:func:`with_method_labels`).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from typing import Any

#: ``--tuning`` of the commands that write a table from runs (table, communication, cost,
#: paper-vs-ours).
TUNING_HELP = ("JSON: the tuned methods' grids and selections "
               "(pflrepro.pipeline.workflow.table_tuning_json); the note says how each value was "
               "chosen, and the runs must carry the selected values")


def read_aggregates(paths: Sequence[str]) -> Any:
    """Concatenate one or more aggregated Parquet files (each checked against its digest)."""
    import pandas as pd

    from pflrepro.store.results import read_table

    frames = [read_table(p) for p in paths]
    if not frames:
        raise ValueError("no aggregate given")
    return pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]


def labels_of(text: str | None) -> tuple[dict[str, str], dict[str, str]]:
    """(partition labels, experiment labels) from the workflow's ``--labels`` JSON."""
    raw = labels_json(text)
    return dict(raw.get("partitions", {})), dict(raw.get("experiments", {}))


def labels_json(text: str | None) -> dict[str, dict[str, str]]:
    """The workflow's ``--labels`` JSON: partitions, experiments and methods by id."""
    try:
        raw = json.loads(text) if text else {}
    except json.JSONDecodeError as err:
        raise ValueError(f"--labels: not JSON ({err})") from None
    if not isinstance(raw, dict):
        raise ValueError(f"--labels: a JSON object is expected, got {type(raw).__name__}")
    unknown = set(raw) - {"partitions", "experiments", "methods", "groups"}
    if unknown:
        raise ValueError(f"--labels: unknown key(s) {sorted(unknown)}")
    for key, value in raw.items():
        if not isinstance(value, dict):
            raise ValueError(f"--labels: {key!r} must map ids to labels")
    return raw


def with_method_labels(command: Callable[[argparse.Namespace], None]
                       ) -> Callable[[argparse.Namespace], None]:
    """``command``, run with the ``--labels`` JSON's method labels and group names in force."""
    from pflrepro.reporting.names import method_labels

    def run(args: argparse.Namespace) -> None:
        raw = labels_json(getattr(args, "labels", None))
        with method_labels(raw.get("methods", {}), raw.get("groups", {})):
            command(args)

    run.__doc__ = command.__doc__
    return run
