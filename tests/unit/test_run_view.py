"""The whole-run view: Snakemake's log read back, stages, runs and time left, the loop.

(pflrepro.inspect.run_log, pflrepro.inspect.run_view, pflrepro.inspect.watch)
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from pflrepro.inspect.plan import PlannedJob
from pflrepro.inspect.run_log import latest_run_log, parse_run_log
from pflrepro.inspect.run_view import (
    estimate,
    parse_duration,
    stage_of,
    view_jobs,
)
from pflrepro.inspect.watch import snakemake_args, watch

RUN = "results/runs/demo_e/p/fedavg/split{s}-seed{t}.parquet"
TUNE = "results/tuning/demo_e/runs/p/prox/mu0.1/split0-seed{t}.parquet"
TUNE_LOG = "logs/tuning/demo_e/runs/p/prox/mu0.1/split0-seed{t}.log"
# A run on 2 cores: prepare_data took 10 s, a partition 20 s, a training job of two
# runs 40 s; a tuning job of two runs started at 0:00:40 and runs; a table job failed.
LOG = f"""\
  Command: /venv/bin/snakemake --profile profiles/demo
Building DAG of jobs...
Provided cores: 2
Job stats:
job                count
---------------  -------
prepare_data           1
partition              2
train_s0t0_s0t1        2
tune_train_x           1
table                  2
all                    1
total                  9

Select jobs to execute...
[Fri Dec  4 10:00:00 2026]
localrule prepare_data:
    output: results/data/digits/meta.json
    jobid: 1
    wildcards: dataset=digits
[Fri Dec  4 10:00:10 2026]
Finished jobid: 1 (Rule: prepare_data)
1 of 9 steps (11%) done
[Fri Dec  4 10:00:10 2026]
rule partition:
    output: results/partitions/digits/p/split0.parquet
    jobid: 2
[Fri Dec  4 10:00:30 2026]
Finished jobid: 2 (Rule: partition)
2 of 9 steps (22%) done
[Fri Dec  4 10:00:00 2026]
rule train_s0t0_s0t1:
    output: {RUN.format(s=0, t=0)}, {RUN.format(s=0, t=1)}
    log: logs/train/demo_e/p/fedavg/runs-s0t0_s0t1.log
    jobid: 3
    wildcards: experiment=demo_e, partition=p, method=fedavg
[Fri Dec  4 10:00:40 2026]
Finished jobid: 3 (Rule: train_s0t0_s0t1)
3 of 9 steps (33%) done
[Fri Dec  4 10:00:40 2026]
rule tune_train_x:
    output: {TUNE.format(t=0)}, {TUNE.format(t=1)}
    log: logs/tuning/demo_e/runs/p/prox/runs-2runs.log, {TUNE_LOG.format(t=0)}, \
{TUNE_LOG.format(t=1)}
    jobid: 4
    wildcards: experiment=demo_e, partition=p, method=prox
[Fri Dec  4 10:00:41 2026]
rule table:
    output: results/tables/demo_e.md
    jobid: 5
[Fri Dec  4 10:00:45 2026]
Error in rule table:
    jobid: 5
