"""Snakemake's log of a run (``.snakemake/log/<time>.snakemake.log``), read back live.

A running Snakemake writes to its log, as it goes, the command it was started with,
the cores it was given, the jobs it plans (``Job stats:``, rule by rule), a block per job
it starts (its rule, outputs, logs, jobid, benchmark, wildcards, under the time it
started), ``Finished jobid: N (Rule: R)`` under the time it finished, ``Error in rule
R:`` with the job's id when one fails, ``K of M steps (P%) done`` after each, and
``Complete log(s): ...`` when it ends. :func:`parse_run_log` reads all of it back;
:func:`latest_run_log` finds the newest log of a run (a lint or a dry run writes none
with a ``Job stats:`` table).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

#: Where Snakemake keeps its logs, under the working directory.
LOG_DIR = ".snakemake/log"
#: The workflow's target rule: it runs no command, so it is no work of the run.
TARGET_RULE = "all"
_TIME = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]$")
_HEADER = re.compile(r"^(?:local)?(?:rule|checkpoint) (\w+):$")
_FINISHED = re.compile(r"^Finished jobid: (\d+) \(Rule: (\w+)\)")
_ERROR = re.compile(r"^Error in rule (\w+):")
_STEPS = re.compile(r"^(\d+) of (\d+) steps \(")
_CORES = re.compile(r"^Provided cores: (\d+)")
_ENDED = ("Complete log(s):", "Nothing to be done")


@dataclass
class LoggedJob:
    """A job the run started, as its log says."""

    jobid: str
    rule: str
    started: datetime | None = None
    outputs: list[str] = field(default_factory=list)
    logs: list[str] = field(default_factory=list)
    benchmark: str = ""
    wildcards: dict[str, str] = field(default_factory=dict)
    finished: datetime | None = None
    failed: bool = False


@dataclass
class RunLog:
    """What a run's log says so far."""

    path: Path | None = None
    command: list[str] = field(default_factory=list)
    cores: int = 1
    #: Jobs planned per rule (the first ``Job stats:`` table; the target rule left out).
    planned: dict[str, int] = field(default_factory=dict)
    jobs: dict[str, LoggedJob] = field(default_factory=dict)
    steps_done: int = 0
    steps_total: int = 0
    started: datetime | None = None
    last_time: datetime | None = None
    ended: bool = False


def _time(text: str) -> datetime:
    return datetime.strptime(" ".join(text.split()), "%a %b %d %H:%M:%S %Y")


def parse_run_log(text: str, path: Path | None = None) -> RunLog:
    """A run's log read back (see the module docstring); a log cut mid-line is fine."""
    out = RunLog(path=path)
    now: datetime | None = None
    current: LoggedJob | None = None
    error_rule: str | None = None
    stats: dict[str, int] | None = None
    for raw in text.splitlines():
        line = raw.rstrip()
        stripped = line.strip()
        if stats is not None:  # inside the first "Job stats:" table
            parts = stripped.split()
            if len(parts) == 2 and parts[1].isdigit() and parts[0] not in ("total", "job"):
                if parts[0] != TARGET_RULE:
                    stats[parts[0]] = int(parts[1])
                continue
            if parts[:1] in (["job"], []) or set(stripped) <= {"-", " "}:
                continue
            out.planned, stats = stats, None
            continue
        if (m := _TIME.match(stripped)) is not None:
            now = _time(m.group(1))
            out.started = out.started or now
            out.last_time = now
            current = None
            continue
        if line.startswith("    ") and current is not None:
            key, _, value = stripped.partition(": ")
            if key == "output":
                current.outputs = [v for v in value.split(", ") if v]
            elif key == "log":
                current.logs = [v for v in value.split(", ") if v]
            elif key == "benchmark":
                current.benchmark = value
            elif key == "wildcards":
                current.wildcards = dict(kv.split("=", 1) for kv in value.split(", ")
                                         if "=" in kv)
            elif key == "jobid":
                current.jobid = value
                out.jobs[value] = current
            continue
        if line.startswith("    ") and error_rule is not None:
            key, _, value = stripped.partition(": ")
            if key == "jobid" and value in out.jobs:
                out.jobs[value].failed = True
                error_rule = None
            continue
        current, error_rule = None, None
        if (m := _HEADER.match(stripped)) is not None:
            current = LoggedJob("", m.group(1), started=now)
        elif (m := _FINISHED.match(stripped)) is not None and m.group(1) in out.jobs:
            out.jobs[m.group(1)].finished = now
        elif (m := _ERROR.match(stripped)) is not None:
            error_rule = m.group(1)
        elif (m := _STEPS.match(stripped)) is not None:
            out.steps_done, out.steps_total = int(m.group(1)), int(m.group(2))
        elif (m := _CORES.match(stripped)) is not None:
            out.cores = int(m.group(1))
        elif stripped.startswith("Command: ") and not out.command:
            out.command = shlex.split(stripped[len("Command: "):])
        elif stripped == "Job stats:" and not out.planned:
            stats = {}
        elif stripped.startswith(_ENDED):
            out.ended = True
    out.jobs = {k: j for k, j in out.jobs.items() if j.rule != TARGET_RULE}
    return out


def latest_run_log(workdir: str | Path = ".") -> Path | None:
    """The newest Snakemake log under ``workdir`` of a run that planned jobs, or None."""
    logs = sorted(Path(workdir, LOG_DIR).glob("*.snakemake.log"),
                  key=lambda p: p.stat().st_mtime, reverse=True)
    for path in logs:
        with path.open(encoding="utf-8", errors="replace") as fh:
            head = fh.read(65536)
        if "Job stats:" in head or "Building DAG of jobs" in head:
            return path
    return None


def read_run_log(path: Path) -> RunLog:
    """:func:`parse_run_log` of the file at ``path``."""
    return parse_run_log(path.read_text(encoding="utf-8", errors="replace"), path)
