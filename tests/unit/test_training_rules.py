"""The training rules, one family (pflrepro.pipeline.workflow.training_rules).

A tuning run is a training run on validation rows; one run or several per job. The
commands are the rules' record (Snakemake reruns a job whose rule's command text
changes), so each kind's text is checked word for word.
"""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import yaml

import pflrepro.pipeline.workflow as W
from pflrepro.config import parse
from pflrepro.pipeline.workflow.training_rules import (
    CLI,
    TrainingRule,
    train_command,
    training_rules,
)

REPO = Path(__file__).resolve().parents[2]
PREFIX = "{params.python:q} -m pflrepro --require-source {params.source:q}"


def _raw(**top: object) -> dict:
    """The tiny config with FedAMP tuned on a 2 x 2 grid (two seeds), and ``top``."""
    raw = yaml.safe_load((REPO / "tests/workflow/config.yaml").read_text())
    raw["methods"]["fedamp"] = {"algorithm": "fedamp"}
    tiny = raw["experiments"]["tiny"]
    tiny.update(split_seeds=[0, 1], train_seeds=[0])
    tiny["methods"] = [*tiny["methods"], "fedamp"]
    tiny["tune"] = {"rounds": 1, "seeds": [0, 1],
                    "methods": {"fedamp": {"sigma": [1e-5, 1e-3], "prox": [0.1, 1]}}}
    return {**raw, **top}


def test_the_four_commands_are_the_rules_text_word_for_word() -> None:
    assert CLI == PREFIX
    assert train_command(tuning=False, several=False) == (
        PREFIX + " train --spec {params.spec:q} --data {input.meta:q} --partition "
        "{input.partition:q} --checkpoint {output:q}.ckpt {params.public:q} --threads "
        "{threads:q} --progress-table --out {output:q} > {log:q} 2>&1")
    assert train_command(tuning=False, several=True) == (
        PREFIX + " train --spec {params.spec:q} --data {input.meta:q} --partition "
        "{params.partitions:q} --checkpoint {params.checkpoints:q} --log {params.logs:q} "
        "{params.public:q} --threads {threads:q} --progress-table --out {output:q} "
        "> {log.job:q} 2>&1")
    # a tuning run: no checkpoint, no progress table
    assert train_command(tuning=True, several=False) == (
        PREFIX + " train --spec {params.spec:q} --data {input.meta:q} --partition "
        "{input.partition:q} {params.public:q} --threads {threads:q} --out {output:q} "
        "> {log:q} 2>&1")
    assert train_command(tuning=True, several=True) == (
        PREFIX + " train --spec {params.spec:q} --data {input.meta:q} --partition "
        "{params.partitions:q} --log {params.logs:q} {params.public:q} --threads "
        "{threads:q} --out {output:q} > {log.job:q} 2>&1")


def test_one_run_per_job_at_paper_scale() -> None:
    raw = _raw()
    rules = training_rules(parse(raw), raw)
    assert [(r.name, r.tuning, r.several) for r in rules] == [
        ("train", False, False), ("tune_train", True, False)]
    train, tune = rules
    assert train.outputs == [W.RUN] and tune.outputs == [W.TUNE_RUN]
    assert train.logs == {"job": W.TRAIN_LOG} and tune.logs == {"job": W.TUNE_LOG}
    assert (train.benchmark, tune.benchmark) == (W.BENCHMARK, W.TUNE_BENCHMARK)
    assert train.wildcard_constraints == {"experiment": W.alternation(["tiny"])}
    assert tune.shell == train_command(True, False)
    wildcards = SimpleNamespace(experiment="tiny", split="1", seed="0")
    assert train.runs(wildcards) == [wildcards]  # the job's own run


def test_several_runs_per_job_name_each_runs_files() -> None:
    raw = _raw(runs_per_job={"paper": "all"})
    rules = training_rules(parse(raw), raw)
    assert [r.name for r in rules] == ["train", "train_s0t0_s1t0", "tune_train",
                                       "tune_train_fedamp_runs1to16of16"]
    train, batch, tune, tune_batch = rules
    assert train.experiments == () and tune.experiments == ()  # no experiment left to them
    assert batch.members == ((None, 0, 0), (None, 1, 0)) and batch.label == "s0t0_s1t0"
    run = "results/runs/{experiment}/{partition}/{method}"
    assert batch.outputs == [f"{run}/split0-seed0.parquet", f"{run}/split1-seed0.parquet"]
    log = "logs/train/{experiment}/{partition}/{method}"
    assert batch.logs == {"job": f"{log}/runs-s0t0_s1t0.log",
                          "runs": [f"{log}/split0-seed0.log", f"{log}/split1-seed0.log"]}
    assert batch.benchmark == \
        "results/benchmarks/train/{experiment}/{partition}/{method}/runs-s0t0_s1t0.tsv"
    # 2 splits x 4 grid points x 2 tuning seeds; the method is fixed, not a wildcard
    assert len(tune_batch.members) == 16 and tune_batch.method == "fedamp"
    assert tune_batch.outputs[0] == ("results/tuning/{experiment}/runs/{partition}/{method}/"
                                     "sigma1e-05_prox0.1/split0-seed0.parquet")
    assert tune_batch.logs["job"] == ("logs/tuning/{experiment}/runs/{partition}/{method}/"
                                      f"runs-{tune_batch.label}.log")
    assert tune_batch.wildcard_constraints == {"experiment": W.alternation(["tiny"]),
                                               "method": W.alternation(["fedamp"])}
    wildcards = SimpleNamespace(experiment="tiny", partition="p", method="fedamp")
    first = tune_batch.runs(wildcards)[0]
    assert (first.point, first.split, first.seed) == ("sigma1e-05_prox0.1", "0", "0")
    assert vars(batch.runs(wildcards)[1]) == {"experiment": "tiny", "partition": "p",
                                              "method": "fedamp", "split": "1", "seed": "0"}


def test_a_rule_of_several_runs_is_its_members() -> None:
    rule = TrainingRule("x", False, ("e",), members=((None, 3, 4),), label="s3t4")
    assert rule.several and rule.outputs == [
        "results/runs/{experiment}/{partition}/{method}/split3-seed4.parquet"]
    assert not TrainingRule("train", False, ("e",)).several


def _training_block() -> list[str]:
    text = (REPO / "workflow/rules/common.smk").read_text()
    block = text[text.index("def training_rule(job):"):]
    return [line.strip() for line in block.splitlines()]


def test_the_one_training_rule_block_keeps_log_benchmark_and_resources() -> None:
    lines = _training_block()
    for directive in ("log:", "benchmark:", "resources:", "threads: 1", "conda:", "shell:"):
        assert directive in lines, directive
    assert "localrule: True" not in lines  # training is what a cluster runs
    assert "job.shell" in lines  # the command of the rule's kind, from the package
    # the rule is made in a function: the shell expression is read again when a job
    # runs, where a loop's variable would hold its last value
    text = (REPO / "workflow/rules/train.smk").read_text()
    assert re.search(r"^for _job in P\.training_rules:\n    training_rule\(_job\)$", text, re.M)
