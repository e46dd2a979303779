"""``pflrepro plan``: what ``snakemake -n`` would run, summed up.

A dry run lists every job with its rule, wildcards, outputs and the reasons it runs;
for a paper-scale config that is thousands of blocks. :func:`parse_dry_run` reads them
back, and :func:`summary` counts the jobs by paper and experiment (with their training
and tuning runs and projected GPU-hours, :mod:`pflrepro.pipeline.plan_cost`), by rule,
how many build missing outputs and how many rebuild stale ones, each reason's count,
and, when the measured cost projection (``results/tables/cost-projection.csv``) prices
the planned training runs' experiments and methods, their projected hours.

A job's runs are found from its outputs, not its rule's name: every output at a run's
path (:data:`pflrepro.store.paths.RUN`) is a training run and every output at a
tuning run's path (``TUNE_RUN``) a tuning run, whichever rule (``train``, the batch
rules ``train_<runs>``, ``tune_train``, ``tune_train_<runs>``) writes it.
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
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pflrepro.pipeline.plan_cost import CONFIG_ENV, Device, cost_lines, plan_cost
from pflrepro.pipeline.planned_job import (  # noqa: F401 (re-exported)
    RUN_PATH,
    TUNE_RUN_PATH,
    PlannedJob,
    path_regex,
)

if TYPE_CHECKING:
    from pflrepro.config import WorkflowConfig

#: The reason Snakemake gives a job whose outputs do not exist yet.
MISSING = "missing output files"
#: The workflow's target rule: it runs no command, so it is no work of the plan.
TARGET_RULE = "all"
#: The measured cost projection of the paper grid (pflrepro.reporting.cost_projection).
PROJECTION = "results/tables/cost-projection.csv"
_HEADER = re.compile(r"^(?:local)?(?:rule|checkpoint) (\w+):$")


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
            current.changed = changed_params(value)
    return [j for j in jobs if j.rule != TARGET_RULE]


def _json_values(text: str) -> list[Any]:
    """Every JSON object or array in ``text``, in order (a JSON string holding one, read)."""
    import json

    decoder, found, i = json.JSONDecoder(), [], 0
    while (i := min((j for j in (text.find("{", i), text.find("[", i)) if j >= 0),
                    default=-1)) >= 0:
        try:
            value, end = decoder.raw_decode(text, i)
        except ValueError:
            i += 1
            continue
        stack = [value]
        while stack:
            item = stack.pop()
            if isinstance(item, list) and all(isinstance(x, str) for x in item):
                stack += [json.loads(x) for x in item if x[:1] in "{["]
            else:
                found.append(item)
        i = end
    return found


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flatten(v, f"{prefix}{k}."))
        return out
    return {prefix[:-1]: value}


def changed_params(reason: str) -> list[str]:
    """The keys whose values differ in Snakemake's "Params have changed" reason.

    Snakemake prints the whole params before and now (``before: ... now: ...``: for
    a training job its spec, about 1,500 characters of JSON); the keys named here
    (``training.rounds``, ``hyper.mu``) are what changed, compared key by key.
    """
    head, _, rest = reason.partition("Params have changed since last execution")
    before, _, now = rest.partition(" now: ")
    if not now:
        return []
    old = [_flatten(v) for v in _json_values(before.split("before: ", 1)[-1])]
    new = [_flatten(v) for v in _json_values(now.split("; ", 1)[0] if "; " in now else now)]
    keys = set().union(*old, *new) if old or new else set()
    return sorted(k for k in keys
                  if {repr(o.get(k)) for o in old} != {repr(n.get(k)) for n in new})


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
    for key in (k for job in jobs for k in job.runs("train")):
        if key in per_run:
            hours += per_run[key]
            priced += 1
        else:
            unpriced += 1
    return hours, priced, unpriced


def _counts(title: str, counter: Counter[str]) -> list[str]:
    width = max(len(k) for k in counter) + 2
    return [title, *(f"  {k:<{width}}{n}" for k, n in counter.most_common())]


def summary(jobs: Sequence[PlannedJob], projection: Path | None = None, *,
            config: WorkflowConfig | None = None, device: Device | None = None) -> str:
    """The plan in a few lines: totals, by paper and experiment, by rule, reasons, cost.

    By paper and experiment: jobs, training and tuning runs and GPU-hours projected from
    FLOPs on ``device`` for ``config``'s experiments; last, the measured projection's
    hours where ``projection`` exists.
    """
    if not jobs:
        return "nothing to run: every output is present and up to date\n"
    device = device or Device()
    missing = sum(MISSING in j.reasons for j in jobs)
    runs = sum(j.training_runs for j in jobs)
    tuning = sum(j.tuning_runs for j in jobs)
    lines = [f"{len(jobs)} job(s) would run ({runs} training run(s), {tuning} tuning run(s)): "
             f"{missing} build missing outputs, {len(jobs) - missing} rebuild stale ones", ""]
    lines += cost_lines(plan_cost(jobs, config, device), device) + [""]
    lines += _counts("by rule:", Counter(j.rule for j in jobs)) + [""]
    lines += _counts("why (a job may have several reasons):",
                     Counter(r for j in jobs for r in dict.fromkeys(j.reasons)))
    changed = Counter(k for j in jobs for k in j.changed)
    if changed:
        lines += [""] + _counts("params changed, by key (jobs):", changed)
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


def dry_run(args: Sequence[str]) -> tuple[str, dict[str, Any] | None]:
    """``snakemake -n ARGS`` in the current directory: its output and the merged config.

    The config is what the workflow wrote where :data:`CONFIG_ENV` names (None if it
    wrote none); a failed dry run raises ``ValueError`` with Snakemake's message.
    """
    import json
    import os
    import tempfile

    with tempfile.TemporaryDirectory(prefix="pflrepro-plan-") as tmp:
        exported = Path(tmp) / "config.json"
        proc = subprocess.run([*snakemake_command(), "-n", *args], capture_output=True,
                              text=True, check=False,
                              env={**os.environ, CONFIG_ENV: str(exported)})
        config = json.loads(exported.read_text()) if exported.is_file() else None
    text = proc.stdout + proc.stderr
    if proc.returncode != 0:
        raise ValueError(f"snakemake -n {' '.join(args)} failed (exit {proc.returncode}): "
                         f"{error_line(text)}")
    return text, config


def parse_config(config: dict[str, Any] | None) -> WorkflowConfig | None:
    """The merged config a dry run exported, parsed (None if there is none)."""
    if config is None:
        return None
    from pflrepro.config import parse

    return parse(config)


def error_line(text: str) -> str:
    """The message of the last error Snakemake printed (the line after its name)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    heads = [i for i, line in enumerate(lines) if re.match(r"\w*(Error|Exception)\b", line)]
    if not heads:
        return lines[-1] if lines else "no output"
    after = [line for line in lines[heads[-1] + 1:]
             if not line.startswith(("File ", "Wildcards:", "Traceback:"))]
    return after[0] if after else lines[heads[-1]]
