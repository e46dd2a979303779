"""A rerunnable fault campaign: hostile files, archives, servers, values and kills.

Each trial breaks one thing in a fresh tiny project (digits, 3 clients, 2 rounds, two
methods; built once per campaign with Snakemake, then copied with its mtimes) or in a
scratch folder, runs the ``pflrepro`` command line or Snakemake on it with a hard
timeout, and is classified from what it observed:

- **held**: a refusal (non-zero exit, a message naming the file, value or option, no
  traceback) or a correct recovery, with the hostile target untouched;
- **silent**: exit 0, yet the hostile effect happened or nothing was refused;
- **stuck**: a command ran past its timeout, or a process of the trial outlived it;
- **traceback**: "Traceback" in a command's output;
- **unclear**: anything else (printed for a human to judge).

Everything happens under one scratch folder: device nodes, FIFOs, sockets and links
are made there (a ``/dev/full`` twin with ``os.mknod`` when run as root), the
"/etc/shadow" a link points at is a file there, and every server listens on loopback.
The project under test is a snapshot of ``--repo`` (default: this checkout) taken at
the start, so edits made while the campaign runs do not mix into it.

    python benchmarks/fault_campaign.py --quick      # one or two trials a group, ~2 min
    python benchmarks/fault_campaign.py              # every trial, ~10 min on 2 cores
    python benchmarks/fault_campaign.py --only slow-server,tracebacks

The exit status is 1 when any trial is silent, stuck or a traceback.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import _fault_downloads  # noqa: F401 (adds its trials)
import _fault_project  # noqa: F401
import _fault_trials  # noqa: F401
from _fault_core import (
    REPO,
    TESTS,
    TRIALS,
    VERDICTS,
    Base,
    Ctx,
    Trial,
    Verdict,
    build_base,
    leftovers,
)


@dataclass
class Outcome:
    trial: Trial
    verdict: Verdict
    seconds: float
    extra: list[int] = field(default_factory=list)


def run_trial(trial: Trial, scratch: Path, base: Base) -> Outcome:
    """Run one trial in a folder of its own; a process left under it makes it stuck."""
    root = Path(tempfile.mkdtemp(prefix=f"{trial.group}-", dir=scratch))
    start = time.monotonic()
    try:
        verdict = trial.fn(Ctx(root, base))
    except Exception as exc:  # a broken trial is the campaign's fault: say so, go on
        verdict = Verdict("unclear", f"the trial itself failed: {type(exc).__name__}: {exc}")
    alive = leftovers(root)
    if alive:
        verdict = Verdict("stuck", f"processes left alive: {alive}\n{verdict.note}")
        for pid in alive:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    if verdict.kind == "held":
        shutil.rmtree(root, ignore_errors=True)
    return Outcome(trial, verdict, time.monotonic() - start, alive)


def table(outcomes: Sequence[Outcome], tests: dict[str, str]) -> list[str]:
    """The campaign's Markdown table: per group, trials and verdict counts, its test."""
    lines = ["| group | trials | held | silent | stuck | traceback | unclear | test |",
             "|---|---|---|---|---|---|---|---|"]
    groups = list(dict.fromkeys(o.trial.group for o in outcomes))
    totals = dict.fromkeys(VERDICTS, 0)
    for group in groups:
        mine = [o for o in outcomes if o.trial.group == group]
        counts = [sum(o.verdict.kind == v for o in mine) for v in VERDICTS]
        for v, c in zip(VERDICTS, counts, strict=True):
            totals[v] += c
        lines.append(f"| {group} | {len(mine)} | " + " | ".join(map(str, counts))
                     + f" | {tests.get(group, '')} |")
    lines.append(f"| **all** | {len(outcomes)} | "
                 + " | ".join(str(totals[v]) for v in VERDICTS) + " | |")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one or two trials a group")
    parser.add_argument("--only", help="comma-separated groups to run")
    parser.add_argument("--repo", type=Path, default=REPO, help="the checkout to test")
    parser.add_argument("--scratch", type=Path,
                        help="folder for the trials (default: a new temporary one); "
                             "non-held trials leave theirs there")
    args = parser.parse_args(argv)
    trials = TRIALS
    if args.only:
        wanted = set(args.only.split(","))
        unknown = wanted - {t.group for t in trials}
        if unknown:
            parser.error(f"--only: unknown groups {sorted(unknown)}")
        trials = [t for t in trials if t.group in wanted]
    if args.quick:
        trials = [t for t in trials if t.quick]
    scratch = Path(tempfile.mkdtemp(prefix="fault-campaign-", dir=args.scratch))
    start = time.monotonic()
    print(f"scratch: {scratch}; building the tiny project from {args.repo}", flush=True)
    base = build_base(args.repo.resolve(), scratch / "base")
    print(f"built in {time.monotonic() - start:.0f} s; {len(trials)} trials", flush=True)
    started = time.monotonic()
    outcomes = []
    for trial in trials:
        outcome = run_trial(trial, scratch, base)
        outcomes.append(outcome)
        print(f"{outcome.verdict.kind:9} {trial.group}: {trial.name} "
              f"({outcome.seconds:.1f} s)", flush=True)
        if outcome.verdict.kind != "held":
            print("    " + outcome.verdict.note.replace("\n", "\n    "), flush=True)
        else:
            print(f"    {outcome.verdict.note}", flush=True)
    print()
    print("\n".join(table(outcomes, TESTS)))
    print(f"\n{len(outcomes)} trials in {time.monotonic() - started:.0f} s "
          f"({time.monotonic() - start:.0f} s with the build) "
          f"(command: python benchmarks/fault_campaign.py {' '.join(argv or sys.argv[1:])})")
    bad = [o for o in outcomes if o.verdict.kind in {"silent", "stuck", "traceback"}]
    if not bad:
        shutil.rmtree(scratch / "base", ignore_errors=True)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
