"""``pflrepro status``: a summary of a results directory's training jobs.

:func:`job_status` reads ``results/runs`` and ``logs/train`` and classifies every job
it finds as finished, running, failed or stale (and, given the config's list of jobs,
pending); :func:`format_status` renders that. It reads back what a running job writes
through :mod:`pflrepro.store.progress` (its log lines, its progress table); split from
that module so that the training code imports none of this. :func:`tuning_warnings`
lists the tuning selections that may have missed their optimum (a value at its grid's
edge, a best validation round at the budget's end: :mod:`pflrepro.reporting.tuning`).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pflrepro.store.progress import PROGRESS_TABLE_SUFFIX, format_duration, progress_table_path

if TYPE_CHECKING:
    import pandas as pd

    from pflrepro.config import RunKey

#: A progress line in a job's log (see :meth:`RoundSummary.line`).
PROGRESS_LINE = re.compile(r"round (\d+)/(\d+): .*")
#: Lines that mark a failed job's log.
FAILURE_LINE = re.compile(r"\bERROR\b|Traceback|: error: |Killed|MemoryError")
#: States of a job, in the order tables list them.
STATES = ("finished", "running", "stale", "failed", "pending")


@dataclass(frozen=True)
class JobStatus:
    """One training job as found on disk."""

    experiment: str
    partition: str
    method: str
    run: str  # ``split{s}-seed{t}``
    state: str
    detail: str = ""


def _job_key(path: Path, root: Path, suffix: str) -> tuple[str, str, str, str] | None:
    """(experiment, partition, method, split/seed) of a run or log path, None if not one."""
    parts = path.relative_to(root).parts
    if len(parts) != 4 or not parts[3].endswith(suffix):
        return None
    name = parts[3][:-len(suffix)]
    if not re.fullmatch(r"split\d+-seed\d+", name):
        return None
    return parts[0], parts[1], parts[2], name


def _tail(path: Path, limit: int = 65536) -> list[str]:
    with path.open("rb") as fh:
        size = fh.seek(0, 2)
        fh.seek(max(size - limit, 0))
        return fh.read().decode("utf-8", errors="replace").splitlines()


def job_status(results: str | Path = "results", logs: str | Path = "logs", *,
               expected: Iterable[tuple[str, str, str, str]] = (),
               stale_after_s: float = 3600.0, now: float | None = None) -> list[JobStatus]:
    """Every training job under ``results/runs`` and ``logs/train``, classified.

    * finished: its run table exists (``detail``: the log's "rounds in s" line);
    * failed: no run table, and its log has an error line (``detail``: the first one);
    * running: no run table, no error, log written to in the last ``stale_after_s``
      seconds (``detail``: the last progress line, and the progress table if any);
    * stale: the same, but the log is older (a job killed without a word, or one on
      another machine whose logs lag); ``detail`` as for running;
    * pending: listed in ``expected`` (experiment, partition, method, run) but neither
      a run table nor a log exists.

    The job's process is not looked for (it may run on another node): "running" means
    only that its log changed recently.
    """
    runs_root, logs_root = Path(results) / "runs", Path(logs) / "train"
    now = time.time() if now is None else now
    finished = {k for p in runs_root.rglob("*.parquet")
                if not p.name.endswith(PROGRESS_TABLE_SUFFIX)
                and (k := _job_key(p, runs_root, ".parquet")) is not None}
    logs_by_key = {k: p for p in logs_root.rglob("*.log")
                   if (k := _job_key(p, logs_root, ".log")) is not None}
    out: list[JobStatus] = []
    for key in sorted(finished | set(logs_by_key) | set(expected)):
        log_path = logs_by_key.get(key)
        lines = _tail(log_path) if log_path is not None else []
        if key in finished:
            done = [ln for ln in lines if " rounds in " in ln]
            out.append(JobStatus(*key, "finished", _message(done[-1]) if done else ""))
            continue
        if log_path is None:
            out.append(JobStatus(*key, "pending"))
            continue
        errors = [ln for ln in lines if FAILURE_LINE.search(ln)]
        if errors:
            out.append(JobStatus(*key, "failed", f"{_message(errors[0])} (log: {log_path})"))
            continue
        progress = [m.group(0) for ln in lines if (m := PROGRESS_LINE.search(ln))]
        detail = progress[-1] if progress else "no round finished yet"
        table = progress_table_path(runs_root.joinpath(*key[:3], key[3] + ".parquet"))
        if table.exists():
            detail += f"; curve so far: {table}"
        age = now - log_path.stat().st_mtime
        state = "running" if age <= stale_after_s else "stale"
        if state == "stale":
            detail += f"; log unchanged for {format_duration(age)}"
        out.append(JobStatus(*key, state, detail))
    return out


def _message(line: str) -> str:
    """A log line without its ``time LEVEL logger:`` prefix."""
    m = re.match(r"\d{4}-\d\d-\d\d [\d:,]+ \w+ [\w.]+: (.*)", line)
    return (m.group(1) if m else line).strip()


def tuning_warnings(results: str | Path = "results") -> list[str]:
    """``<experiment>/<method>, <partition> split <s>: <warning>`` per warned selection.

    Read from the tuning tables ``results/tuning/<experiment>/<method>.csv``: the
    selected rows' ``warning`` column; a table without that column (written before it
    existed) has its selections checked here for a value at its grid's edge (the
    lowest, unless 0, or the highest of the values tried on that partition and split).
    """
    import pandas as pd

    out = []
    for path in sorted(Path(results).glob("tuning/*/*.csv")):
        table = pd.read_csv(path)
        if "selected" not in table.columns:
            continue
        keys = [c for c in table.columns if c.startswith("value_")]
        for (partition, split), sub in table.groupby(["partition", "split"], sort=True):
            for row in sub[sub["selected"].astype(bool)].to_dict("records"):
                text = row["warning"] if "warning" in table.columns else _edges(sub, row,
                                                                                 keys)
                if isinstance(text, str) and text:
                    out.append(f"{path.parent.name}/{path.stem}, {partition} split {split}: "
                               f"{text}")
    return out


def _edges(rows: pd.DataFrame, row: dict[str, object], keys: Sequence[str]) -> str:
    """The selected ``row``'s values at an edge of those tried in ``rows`` (not a low 0)."""
    found = []
    for k in keys:
        lo, hi, value = rows[k].min(), rows[k].max(), row[k]
        if lo == hi:
            continue
        if value == lo and lo != 0:
            found.append(f"{k[len('value_'):]} = {value:.3g}: the grid's lowest value")
        elif value == hi:
            found.append(f"{k[len('value_'):]} = {value:.3g}: the grid's highest value")
    return "; ".join(found)


