"""The tuning stage end to end (workflow/rules/tune.smk, pflrepro.tuning).

A tiny FedAMP grid on digits: the tuning runs, the selection, and the final runs that
read it. A changed grid reruns the tuning and then only the final runs whose selected
value changed; a changed tuning budget that selects the same value reruns no final run.

Tier ``workflow_full`` (``pytest -m workflow_full``; ``.ci/run`` runs it, plain ``pytest``
deselects it): this file builds tiny projects of its own.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
from _wf import new_workdir, planned_jobs, snakemake

from pflrepro.store.io import digest_path

pytestmark = [pytest.mark.workflow, pytest.mark.workflow_full]

PART = ("practical-clients4-test_fraction0.2-max_samples400-groups2-dominant_share0.8-"
        "samples_per_client0")
RUN = "results/runs/tiny/" + PART + "/{method}/split0-seed0.parquet"
TUNE_RUN = "results/tuning/tiny/runs/" + PART + "/fedamp/{point}/split0-seed0.parquet"
SELECTION = "results/tuning/tiny/fedamp.json"
#: The tables built from the runs: each says how FedAMP's values were chosen.
TABLES = ["results/tables/tiny.md", "results/tables/tiny-communication.md",
          "results/tables/tiny-cost.md", "results/tables/t_tiny-paper.md"]
TARGETS = [RUN.format(method="fedavg"), RUN.format(method="fedamp"),
           "results/tuning/tiny/fedamp.md", "results/tuning/tiny/fedamp.csv",
           "figures/tiny-tuning-fedamp.png", "figures/tiny-accuracy.png", *TABLES]
#: A numbers file of one cell, FedAMP's in `tiny` (the paper-vs-ours table t_tiny).
NUMBERS = """id,paper,table,table_id,setting,paper_method,quantity,value,unit,where,\
metric,experiment,partition,method,cpu_experiment,cpu_partition,planned,note
tiny-fedamp,FedAMP,Table 1,t_tiny,digits,FedAMP,accuracy,,%,nowhere,mean_bmta,tiny,,fedamp,,,\
false,
"""


def _config(grid: list[float], rounds: int) -> dict:
    return {
        "training": {"rounds": 3, "batch_size": 32, "local_epochs": 1, "optimizer": "sgd",
                     "lr": 0.05, "eval_every": 1, "model": "mlp",
                     "model_options": {"hidden": [16]}, "device": "cpu"},
        "methods": {"fedavg": {"algorithm": "fedavg"}, "fedamp": {"algorithm": "fedamp"}},
        "experiments": {"tiny": {
            "dataset": "digits",
            "partitions": [{"scheme": "practical", "clients": 4, "groups": 2,
                            "max_samples": 400}],
            "methods": ["fedavg", "fedamp"], "split_seeds": [0], "train_seeds": [0],
            "figures": ["accuracy"], "resources": {"gpu": 0, "mem_mb": 1000, "runtime": 5},
            "tune": {"rounds": rounds, "seeds": [0],
                     "methods": {"fedamp": {"sigma": grid}}}}}}


def _build(wd: Path, grid: list[float], rounds: int) -> dict[str, float]:
    """Write the config, build the targets, return every result file's mtime."""
    import yaml

    (wd / "config.yaml").write_text(yaml.safe_dump(_config(grid, rounds)))
    (wd / "config/paper_numbers.csv").write_text(NUMBERS)
    snakemake(wd, *TARGETS)
    return {str(p.relative_to(wd)): p.stat().st_mtime_ns
            for p in (wd / "results").rglob("*.parquet")}


def _sigma(wd: Path, method: str = "fedamp") -> float:
    frame = pd.read_parquet(wd / RUN.format(method=method))
    return json.loads(frame["params"].iloc[0])["sigma"]


def _check_report(wd: Path) -> None:
    """`snakemake --report`: the tuning figure beside the experiment, with its caption."""
    import re
    import zipfile

    snakemake(wd, "--report", "report.zip", *TARGETS)
    with zipfile.ZipFile(wd / "report.zip") as zf:
        page = zf.read(next(n for n in zf.namelist() if n.endswith("report.html"))).decode()
    data = {}
    for key in ("categories", "results"):
        m = re.search(rf"^\s*var {key} = (\{{.*\}});\s*$", page, re.MULTILINE)
        assert m, f"no {key} in the report page"
        data[key] = json.loads(m.group(1))
    # beside the experiment's other figures: category = its paper, subcategory = it
    shown = data["categories"]["Other experiments"]["tiny"]
    assert any(p.endswith("figures/tiny-tuning-fedamp.png") for p in shown)
    assert any(p.endswith("figures/tiny-accuracy.png") for p in shown)
    entry = next(r for p, r in data["results"].items() if p.endswith("tiny-tuning-fedamp.png"))
    assert "Tuning of fedamp: mean validation accuracy" in entry["caption"]


def _check_rerun_plans_nothing(wd: Path) -> None:
    """A second run plans no job; a deleted figure reruns its plot job alone.

    The train and table jobs read the selection of a checkpoint: before Snakemake knows
    whether that checkpoint reruns, they must not count as changed, or the aggregates,
    tables and figures below them would rerun on every invocation.
    """
    again = snakemake(wd, "-n", *TARGETS)
    assert planned_jobs(again) == [], planned_jobs(again)
    assert "Nothing to be done" in again.stdout + again.stderr
    (wd / "figures/tiny-accuracy.png").unlink()
    plan = snakemake(wd, "-n", *TARGETS)
    assert [rule for rule, _ in planned_jobs(plan)] == ["plot_accuracy"], planned_jobs(plan)
    snakemake(wd, "figures/tiny-accuracy.png")


