"""The whole-run view's loop: read the run, render it, again every few seconds.

:func:`watch` plans the jobs left once (``snakemake -n --nolock`` with the running
Snakemake's own arguments, read from its log, or those given), then renders
:mod:`pflrepro.inspect.run_view`'s view every ``interval`` seconds until the run
ends (its log says so, or it holds no lock any more) or the reader presses Ctrl-C;
either way it ends with one line. A terminal gets each view in place of the last;
a file or pipe gets them one after another.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import TextIO

from pflrepro.inspect.plan import PlannedJob, dry_run, parse_config, parse_dry_run
from pflrepro.inspect.run_log import RunLog, latest_run_log, read_run_log
from pflrepro.inspect.run_view import ViewJob, estimate, gpu_hours, render, view_jobs
from pflrepro.pipeline.plan_cost import Device, run_flops_table

#: Where a running Snakemake holds its locks, under the working directory.
LOCK_DIR = ".snakemake/locks"
_CLEAR = "\033[H\033[J"


def snakemake_args(command: Sequence[str]) -> list[str]:
    """The arguments of a logged Snakemake command (what follows ``snakemake``)."""
    for i, word in enumerate(command):
        if Path(word).name == "snakemake" or word.endswith("snakemake/__main__.py"):
            return list(command[i + 1:])
    return []


class Pricing:
    """FLOPs of a job's runs, from the config the plan's dry run merged."""

    def __init__(self, plan: Sequence[PlannedJob], config: dict | None,
                 log_jobs: Sequence[PlannedJob]) -> None:
        keys = {k for j in [*plan, *log_jobs] for kind in ("train", "tune") for k in j.runs(kind)}
        cfg = parse_config(config)
        self.table = run_flops_table(cfg, keys)[0] if cfg is not None else {}

    def __call__(self, job: ViewJob) -> float | None:
        """The FLOPs of ``job``'s runs, None if it has none or one is not priced."""
        planned = PlannedJob(job.rule, outputs=job.outputs)
        total = 0.0
        for index, kind in enumerate(("train", "tune")):
            for key in planned.runs(kind):
                if key not in self.table:
                    return None
                total += self.table[key][index]
        return total or None


def plan_jobs(log: RunLog, args: Sequence[str] | None
              ) -> tuple[list[PlannedJob] | None, dict | None, str]:
    """The jobs left, the merged config and a note, from ``snakemake -n --nolock``."""
    chosen = list(args) if args is not None else snakemake_args(log.command)
    try:
        text, config = dry_run(["--nolock", *chosen])
    except ValueError as err:
        return None, None, f"no plan of the jobs left ({err}); counted from the job stats"
    return parse_dry_run(text), config, ""


def run_is_alive(log: RunLog, workdir: Path) -> bool:
    """Whether the run goes on: its log has not ended and Snakemake holds a lock."""
    locks = workdir / LOCK_DIR
    return not log.ended and locks.is_dir() and any(locks.iterdir())


def snapshot(workdir: Path, plan: Sequence[PlannedJob] | None, pricing: Pricing | None,
             device: Device, note: str, now: datetime) -> tuple[str, RunLog, list[ViewJob]]:
    """One rendering of the run's view (the newest run log under ``workdir``)."""
    path = latest_run_log(workdir)
    if path is None:
        raise ValueError(f"no Snakemake run log under {workdir / '.snakemake/log'}: start "
                         "snakemake in this directory (the view reads its log)")
    log = read_run_log(path)
    if not log.ended and not run_is_alive(log, workdir):
        log.ended = True  # stopped without a word (killed): nothing runs any more
    jobs = view_jobs(log, plan)

    def elapsed(job: ViewJob) -> float:
        started = job.logged.started if job.logged is not None else None
        return (now - started).total_seconds() if started is not None else 0.0

    flops: Callable[[ViewJob], float | None] = pricing or (lambda job: None)
    est = estimate(jobs, log.cores, elapsed, flops)
    hours = gpu_hours(jobs, flops, device) if pricing is not None and pricing.table else None
    text = render(log, jobs, est, now_label=now.strftime("%H:%M:%S"), plan_note=note,
                  gpu_hours_left=hours, device=device)
    return text, log, jobs


def watch(workdir: str | Path = ".", *, interval: float | None = 5.0,
          args: Sequence[str] | None = None, use_plan: bool = True,
          device: Device | None = None, out: TextIO,
          sleep: Callable[[float], None] = time.sleep) -> None:
    """Render the run's view; with ``interval``, again until the run ends or Ctrl-C."""
    workdir, device = Path(workdir), device or Device()
    path = latest_run_log(workdir)
    if path is None:
        raise ValueError(f"no Snakemake run log under {workdir / '.snakemake/log'}: start "
                         "snakemake in this directory (the view reads its log)")
    first = read_run_log(path)
    plan, config, note = (plan_jobs(first, args) if use_plan and run_is_alive(first, workdir)
                          else (None, None, ""))
    log_jobs = [PlannedJob(j.rule, outputs=j.outputs) for j in first.jobs.values()]
    pricing = Pricing(plan or [], config, log_jobs) if config is not None else None
    clear = interval is not None and out.isatty()
    try:
        while True:
            text, log, jobs = snapshot(workdir, plan, pricing, device, note, datetime.now())
            out.write((_CLEAR if clear else "") + text)
            if interval is None or log.ended:
                break
            out.write("" if clear else "\n")
            out.flush()
            sleep(interval)
    except KeyboardInterrupt:
        out.write("\nstopped watching; the run goes on (pflrepro status --watch to resume)\n")
        return
    if interval is not None:
        failed = sum(j.state == "failed" for j in jobs)
        done = sum(j.state == "done" for j in jobs)
        out.write(f"\nthe run ended: {done} of {len(jobs)} job(s) done, {failed} failed "
                  f"(log: {log.path})\n")
