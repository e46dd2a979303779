"""``pflrepro status --watch``: a whole Snakemake run in one view, refreshed live.

The view reads what a run leaves as it goes, in the directory it runs in: Snakemake's
log (:mod:`pflrepro.inspect.run_log`: the jobs planned, started, finished and failed,
when each started and finished), the benchmark record of each finished training job
(its wall time), the progress line each running training run logs (its time left,
:mod:`pflrepro.store.progress`), and, when given, the plan of the jobs left
(:mod:`pflrepro.inspect.plan`: their outputs, so their runs, and the FLOPs of those
runs). It counts jobs done, running, failed and left by stage (data, partitions,
tuning, training, aggregates, tables/figures) and training and tuning runs left, and
estimates the time left: each job left costs what the finished jobs of its stage took
(training and tuning runs: seconds per FLOP measured so far times the run's FLOPs, or
seconds per run where there are no FLOPs), a running run what its progress line says,
all divided among the run's cores.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pflrepro.inspect.plan import RUN_PATH, TUNE_RUN_PATH, PlannedJob
from pflrepro.inspect.run_log import LoggedJob, RunLog
from pflrepro.store.progress import format_duration

if TYPE_CHECKING:
    from pflrepro.pipeline.plan_cost import Device

#: The stages of a run, in the order the view lists them.
STAGES = ("data", "partitions", "tuning", "training", "aggregates", "tables/figures")
#: States of a job, in the order the view lists them.
STATES = ("done", "running", "failed", "left")
_LEFT = re.compile(r"left ~(\S+)$")


def stage_of(rule: str, outputs: Sequence[str] = ()) -> str:
    """The stage of a job: from its outputs (a run's or a tuning run's table), else its rule.

    Every training rule's name starts with ``train`` and every tuning rule's with
    ``tune_`` (train.smk, tune.smk), so a rule none of whose jobs has been seen yet
    is placed by its name.
    """
    if any(RUN_PATH.search(o) for o in outputs):
        return "training"
    if any(TUNE_RUN_PATH.search(o) for o in outputs) or rule.startswith("tune_"):
        return "tuning"
    if rule == "train" or rule.startswith("train_"):
        return "training"
    if rule in ("prepare_data", "public_set"):
        return "data"
    if rule.startswith("partition") or rule == "plot_partition":
        return "partitions"
    if rule.startswith("aggregate"):
        return "aggregates"
    return "tables/figures"


@dataclass
class ViewJob:
    """One job of the run: started (from the log) or left (from the plan or the counts)."""

    rule: str
    state: str
    outputs: list[str] = field(default_factory=list)
    logged: LoggedJob | None = None
    runs: int = 0  # training or tuning runs
    seconds: float | None = None  # measured wall time of a finished job

    @property
    def stage(self) -> str:
        """Its stage (:func:`stage_of`)."""
        return stage_of(self.rule, self.outputs)


def _runs(rule: str, outputs: Sequence[str]) -> int:
    job = PlannedJob(rule, outputs=list(outputs))
    return job.training_runs + job.tuning_runs


def benchmark_seconds(path: str | Path) -> float | None:
    """The wall seconds (``s``) of a Snakemake benchmark record, None if unreadable."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
        header, values = lines[0].split("\t"), lines[1].split("\t")
        return float(values[header.index("s")])
    except (OSError, IndexError, ValueError):
        return None