"""


def test_the_log_of_a_run_is_read_back() -> None:
    log = parse_run_log(LOG)
    assert log.command[1:] == ["--profile", "profiles/demo"]
    assert snakemake_args(log.command) == ["--profile", "profiles/demo"]
    assert log.cores == 2 and not log.ended
    assert log.planned == {"prepare_data": 1, "partition": 2, "train_s0t0_s0t1": 2,
                           "tune_train_x": 1, "table": 2}  # the target rule is no work
    assert (log.steps_done, log.steps_total) == (3, 9)
    assert [j.rule for j in log.jobs.values()] == ["prepare_data", "partition",
                                                   "train_s0t0_s0t1", "tune_train_x", "table"]
    assert log.jobs["4"].logs[1:] == [TUNE_LOG.format(t=0), TUNE_LOG.format(t=1)]
    assert log.jobs["5"].failed and log.jobs["3"].finished is not None
    assert parse_run_log(LOG + "Complete log(s): x.log\n").ended


def test_stages_come_from_outputs_then_rule_names() -> None:
    assert stage_of("anything", [RUN.format(s=0, t=0)]) == "training"
    assert stage_of("anything", [TUNE.format(t=0)]) == "tuning"
    assert [stage_of(r) for r in ("train_demo_e_s0t0", "tune_split", "public_set",
                                  "partition_stats", "aggregate_method", "plot_weights")] == [
        "training", "tuning", "data", "partitions", "aggregates", "tables/figures"]


def test_time_left_is_each_stage_at_its_measured_pace(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    jobs = view_jobs(parse_run_log(LOG))
    states = {(j.rule, j.state) for j in jobs}
    assert ("tune_train_x", "running") in states and ("table", "failed") in states
    left = [(j.rule, j.runs) for j in jobs if j.state == "left"]
    # planned less started: a partition, a training job of 2 runs (as the one seen), a table
    assert sorted(left) == [("partition", 0), ("table", 0), ("train_s0t0_s0t1", 2)]
    est = estimate(jobs, 2, elapsed=lambda job: 15.0)
    # partition 20 s; training 2 runs x 20 s a run; the table at the mean of the finished
    # jobs, (10 + 20 + 40) / 3; the running tuning job 2 x 20 s less its 15 s so far
    work = 20 + 2 * 20 + 70 / 3 + (40 - 15)
    assert (est.work_s, est.wall_s) == (pytest.approx(work), pytest.approx(work / 2))
    assert (est.measured, est.guessed) == (3, 1)
    # once a run of the running job logs a progress line, that run costs what it says
    Path(TUNE_LOG.format(t=0)).parent.mkdir(parents=True)
    Path(TUNE_LOG.format(t=0)).write_text("x INFO p: round 3/10: mean acc 0.5, elapsed "
                                          "3.0s, left ~0:00:30\n")
    est = estimate(jobs, 2, elapsed=lambda job: 15.0)
    assert est.work_s == pytest.approx(20 + 40 + 70 / 3 + (30 + 20))
    assert parse_duration("1:02:03") == 3723 and parse_duration("4.5s") == 4.5


def test_the_plan_says_which_jobs_are_left_and_their_runs() -> None:
    plan = [PlannedJob("tune_train_x", outputs=[TUNE.format(t=0), TUNE.format(t=1)]),
            PlannedJob("train_s0t0_s0t1", outputs=[RUN.format(s=1, t=0), RUN.format(s=1, t=1),
                                                   RUN.format(s=1, t=2)])]
    jobs = view_jobs(parse_run_log(LOG), plan)
    assert [(j.rule, j.runs) for j in jobs if j.state == "left"] == [("train_s0t0_s0t1", 3)]


def _workdir(tmp_path: Path, text: str, locked: bool) -> Path:
    (tmp_path / ".snakemake/log").mkdir(parents=True)
    (tmp_path / ".snakemake/locks").mkdir()
    (tmp_path / ".snakemake/log/2026-12-04T100000.1.snakemake.log").write_text(text)
    if locked:
        (tmp_path / ".snakemake/locks/0.input.lock").write_text("x")
    return tmp_path


def test_watching_an_ended_run_renders_it_once_and_ends_with_one_line(tmp_path: Path) -> None:
    wd = _workdir(tmp_path, LOG + "Complete log(s): x.log\n", locked=False)
    out = io.StringIO()
    watch(wd, interval=0.01, use_plan=False, out=out)
    text = out.getvalue()
    assert "Snakemake run ended" in text and "time left" not in text
    rows = {line.split()[0]: line.split()[1:] for line in text.splitlines()
            if line.startswith("  ") and len(line.split()) == 5}
    # done, running, failed, left; the tuning job cut off by the end counts as left
    assert rows["training"] == ["1", "0", "0", "1"] and rows["tuning"] == ["0", "0", "0", "1"]
    assert rows["total"] == ["3", "0", "1", "4"]
    assert "training runs: 2 done, 2 left\ntuning runs: 0 done, 2 left\n" in text
    assert text.strip().splitlines()[-1] == (
        "the run ended: 3 of 8 job(s) done, 1 failed (log: "
        f"{wd}/.snakemake/log/2026-12-04T100000.1.snakemake.log)")


def test_ctrl_c_stops_watching_with_one_line(tmp_path: Path) -> None:
    wd = _workdir(tmp_path, LOG, locked=True)
    out = io.StringIO()

    def interrupt(seconds: float) -> None:
        raise KeyboardInterrupt

    watch(wd, interval=5.0, use_plan=False, out=out, sleep=interrupt)
    text = out.getvalue()
    assert "Snakemake run in progress" in text and "running:\n  tune_train_x demo_e/prox" in text
    assert text.endswith("\nstopped watching; the run goes on (pflrepro status --watch to "
                         "resume)\n")
    assert latest_run_log(tmp_path / "nowhere") is None
    with pytest.raises(ValueError, match="no Snakemake run log"):
        watch(tmp_path / "nowhere", interval=None, use_plan=False, out=out)
