"""Tables from the runs that finished, when some of an experiment's runs failed.

With ``snakemake --keep-going`` the runs of the other methods finish, but an
experiment's aggregate, table and figures wait for every run, so none of them is
built. After a failed workflow the Snakefile's ``onerror`` handler calls
:func:`write_partial_reports`: for each experiment with some runs present and some
missing, it writes ``results/partial/<experiment>.md`` (and ``.csv``): the accuracy
table of the runs that exist, marked PARTIAL, and the list of the runs that are
missing with their log files. These files are no workflow outputs, so nothing is
marked done: the next ``snakemake`` retries the failed runs and builds the real table.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from pflrepro.store.io import CorruptFileError, write_csv, write_text

__all__ = ["PartialRun", "write_partial_report"]


@dataclass(frozen=True)
class PartialRun:
    """One run of an experiment: its table's path and its job's log."""

    path: str
    log: str
    label: str  # method, partition, split and seed, for the missing-runs list


def write_partial_report(experiment: str, runs: Sequence[PartialRun],
                         md_path: str | os.PathLike[str],
                         csv_path: str | os.PathLike[str]) -> tuple[int, int]:
    """Write the partial table of ``experiment``; return (runs present, runs missing).

    Writes nothing and returns (present, missing) when no run or every run is present.
    A run whose table is damaged counts as missing (it is set aside on reading).
    """
    from pflrepro.reporting.render import render_markdown, table_text, tidy_table
    from pflrepro.reporting.tables import accuracy_table
    from pflrepro.store.results import read_table

    frames, missing = [], []
    for run in runs:
        if not Path(run.path).is_file():
            missing.append(run)
            continue
        try:
            frames.append(read_table(run.path))
        except CorruptFileError:
            missing.append(run)
    if not frames or not missing:
        return len(frames), len(missing)
    table = accuracy_table(pd.concat(frames, ignore_index=True))
    caption = (f"PARTIAL: {experiment}, {len(frames)} of {len(runs)} runs; the other "
               f"{len(missing)} failed or did not run (listed below). Not the experiment's "
               "table: rerun snakemake once they are fixed.")
    lines = [render_markdown(table_text(table, caption)).rstrip(), "",
             f"Missing runs ({len(missing)}):", ""]
    lines += [f"- {run.label}: `{run.path}` (log: `{run.log}`)" for run in missing]
    write_text(md_path, "\n".join(lines) + "\n")
    write_csv(tidy_table(table), csv_path)
    return len(frames), len(missing)