def view_jobs(log: RunLog, plan: Sequence[PlannedJob] | None = None) -> list[ViewJob]:
    """Every job of the run: the log's, with their states, then the jobs left.

    The jobs left are the plan's not yet started (matched by outputs) when a plan is
    given, else each rule's planned count less its jobs started (their runs taken
    from a started job of the same rule, 0 if none has started).
    """
    out: list[ViewJob] = []
    for job in log.jobs.values():
        if job.failed:
            state = "failed"
        elif job.finished is not None:
            state = "done"
        else:
            state = "left" if log.ended else "running"
        seconds = None
        if job.finished is not None:
            seconds = benchmark_seconds(job.benchmark) if job.benchmark else None
            if seconds is None and job.started is not None:
                seconds = (job.finished - job.started).total_seconds()
        out.append(ViewJob(job.rule, state, job.outputs, job, _runs(job.rule, job.outputs),
                           seconds))
    started = {tuple(j.outputs) for j in log.jobs.values() if j.outputs}
    if plan is not None:
        out += [ViewJob(j.rule, "left", j.outputs, runs=_runs(j.rule, j.outputs))
                for j in plan if not j.outputs or tuple(j.outputs) not in started]
        return out
    typical = {j.rule: j.runs for j in out}
    for rule, count in log.planned.items():
        seen = sum(j.rule == rule for j in out)
        out += [ViewJob(rule, "left", runs=typical.get(rule, 0))
                for _ in range(max(count - seen, 0))]
    return out


def run_left_seconds(logs: Sequence[str]) -> float | None:
    """The time left of a running run, from the last progress line of its log."""
    for path in logs:
        try:
            with open(path, "rb") as fh:
                size = fh.seek(0, 2)
                fh.seek(max(size - 4096, 0))
                lines = fh.read().decode("utf-8", errors="replace").splitlines()
        except OSError:
            continue
        for line in reversed(lines):
            if (m := _LEFT.search(line.strip())) is not None:
                return parse_duration(m.group(1))
    return None


def running_left(job: ViewJob, per_run: float) -> float | None:
    """Time left of a running training or tuning job, run by run.

    A run whose table exists costs nothing more, one whose log has a progress line what
    that line says, one not started yet ``per_run``; None if the job has no runs or
    none of them has logged a progress line yet.
    """
    if not job.runs or job.logged is None:
        return None
    logs = {(Path(p).parent.name, Path(p).stem): p for p in job.logged.logs}
    total, said = 0.0, False
    for out in job.outputs:
        if Path(out).exists():
            continue
        log = logs.get((Path(out).parent.name, Path(out).stem.split(".")[0]))
        left = run_left_seconds([log]) if log is not None else None
        said = said or left is not None
        total += left if left is not None else per_run
    return total if said else None


def parse_duration(text: str) -> float | None:
    """Seconds of ``12.3s`` or ``H:MM:SS`` (:func:`format_duration`), None if neither."""
    try:
        if text.endswith("s"):
            return float(text[:-1])
        h, m, s = (int(x) for x in text.split(":"))
        return h * 3600.0 + m * 60.0 + s
    except ValueError:
        return None


@dataclass
class Estimate:
    """Seconds of work left (summed over jobs) and of wall time at the run's cores."""

    work_s: float
    wall_s: float
    measured: int  # finished jobs whose times it is based on
    guessed: int  # jobs left of stages with nothing measured yet


def estimate(jobs: Sequence[ViewJob], cores: int, elapsed: Callable[[ViewJob], float],
             flops: Callable[[ViewJob], float | None] = lambda job: None) -> Estimate:
    """Time left: each job left or running priced at its stage's measured pace.

    Training and tuning jobs are priced per FLOP of their runs where ``flops`` knows
    them (seconds per FLOP of the finished ones of both stages), else per run; other
    jobs at their stage's mean seconds per job. A running job costs its estimate less
    ``elapsed(job)``, or what its runs' progress lines say when they say it. Stages
    with nothing measured yet take the mean of every finished job (``guessed``).
    """
    done = [j for j in jobs if j.state == "done" and j.seconds is not None]
    runs_done = [j for j in done if j.runs]
    flop_done = [(j.seconds or 0.0, f) for j in runs_done if (f := flops(j))]
    per_flop = (sum(s for s, _ in flop_done) / sum(f for _, f in flop_done)
                if flop_done else None)
    per_run = (sum(j.seconds or 0.0 for j in runs_done) / sum(j.runs for j in runs_done)
               if runs_done else None)
    by_stage: dict[str, list[float]] = {}
    for j in done:
        by_stage.setdefault(j.stage, []).append(j.seconds or 0.0)
    overall = sum(j.seconds or 0.0 for j in done) / len(done) if done else 0.0
    work, guessed = 0.0, 0
    for job in jobs:
        if job.state not in ("left", "running"):
            continue
        if job.runs and per_flop is not None and (f := flops(job)):
            cost = per_flop * f
        elif job.runs and per_run is not None:
            cost = per_run * job.runs
        elif job.stage in by_stage:
            cost = sum(by_stage[job.stage]) / len(by_stage[job.stage])
        else:
            cost, guessed = overall, guessed + 1
        if job.state == "running":
            said = running_left(job, cost / job.runs if job.runs else 0.0)
            cost = said if said is not None else max(cost - elapsed(job), 0.0)
        work += cost
    return Estimate(work, work / max(cores, 1), len(done), guessed)