def format_status(jobs: Sequence[JobStatus], warnings: Sequence[str] = ()) -> str:
    """Counts per experiment and state, one line per job not finished, tuning warnings."""
    tail = ["", "tuning selections that may miss their optimum (results/tuning/):",
            *(f"  {w}" for w in warnings)] if warnings else []
    if not jobs:
        return "\n".join(["no training jobs found (no results/runs, no logs/train)",
                          *tail]) + "\n"
    experiments = sorted({j.experiment for j in jobs})
    lines = ["| experiment | " + " | ".join(STATES) + " |",
             "|:--|" + "--:|" * len(STATES)]
    for e in experiments:
        counts = [sum(j.experiment == e and j.state == s for j in jobs) for s in STATES]
        lines.append(f"| {e} | " + " | ".join(map(str, counts)) + " |")
    totals = [sum(j.state == s for j in jobs) for s in STATES]
    lines.append("| **all** | " + " | ".join(map(str, totals)) + " |")
    for state in ("running", "stale", "failed"):
        chosen = [j for j in jobs if j.state == state]
        if chosen:
            lines += ["", f"{state}:"]
            lines += [f"  {j.experiment}/{j.partition}/{j.method}/{j.run}: {j.detail}"
                      for j in chosen]
    return "\n".join(lines + tail) + "\n"


def iter_expected(runs: Iterable[RunKey]) -> Iterator[tuple[str, str, str, str]]:
    """Job keys of the config's training jobs (for ``expected``)."""
    for k in runs:
        yield k.experiment, k.partition, k.method, f"split{k.split}-seed{k.seed}"
