"""``pflrepro plan``: a dry run's jobs read back and summed up (pflrepro.inspect.plan)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from pflrepro.cli import build_parser
from pflrepro.config import parse
from pflrepro.inspect.plan import (
    RUN_PATH,
    changed_params,
    error_line,
    parse_dry_run,
    projected_hours,
    summary,
)
from pflrepro.pipeline.plan_cost import CONFIG_ENV, Device, export_config, plan_cost
from pflrepro.reporting import flops as F

P = "practical-clients8"  # a partition id
RUN = "results/runs/demo_e/" + P + "/{m}/split{s}-seed{t}.parquet"
TUNE = "results/tuning/demo_e/runs/" + P + "/{m}/lr0.1/split{s}-seed{t}.parquet"
# One job of every family of training rule: `train`, a batch `train_<runs>` (both
# namings), `tune_train`, a batch `tune_train_<runs>` (both namings); the runs are
# found from the outputs, whatever the rule's name.
DRY_RUN = f"""\
Building DAG of jobs...
Job stats:
job      count
-----  -------
train        3
total        5

[Fri Dec  4 15:47:40 2026]
rule train:
    input: results/partitions/digits/p/split0.parquet
    output: {RUN.format(m="prox", s=0, t=0)}
    jobid: 1
    reason: Code has changed since last execution; Params have changed since last execution
    wildcards: experiment=demo_e, dataset=digits, partition={P}, method=prox, split=0, seed=0
[Fri Dec  4 15:47:40 2026]
rule train_s0t0_s0t1:
    output: {RUN.format(m="local", s=0, t=0)}, {RUN.format(m="local", s=0, t=1)}
    log: logs/train/demo_e/{P}/local/runs-s0t0_s0t1.log
    reason: Missing output files: {RUN.format(m="local", s=0, t=0)}
    wildcards: experiment=demo_e, partition={P}, method=local
[Fri Dec  4 15:47:40 2026]
rule train_demo_e_local_s1t0_s1t1:
    output: {RUN.format(m="local", s=1, t=0)}, {RUN.format(m="local", s=1, t=1)}
    reason: Missing output files: {RUN.format(m="local", s=1, t=1)}
    wildcards: experiment=demo_e, partition={P}, method=local
[Fri Dec  4 15:47:40 2026]
localrule prepare_data:
    output: results/data/digits/meta.json
    reason: Missing output files: results/data/digits/meta.json
    wildcards: dataset=digits
[Fri Dec  4 15:47:40 2026]
rule tune_train:
    output: {TUNE.format(m="prox", s=0, t=0)}
    reason: Missing output files: {TUNE.format(m="prox", s=0, t=0)}; Input files updated by \
another job: a
    wildcards: experiment=demo_e, partition={P}, method=prox, point=lr0.1, split=0, seed=0
[Fri Dec  4 15:47:40 2026]
rule tune_train_12runs_39ed97246b:
    output: {TUNE.format(m="prox", s=1, t=0)}, {TUNE.format(m="prox", s=1, t=1)}
    reason: Missing output files: {TUNE.format(m="prox", s=1, t=0)}
    wildcards: experiment=demo_e, partition={P}, method=prox
[Fri Dec  4 15:47:40 2026]
rule tune_train_demo_e_prox_runs3to4of4:
    output: {TUNE.format(m="prox", s=2, t=0)}, {TUNE.format(m="prox", s=2, t=1)}
    reason: Missing output files: {TUNE.format(m="prox", s=2, t=0)}
    wildcards: experiment=demo_e, partition={P}, method=prox
[Fri Dec  4 15:47:40 2026]
localrule all:
    input: results/tables/demo_e.md
    reason: Input files updated by another job: results/tables/demo_e.md
