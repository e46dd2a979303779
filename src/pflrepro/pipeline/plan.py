"""``pflrepro plan``: what ``snakemake -n`` would run, summed up.

A dry run lists every job with its rule, wildcards, outputs and the reasons it runs;
for a paper-scale config that is thousands of blocks. :func:`parse_dry_run` reads them
back, and :func:`summary` counts the jobs by rule and by experiment, how many build
missing outputs and how many rebuild stale ones, each reason's count, and, when the
measured cost projection (``results/tables/cost-projection.csv``) prices the planned
training runs' experiments and methods, their projected hours.
"""

from __future__ import annotations

import importlib.util
import math
import re
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

#: The reason Snakemake gives a job whose outputs do not exist yet.
MISSING = "missing output files"
#: The workflow's target rule: it runs no command, so it is no work of the plan.
TARGET_RULE = "all"
#: The measured cost projection of the paper grid (pflrepro.reporting.cost_projection).
PROJECTION = "results/tables/cost-projection.csv"
_HEADER = re.compile(r"^(?:local)?(?:rule|checkpoint) (\w+):$")


@dataclass
class PlannedJob:
    """One job of a dry run."""

    rule: str
    wildcards: dict[str, str] = field(default_factory=dict)
    outputs: list[str] = field(default_factory=list)
    #: The kinds of reason, lower case, without their file lists.
    reasons: list[str] = field(default_factory=list)

    @property
    def training_runs(self) -> int:
        """Runs this job trains (a ``train`` or batched ``train_<runs>`` job), else 0."""
        return len(self.outputs) if re.fullmatch(r"train(_\d+)?", self.rule) else 0


def parse_dry_run(text: str) -> list[PlannedJob]:
    """The jobs of ``snakemake -n``'s output, in its order (the target rule left out)."""
    jobs: list[PlannedJob] = []
    current: PlannedJob | None = None
    for line in text.splitlines():
        header = _HEADER.match(line.strip())
        if header:
            current = PlannedJob(header.group(1))
            jobs.append(current)
            continue
        if not line.startswith("    "):
            current = None  # a job's block is its indented lines
            continue
        if current is None:
            continue
        key, _, value = line.strip().partition(": ")
        if key == "wildcards":
            current.wildcards = dict(kv.split("=", 1) for kv in value.split(", ") if "=" in kv)
        elif key == "output":
            current.outputs = [v for v in value.split(", ") if v]
        elif key == "reason":
            current.reasons = [part.split(":", 1)[0].strip().lower()
                               for part in value.split("; ") if part.strip()]
    return [j for j in jobs if j.rule != TARGET_RULE]


def projected_hours(jobs: Sequence[PlannedJob], projection: Path) -> tuple[float, int, int]:
    """(hours, runs priced, runs not priced) of the planned training runs.

    Each run costs its (experiment, method) row's ``hours / runs`` of the projection.
    """
    import pandas as pd

    table = pd.read_csv(projection)
    missing = {"experiment", "method", "runs", "hours"} - set(table.columns)
    if missing:
        raise ValueError(f"{projection}: no column(s) {sorted(missing)}: not a cost projection")
    per_run = {(str(r.experiment), str(r.method)): float(r.hours) / float(r.runs)
               for r in table.itertuples() if float(r.runs) > 0 and math.isfinite(float(r.hours))}
    hours, priced, unpriced = 0.0, 0, 0
    for job in jobs:
        key = (job.wildcards.get("experiment", ""), job.wildcards.get("method", ""))
        if key in per_run:
            hours += per_run[key] * job.training_runs
            priced += job.training_runs
        else:
            unpriced += job.training_runs
    return hours, priced, unpriced


def _counts(title: str, counter: Counter[str]) -> list[str]:
    width = max(len(k) for k in counter) + 2
    return [title, *(f"  {k:<{width}}{n}" for k, n in counter.most_common())]


def summary(jobs: Sequence[PlannedJob], projection: Path | None = None) -> str:
    """The plan in a few lines: totals, by rule, by experiment, reasons, projected cost."""
    if not jobs:
        return "nothing to run: every output is present and up to date\n"
    missing = sum(MISSING in j.reasons for j in jobs)
    runs = sum(j.training_runs for j in jobs)
    lines = [f"{len(jobs)} job(s) would run ({runs} training run(s)): {missing} build missing "
             f"outputs, {len(jobs) - missing} rebuild stale ones", ""]
    lines += _counts("by rule:", Counter(j.rule for j in jobs)) + [""]
    lines += _counts("by experiment:", Counter(j.wildcards.get("experiment", "(none: data, "
                                                             "partitions, combined tables)")
                                               for j in jobs)) + [""]
    lines += _counts("why (a job may have several reasons):",
                     Counter(r for j in jobs for r in dict.fromkeys(j.reasons)))
    if runs and projection is not None and projection.is_file():
        hours, priced, unpriced = projected_hours(jobs, projection)
        lines += ["", f"projected training time of {priced} of the {runs} run(s): {hours:.2f} h "
                      f"(from {projection}; {unpriced} run(s) of experiments or methods it "
                      "does not price)"]
    return "\n".join(lines) + "\n"


def snakemake_command() -> list[str]:
    """How to start Snakemake: this Python's module, else ``snakemake`` on PATH."""
    if importlib.util.find_spec("snakemake") is not None:
        return [sys.executable, "-m", "snakemake"]
    if shutil.which("snakemake"):
        return ["snakemake"]
    raise ValueError("snakemake is not installed here (pip install -e . installs it)")


def dry_run(args: Sequence[str]) -> str:
    """``snakemake -n ARGS`` in the current directory: its output (one-line error if it fails)."""
    proc = subprocess.run([*snakemake_command(), "-n", *args], capture_output=True, text=True,
                          check=False)
    text = proc.stdout + proc.stderr
    if proc.returncode != 0:
        raise ValueError(f"snakemake -n {' '.join(args)} failed (exit {proc.returncode}): "
                         f"{error_line(text)}")
    return text


def error_line(text: str) -> str:
    """The message of the last error Snakemake printed (the line after its name)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    heads = [i for i, line in enumerate(lines) if re.match(r"\w*(Error|Exception)\b", line)]
    if not heads:
        return lines[-1] if lines else "no output"
    after = [line for line in lines[heads[-1] + 1:]
             if not line.startswith(("File ", "Wildcards:", "Traceback:"))]
    return after[0] if after else lines[heads[-1]]