def test_changed_grid_reruns_only_what_it_must(tmp_path: Path) -> None:
    wd = new_workdir(tmp_path / "wd", _config([1e-5], 2))
    first = _build(wd, [1e-5], 2)
    # a one-value grid selects that value, and the final FedAMP run trains with it
    assert _sigma(wd) == 1e-5
    selection = json.loads((wd / SELECTION).read_text())
    assert selection[PART]["0"]["point"] == {"sigma": 1e-5}
    assert selection[PART]["0"]["params"] == {"sigma": 1e-5, "alpha": 2.5e-6, "lam": 2.5e-6}
    md = (wd / "results/tuning/tiny/fedamp.md").read_text()
    assert "sigma chosen on validation from {1e-05}" in md
    # every table of its runs (results, communication, cost, paper-vs-ours) says once,
    # briefly, which sigma FedAMP's runs used and where the tuning table is; FedAvg is
    # not tuned
    note = (f"FedAMP: chosen on validation, {PART}: sigma=1e-05 "
            "(every value tried: results/tuning/tiny/fedamp.md).")
    for table in TABLES:
        text = (wd / table).read_text()
        assert text.count(note) == 1, table
        assert "FedAvg: " not in text and "fedavg: " not in text, table
    _check_rerun_plans_nothing(wd)
    _check_report(wd)

    # a second value: its tuning run only (the first value's is kept), FedAvg's run kept,
    # and the FedAMP final run reruns exactly when the selection changed
    second = _build(wd, [1e-5, 1e-2], 2)
    chosen = json.loads((wd / SELECTION).read_text())[PART]["0"]["point"]["sigma"]
    assert _sigma(wd) == chosen
    assert TUNE_RUN.format(point="sigma0.01") in second
    assert second[TUNE_RUN.format(point="sigma1e-05")] == first[TUNE_RUN.format(point="sigma1e-05")]
    assert second[RUN.format(method="fedavg")] == first[RUN.format(method="fedavg")]
    assert (second[RUN.format(method="fedamp")] != first[RUN.format(method="fedamp")]) == \
        (chosen != 1e-5)

    # only 1e-2 left: selected, so the final FedAMP run trains with it
    third = _build(wd, [1e-2], 2)
    assert _sigma(wd) == 1e-2
    assert (third[RUN.format(method="fedamp")] != second[RUN.format(method="fedamp")]) == \
        (chosen != 1e-2)

    # another budget that selects the same value: the tuning reruns, no final run does
    fourth = _build(wd, [1e-2], 1)
    assert fourth[TUNE_RUN.format(point="sigma0.01")] != third[TUNE_RUN.format(point="sigma0.01")]
    assert fourth[RUN.format(method="fedamp")] == third[RUN.format(method="fedamp")]
    assert fourth[RUN.format(method="fedavg")] == third[RUN.format(method="fedavg")]


def test_tuning_runs_sharing_a_job_have_the_bytes_of_runs_trained_alone(tmp_path: Path) -> None:
    # runs_per_job 'all': both grid points of FedAMP on the partition in one job (a
    # tune_train_<runs> rule), each run with the table, digest and log it has when trained
    # alone, so the selection and the tuning table are the same bytes too
    targets = [SELECTION, "results/tuning/tiny/fedamp.csv", "results/tuning/tiny/fedamp.md"]
    points = ["sigma1e-05", "sigma0.01"]
    config = _config([1e-5, 1e-2], 2)
    alone = new_workdir(tmp_path / "alone", config)
    rules = Counter(r for r, _ in planned_jobs(snakemake(alone, "-n", *targets)))
    assert rules["tune_train"] == 2, rules
    snakemake(alone, *targets)
    config["runs_per_job"] = {"paper": "all"}
    shared = new_workdir(tmp_path / "shared", config)
    # before any tuning: the final FedAMP runs' job (train_<runs>, which reads the
    # selection) is planned and its command printed, though its params wait for the
    # checkpoint
    plan = snakemake(shared, "-n", "-p", RUN.format(method="fedamp"))
    final = Counter(r for r, _ in planned_jobs(plan))
    assert "checkpoint tune_select:" in plan.stdout + plan.stderr
    assert any(r.startswith("train_") for r in final), final
    rules = Counter(r for r, _ in planned_jobs(snakemake(shared, "-n", *targets)))
    batch = [r for r in rules if r.startswith("tune_train_fedamp_runs1to2of2")]
    assert "tune_train" not in rules and len(batch) == 1 and rules[batch[0]] == 1, rules
    snakemake(shared, *targets)
    for target in targets:
        assert (shared / target).read_bytes() == (alone / target).read_bytes(), target
    for point in points:
        run = TUNE_RUN.format(point=point)
        assert (shared / run).read_bytes() == (alone / run).read_bytes(), run
        assert digest_path(shared / run).read_bytes() == digest_path(alone / run).read_bytes()
        log = run.replace("results/tuning/tiny/runs", "logs/tuning/tiny/runs")
        log = shared / log.replace(".parquet", ".log")
        assert log.read_text().count(" rounds in ") == 1, log
    job_logs = list((shared / "logs/tuning/tiny/runs" / PART / "fedamp").glob("runs-2runs-*.log"))
    assert len(job_logs) == 1
    bench = list((shared / "results/benchmarks/tuning/tiny" / PART / "fedamp").glob("runs-*.tsv"))
    assert len(bench) == 1
    again = snakemake(shared, "-n", *targets)
    assert "Nothing to be done" in again.stdout + again.stderr
