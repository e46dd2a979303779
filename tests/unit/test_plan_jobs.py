"""benchmarks/plan_jobs.py: the jobs of a dry run, normalised and compared by hand."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO / "benchmarks") not in sys.path:
    sys.path.insert(0, str(REPO / "benchmarks"))

import plan_jobs as PJ  # noqa: E402

DRY_RUN = """Building DAG of jobs...
Job stats:
job      count
-----  -------
a            1

[Sat Dec  5 06:27:11 2026]
rule train_s0t0:
    input: results/m.json, /w/src/p.parquet
    output: results/runs/x.parquet
    log: logs/x.log
    jobid: 7
    benchmark: results/b.tsv
    reason: Missing output files: results/runs/x.parquet
    wildcards: experiment=e
    resources: tmpdir=/tmp, mem_mb=2000, gpu=0
Shell command: /py/bin/python3 -m pflrepro --require-source /w/src train --spec '{"code":"ab12"}'

[Sat Dec  5 06:27:11 2026]
localcheckpoint tune_select:
    output: results/tuning/e/m.json
    jobid: 9
Shell command: /py/bin/python3 -m pflrepro tune-select
This was a dry-run (flag -n).
"""


def test_a_dry_run_parses_into_its_jobs() -> None:
    jobs = PJ.parse_dry_run(DRY_RUN)
    assert [j["rule"] for j in jobs] == ["train_s0t0", "tune_select"]
    assert jobs[0] == {
        "rule": "train_s0t0", "input": "results/m.json, /w/src/p.parquet",
        "output": "results/runs/x.parquet", "log": "logs/x.log",
        "benchmark": "results/b.tsv", "wildcards": "experiment=e",
        "resources": "tmpdir=/tmp, mem_mb=2000, gpu=0",
        "shell": "/py/bin/python3 -m pflrepro --require-source /w/src train --spec "
                 "'{\"code\":\"ab12\"}'"}
    assert jobs[1] == {"rule": "tune_select", "output": "results/tuning/e/m.json",
                       "shell": "/py/bin/python3 -m pflrepro tune-select"}


def test_two_copies_compare_on_their_jobs_alone() -> None:
    here = PJ.normalise(PJ.parse_dry_run(DRY_RUN), "/w", "/py/bin/python3")
    moved = DRY_RUN.replace("/w/", "/elsewhere/").replace("mem_mb=2000, gpu=0",
                                                           "gpu=0, mem_mb=2000")
    there = PJ.normalise(PJ.parse_dry_run(moved), "/elsewhere", "/py/bin/python3")
    assert here == there  # another root, resources in another order
    assert here[0]["shell"].startswith("<python> -m pflrepro --require-source <root>/src")
    assert here[0]["input"] == "<root>/src/p.parquet, results/m.json"  # a set: sorted
    lines = PJ.compare(here, there)
    assert lines[-1] == "identical"
    assert lines[0].split() == ["train_s0t0", "1", "1"]
    changed = PJ.normalise(PJ.parse_dry_run(DRY_RUN.replace("--spec", "--specs")), "/w",
                           "/py/bin/python3")
    lines = PJ.compare(here, changed)
    assert lines[-1] == "DIFFERENT"
    assert sum(line.startswith("only before: ") for line in lines) == 1
    assert sum(line.startswith("only after: ") for line in lines) == 1
    # a method's code digest (another helper's algorithm edit) is masked on request
    digest = DRY_RUN.replace("ab12", "cd34")
    assert PJ.normalise(PJ.parse_dry_run(digest), "/w", "/py/bin/python3") != here
    assert (PJ.normalise(PJ.parse_dry_run(digest), "/w", "/py/bin/python3", mask_code=True)
            == PJ.normalise(PJ.parse_dry_run(DRY_RUN), "/w", "/py/bin/python3",
                            mask_code=True))