Job stats:
job      count
"""

HIDDEN = 16


def _config(**tune: object) -> object:
    """An experiment on digits (8 x 8 pixels, 10 classes) with a one-hidden-layer MLP."""
    return parse({
        "methods": {"prox": {"algorithm": "fedprox"}, "local": {"algorithm": "local"}},
        "experiments": {"demo_e": {
            "description": "d", "dataset": "digits",
            "partitions": [{"scheme": "iid", "clients": 8, "max_samples": 1000}],
            "methods": ["prox", "local"], "split_seeds": [0, 1], "train_seeds": [0, 1],
            "training": {"rounds": 4, "eval_every": 2, "batch_size": 10, "model": "mlp",
                         "model_options": {"hidden": [HIDDEN]}, "device": "cpu"},
            **({"tune": tune} if tune else {})}}})


def test_the_runs_of_every_training_rule_family_are_counted() -> None:
    jobs = parse_dry_run(DRY_RUN)
    assert [j.rule for j in jobs] == ["train", "train_s0t0_s0t1", "train_demo_e_local_s1t0_s1t1",
                                      "prepare_data", "tune_train",
                                      "tune_train_12runs_39ed97246b",
                                      "tune_train_demo_e_prox_runs3to4of4"]
    assert jobs[0].reasons == ["code has changed since last execution",
                               "params have changed since last execution"]
    assert jobs[1].wildcards == {"experiment": "demo_e", "partition": P, "method": "local"}
    assert [j.training_runs for j in jobs] == [1, 2, 2, 0, 0, 0, 0]
    assert [j.tuning_runs for j in jobs] == [0, 0, 0, 0, 1, 2, 2]
    assert jobs[1].runs("train") == [("demo_e", "local")] * 2
    assert jobs[5].runs("tune") == [("demo_e", "prox")] * 2
    # a run's path under another directory (snakemake --directory) is still a run
    assert RUN_PATH.search("/abs/" + RUN.format(m="x", s=3, t=4))["seed"] == "4"
    assert RUN_PATH.search(RUN.format(m="x", s=3, t=4) + ".ckpt") is None


def test_the_summary_counts_papers_experiments_rules_and_reasons() -> None:
    text = summary(parse_dry_run(DRY_RUN))
    assert text.startswith("7 job(s) would run (5 training run(s), 5 tuning run(s)): 6 build "
                           "missing outputs, 1 rebuild stale ones\n")
    rows = {line.split()[0]: line.split()[1:] for line in text.splitlines()
            if line.startswith("  ") and len(line.split()) >= 5}
    assert rows["demo"] == ["6", "5", "5", "0"]  # jobs, training runs, tuning runs, hours
    assert rows["demo_e"] == ["6", "5", "5", "0"]
    assert rows["total"] == ["7", "5", "5", "0"]
    assert "  (no experiment: data, partitions, combined tables)" in text
    assert "  10 run(s) not priced: the workflow's config was not read\n" in text
    assert "  missing output files                      6\n" in text
    assert "  code has changed since last execution     1\n" in text
    assert "projected training time" not in text
    assert summary([]) == "nothing to run: every output is present and up to date\n"


def test_gpu_hours_are_the_counted_flops_at_the_stated_fraction_of_the_peak() -> None:
    # the MLP 64 -> 16 -> 10: forward 2 x (64 x 16 + 16 x 10) = 2368 FLOPs per sample;
    # backward the weight gradients of both layers and the input gradient of the second,
    # 2 x 1024 + 4 x 160 = 2688, so a training step costs 5056 FLOPs per sample
    assert F.model_flops("mlp", F._freeze({"hidden": [HIDDEN]}), (1, 8, 8), 10) == (2368, 5056)
    # a run: 4 rounds x 800 training rows (1000 less 20 % test) x 5056, plus 3 evaluations
    # (rounds 0, 2 and 4) x 1000 rows x 2368
    run = 4 * 800 * 5056 + 3 * 1000 * 2368
    assert run == 23_283_200
    # a tuning run: 2 rounds on 600 rows (800 less the 25 % validation share), evaluated
    # twice (rounds 0 and 2) on the 200 validation rows
    tune = 2 * 600 * 5056 + 2 * 200 * 2368
    assert tune == 7_014_400
    cfg = _config(rounds=2, seeds=[0], fraction=0.25, methods={"prox": {"mu": [0.1, 1.0]}})
    device = Device("a test device", peak_tflops=2.0, efficiency=0.25)  # 5e11 FLOP/s
    cost = plan_cost(parse_dry_run(DRY_RUN), cfg, device)
    expected = (5 * run + 5 * tune) / 5e11 / 3600
    assert cost.experiments["demo_e"].gpu_hours == pytest.approx(expected)
    assert cost.papers["demo"].gpu_hours == pytest.approx(expected)
    assert cost.unpriced == {}
    text = summary(parse_dry_run(DRY_RUN), config=cfg, device=device)
    assert f"tuning run(s): {expected:.3g}\n" in text
    assert "at 25% of the 2 TFLOP/s FP32 (dense) peak of a test device: assumed" in text
    # a run of an experiment the config does not hold is counted, not priced
    other = _config()
    assert "10 run(s) not priced" not in summary(parse_dry_run(DRY_RUN), config=other)
    with pytest.raises(ValueError, match="utilisation"):
        plan_cost(parse_dry_run(DRY_RUN), cfg, Device(efficiency=0.0))


def test_runs_of_an_unknown_experiment_or_data_set_are_left_unpriced() -> None:
    jobs = parse_dry_run(DRY_RUN.replace("demo_e", "demo_x"))
    cost = plan_cost(jobs, _config(), Device())
    assert cost.unpriced == {"demo_x/prox is not in the config read": 6,
                             "demo_x/local is not in the config read": 4}
    assert cost.experiments["demo_x"].training_runs == 5


def test_the_projection_prices_the_planned_training_runs(tmp_path: Path) -> None:
    projection = tmp_path / "cost-projection.csv"
    pd.DataFrame({"experiment": ["demo_e", "demo_e"], "method": ["prox", "local"],
                  "runs": [10, 4], "hours": [5.0, float("nan")], "note": ["", "not measured"]}
                 ).to_csv(projection, index=False)
    jobs = parse_dry_run(DRY_RUN)
    assert projected_hours(jobs, projection) == (pytest.approx(0.5), 1, 4)
    assert ("projected training time of 1 of the 5 run(s): 0.50 h (from "
            f"{projection}; 4 run(s) of experiments or methods it does not price)"
            ) in summary(jobs, projection)
    assert "projected training time" not in summary(jobs, tmp_path / "none.csv")
    pd.DataFrame({"experiment": ["demo_e"]}).to_csv(projection, index=False)
    with pytest.raises(ValueError, match="not a cost projection"):
        projected_hours(jobs, projection)


def test_the_workflow_exports_its_merged_config_only_when_asked(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "config.json"
    monkeypatch.delenv(CONFIG_ENV, raising=False)
    export_config({"scale": "cpu"})
    assert not target.exists()
    monkeypatch.setenv(CONFIG_ENV, str(target))
    export_config({"scale": "cpu", "experiments": {}})
    assert json.loads(target.read_text()) == {"scale": "cpu", "experiments": {}}


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


def test_a_params_change_is_named_by_its_keys() -> None:
    # Snakemake prints each changed param as repr() (ParamsChange.__str__): a training
    # job's spec is a JSON string, a batch job's a list of them
    old = {"experiment": "demo_e", "training": {"rounds": 30, "lr": 0.1}, "hyper": {"mu": 1}}
    new = {"experiment": "demo_e", "training": {"rounds": 40, "lr": 0.1}, "hyper": {"mu": 1}}
    batch_old, batch_new = [json.dumps(old)] * 2, [json.dumps(new), json.dumps(old)]
    reason = ("Code has changed since last execution; Params have changed since last "
              "execution: Union of exclusive params before and now across all output: "
              f"before: {json.dumps(old)!r},{batch_old!r} now: {json.dumps(new)!r},"
              f"{batch_new!r} ")
    assert changed_params(reason) == ["training.rounds"]
    assert changed_params("Missing output files: a.parquet") == []
    text = DRY_RUN.replace("reason: Code has changed since last execution; Params have "
                           "changed since last execution", f"reason: {reason}")
    (job,) = [j for j in parse_dry_run(text) if j.changed]
    assert job.reasons == ["code has changed since last execution",
                           "params have changed since last execution"]
    assert "params changed, by key (jobs):\n  training.rounds  1\n" in summary([job])
