"""The jobs `snakemake -n -p` plans for a workflow copy, as a normalised list to compare.

Each job is (rule, input, output, log, benchmark, wildcards, resources, shell command),
parsed from Snakemake's dry-run printout (its params reach the job only through the shell
command, which names every one of them). The copy's root directory and Snakemake's
interpreter are written as <root> and <python>, so two copies of the workflow in two
directories compare equal when they plan the same jobs. Job ids, dates and reasons are
left out, and the jobs are sorted, so the order Snakemake prints them in does not count.
A job's inputs and resources are compared as sets: Snakemake prints resources in no
fixed order, and it records a job's inputs sorted (its rerun trigger) while the
commands name them one by one (``{input.meta}``), so their order changes no job.

    python benchmarks/plan_jobs.py plan --root /tmp/a --out a.json -- --profile profiles/demo
    python benchmarks/plan_jobs.py compare before.json after.json

`--mask-code` writes every method's code digest ("code":"…" in a run spec) as <code>:
with it, two copies whose algorithm code differs compare on the workflow alone.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys
from pathlib import Path

FIELDS = ("input", "output", "log", "benchmark", "wildcards", "resources")
_FIELD = re.compile(r"^    (\w+): (.*)$")
_CODE = re.compile(r'"code":"[0-9a-f]+"')


def parse_dry_run(text: str) -> list[dict[str, str]]:
    """The jobs of a `snakemake -n -p` printout: one dict per `rule NAME:` block."""
    jobs: list[dict[str, str]] = []
    job: dict[str, str] | None = None
    for line in text.splitlines():
        if line.startswith(("rule ", "checkpoint ", "localrule ", "localcheckpoint ")) \
                and line.endswith(":"):
            job = {"rule": line.split(" ", 1)[1][:-1]}
            jobs.append(job)
        elif job is not None and (found := _FIELD.match(line)) and found[1] in FIELDS:
            job[found[1]] = found[2]
        elif job is not None and line.startswith("Shell command: "):
            job["shell"] = line[len("Shell command: "):]
        elif job is not None and not line.strip():
            job = None
    return jobs


def normalise(jobs: list[dict[str, str]], root: str, python: str,
              mask_code: bool = False) -> list[dict[str, str]]:
    """The jobs with the root and interpreter replaced by placeholders, sorted."""
    out = []
    for job in jobs:
        clean = {}
        for key, value in job.items():
            value = value.replace(python, "<python>").replace(root, "<root>")
            if key in ("input", "resources"):
                value = ", ".join(sorted(value.split(", ")))
            if mask_code:
                value = _CODE.sub('"code":"<code>"', value)
            clean[key] = value
        out.append(clean)
    return sorted(out, key=lambda j: json.dumps(j, sort_keys=True))


def plan(root: Path, snakemake_args: list[str], mask_code: bool) -> list[dict[str, str]]:
    """Run the dry run in `root` with its own src/ on PYTHONPATH; its normalised jobs."""
    env = dict(os.environ, PYTHONPATH=str(root / "src"))
    snakemake = str(Path(sys.executable).with_name("snakemake"))
    done = subprocess.run([snakemake, "-n", "-p", *snakemake_args], cwd=root, env=env,
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"snakemake -n failed in {root}:\n{done.stdout}\n{done.stderr}")
    jobs = parse_dry_run(done.stdout)
    if not jobs:
        raise SystemExit(f"no jobs parsed from the dry run in {root}:\n{done.stdout}")
    python = Path(snakemake).read_text().splitlines()[0].removeprefix("#!").strip()
    return normalise(jobs, str(root), python, mask_code)


def compare(before: list[dict[str, str]], after: list[dict[str, str]]) -> list[str]:
    """Lines saying the jobs per rule of both lists and every job only one of them has."""
    lines = []
    count_a = collections.Counter(j["rule"] for j in before)
    count_b = collections.Counter(j["rule"] for j in after)
    for rule in sorted(count_a.keys() | count_b.keys()):
        mark = "" if count_a[rule] == count_b[rule] else "   <- differs"
        lines.append(f"{rule:40s} {count_a[rule]:6d} {count_b[rule]:6d}{mark}")
    lines.append(f"{'total':40s} {len(before):6d} {len(after):6d}")
    keys_a = collections.Counter(json.dumps(j, sort_keys=True) for j in before)
    keys_b = collections.Counter(json.dumps(j, sort_keys=True) for j in after)
    for key in sorted((keys_a - keys_b).keys()):
        lines.append(f"only before: {key}")
    for key in sorted((keys_b - keys_a).keys()):
        lines.append(f"only after: {key}")
    lines.append("identical" if keys_a == keys_b else "DIFFERENT")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("plan", help="write the dry run's normalised job list")
    run.add_argument("--root", type=Path, required=True, help="the workflow copy")
    run.add_argument("--out", type=Path, required=True, help="JSON list of the jobs")
    run.add_argument("--mask-code", action="store_true", help="write code digests as <code>")
    run.add_argument("snakemake_args", nargs="*", help="after --: Snakemake's arguments")
    cmp = sub.add_parser("compare", help="compare two job lists; exit 1 if they differ")
    cmp.add_argument("before", type=Path)
    cmp.add_argument("after", type=Path)
    args = parser.parse_args(argv)
    if args.command == "plan":
        jobs = plan(args.root.resolve(), args.snakemake_args, args.mask_code)
        tmp = args.out.with_name(args.out.name + ".tmp")
        tmp.write_text(json.dumps(jobs, indent=1, sort_keys=True) + "\n")
        os.replace(tmp, args.out)
        print(f"{len(jobs)} jobs -> {args.out}")
        return 0
    lines = compare(json.loads(args.before.read_text()), json.loads(args.after.read_text()))
    print("\n".join(lines))
    return 0 if lines[-1] == "identical" else 1


if __name__ == "__main__":
    sys.exit(main())
