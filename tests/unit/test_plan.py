"""``pflrepro plan``: a dry run's jobs read back and summed up (pflrepro.pipeline.plan)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from pflrepro.cli import build_parser
from pflrepro.pipeline.plan import error_line, parse_dry_run, projected_hours, summary

DRY_RUN = """\
Building DAG of jobs...
Job stats:
job      count
-----  -------
train        3
total        5

[Fri Dec  4 15:47:40 2026]
rule train:
    input: results/partitions/digits/p/split0.parquet
    output: results/runs/e1/p/fedavg/split0-seed0.parquet
    jobid: 1
    reason: Code has changed since last execution; Params have changed since last execution
    wildcards: experiment=e1, dataset=digits, partition=p, method=fedavg, split=0, seed=0
[Fri Dec  4 15:47:40 2026]
rule train_2:
    output: results/runs/e1/local/s0-seed0.parquet, results/runs/e1/local/s0-seed1.parquet
    reason: Missing output files: results/runs/e1/p/local/split0-seed0.parquet
    wildcards: experiment=e1, partition=p, method=local
[Fri Dec  4 15:47:40 2026]
localrule prepare_data:
    output: results/data/digits/meta.json
    reason: Missing output files: results/data/digits/meta.json
    wildcards: dataset=digits
[Fri Dec  4 15:47:40 2026]
localrule tune_train:
    output: results/tuning/e2/runs/x.parquet
    reason: Missing output files: results/tuning/x.parquet; Input files updated by another job: a
    wildcards: experiment=e2, method=fedavg
[Fri Dec  4 15:47:40 2026]
localrule all:
    input: results/tables/e1.md
    reason: Input files updated by another job: results/tables/e1.md
Job stats:
job      count
"""


def test_the_jobs_of_a_dry_run_are_read_back() -> None:
    jobs = parse_dry_run(DRY_RUN)
    assert [j.rule for j in jobs] == ["train", "train_2", "prepare_data", "tune_train"]
    assert jobs[0].reasons == ["code has changed since last execution",
                               "params have changed since last execution"]
    assert jobs[1].wildcards == {"experiment": "e1", "partition": "p", "method": "local"}
    assert [j.training_runs for j in jobs] == [1, 2, 0, 0]  # tuning runs are not priced


def test_the_summary_counts_rules_experiments_and_reasons() -> None:
    text = summary(parse_dry_run(DRY_RUN))
    assert text.startswith("4 job(s) would run (3 training run(s)): 3 build missing outputs, "
                           "1 rebuild stale ones\n")
    assert "  e1                                         2\n" in text
    assert "  (none: data, partitions, combined tables)  1\n" in text
    assert "  missing output files                      3\n" in text
    assert "  code has changed since last execution     1\n" in text
    assert "projected" not in text
    assert summary([]) == "nothing to run: every output is present and up to date\n"


def test_the_projection_prices_the_planned_training_runs(tmp_path: Path) -> None:
    projection = tmp_path / "cost-projection.csv"
    pd.DataFrame({"experiment": ["e1", "e1"], "method": ["fedavg", "local"], "runs": [10, 4],
                  "hours": [5.0, float("nan")], "note": ["", "not measured"]}
                 ).to_csv(projection, index=False)
    jobs = parse_dry_run(DRY_RUN)
    assert projected_hours(jobs, projection) == (pytest.approx(0.5), 1, 2)
    assert ("projected training time of 1 of the 3 run(s): 0.50 h (from "
            f"{projection}; 2 run(s) of experiments or methods it does not price)"
            ) in summary(jobs, projection)
    assert "projected" not in summary(jobs, tmp_path / "none.csv")
    pd.DataFrame({"experiment": ["e1"]}).to_csv(projection, index=False)
    with pytest.raises(ValueError, match="not a cost projection"):
        projected_hours(jobs, projection)


def test_a_failed_dry_run_says_snakemakes_message() -> None:
    assert error_line('WorkflowError in file "c.smk", line 44:\nInvalid config: x: bad\n'
                      '  File "c.smk", line 44, in <module>\n') == "Invalid config: x: bad"
    assert error_line("InputFunctionException in rule all:\nError:\n  WorkflowError:\n"
                      "    the report is of config.yaml\nWildcards:\n") == \
        "the report is of config.yaml"
    assert error_line("Building DAG of jobs...\nMissingRuleException:\nNo rule to produce x\n") \
        == "No rule to produce x"


def test_the_command_takes_snakemakes_arguments_after_a_double_dash() -> None:
    args = build_parser().parse_args(["plan", "--profile", "profiles/demo", "--", "--config",
                                      "scale=cpu"])
    assert (args.profile, args.snakemake) == ("profiles/demo", ["--", "--config", "scale=cpu"])