def stage_table(jobs: Sequence[ViewJob]) -> list[str]:
    """Jobs done, running, failed and left per stage, and the totals."""
    width = max(len(s) for s in STAGES) + 2
    lines = [f"{'stage':<{width}}" + "".join(f"{s:>9}" for s in STATES)]
    for stage in (*STAGES, "total"):
        chosen = [j for j in jobs if stage in ("total", j.stage)]
        lines.append(f"  {stage:<{width - 2}}"
                     + "".join(f"{sum(j.state == s for j in chosen):>9}" for s in STATES))
    return lines


def render(log: RunLog, jobs: Sequence[ViewJob], est: Estimate, *, now_label: str,
           plan_note: str = "", gpu_hours_left: float | None = None,
           device: Device | None = None) -> str:
    """The whole-run view as text (see the module docstring)."""
    state = "ended" if log.ended else "in progress"
    total = len(jobs)
    done = sum(j.state == "done" for j in jobs)
    head = [f"{now_label}: Snakemake run {state} ({log.path}), {done} of {total} job(s) done "
            f"on {log.cores} core(s)", ""]
    lines = head + stage_table(jobs) + [""]
    for kind, stage in (("training", "training"), ("tuning", "tuning")):
        runs = [j for j in jobs if j.stage == stage]
        run_done = sum(j.runs for j in runs if j.state == "done")
        run_left = sum(j.runs for j in runs if j.state in ("left", "running"))
        lines.append(f"{kind} runs: {run_done} done, {run_left} left")
    if not log.ended:
        left = (f"time left: ~{format_duration(est.wall_s)} on {log.cores} core(s) "
                f"({format_duration(est.work_s)} of job time, paced by the {est.measured} "
                "finished job(s)")
        left += f"; {est.guessed} job(s) of stages not measured yet at the mean)" \
            if est.guessed else ")"
        lines.append(left if est.measured else "time left: not measured yet (no job "
                     "finished)")
    if gpu_hours_left is not None and device is not None:
        lines.append(f"projected GPU-hours of the runs left: {gpu_hours_left:.3g} at "
                     f"{device.describe()} (FLOPs counted per model, as `pflrepro plan`)")
    if plan_note:
        lines.append(plan_note)
    running = [j for j in jobs if j.state == "running" and j.logged is not None]
    if running:
        lines += ["", "running:"]
        for j in running:
            what = "/".join(j.logged.wildcards.get(k, "") for k in ("experiment", "method")
                            if k in j.logged.wildcards)
            left = running_left(j, math.nan)
            lines.append(f"  {j.rule} {what}".rstrip()
                         + (f" ({j.runs} run(s))" if j.runs else "")
                         + (f", left ~{format_duration(left)}" if left is not None
                            and math.isfinite(left) else ""))
    failed = [j for j in jobs if j.state == "failed" and j.logged is not None]
    if failed:
        lines += ["", "failed:", *(f"  {j.rule} jobid {j.logged.jobid}: "
                                   f"{', '.join(j.logged.logs[:1]) or 'no log'}"
                                   for j in failed)]
    return "\n".join(lines) + "\n"


def gpu_hours(jobs: Sequence[ViewJob], flops: Callable[[ViewJob], float | None],
              device: Device) -> float:
    """Projected GPU-hours of the runs of the jobs left and running."""
    total = sum(flops(j) or 0.0 for j in jobs if j.state in ("left", "running") and j.runs)
    return total / device.rate / 3600.0 if math.isfinite(total) else math.nan
