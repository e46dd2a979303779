"""The rules' one adapter object (pflrepro.pipeline.workflow.adapter.Rules).

Built here as common.smk builds it, with stand-ins for Snakemake's workflow and
checkpoints: a checkpoint's selection is a JSON file written by the test.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from snakemake.io import is_flagged

import pflrepro.pipeline.workflow as W
from pflrepro.config import parse
from pflrepro.pipeline.workflow.adapter import Rules, words

REPO = Path(__file__).resolve().parents[2]


def _raw(runs_per_job: object = None, tuned: bool = False) -> dict:
    """The tiny config (public set; 1 split x 2 seeds), FedAMP tuned if ``tuned``."""
    raw = yaml.safe_load((REPO / "tests/workflow/config.yaml").read_text())
    if tuned:
        raw["methods"]["fedamp"] = {"algorithm": "fedamp"}
        tiny = raw["experiments"]["tiny"]
        tiny["methods"] = [*tiny["methods"], "fedamp"]
        tiny["tune"] = {"rounds": 1, "seeds": [0], "methods": {"fedamp": {"sigma": [1e-5]}}}
    if runs_per_job is not None:
        raw["runs_per_job"] = {"paper": runs_per_job}
    return raw


class Checkpoints:
    """Snakemake's ``checkpoints`` with ``tune_select`` done: its selections in ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.asked: list[tuple[str, str]] = []
        self.tune_select = self

    def get(self, experiment: str, method: str) -> SimpleNamespace:
        self.asked.append((experiment, method))
        path = self.root / f"{experiment}-{method}.json"
        return SimpleNamespace(output=SimpleNamespace(selection=str(path)))


def _rules(raw: dict, tmp_path: Path, files: tuple[str, ...] = ()) -> Rules:
    workflow = SimpleNamespace(basedir=str(tmp_path), rules=[])
    return Rules(parse(raw), raw, workflow=workflow, checkpoints=Checkpoints(tmp_path),
                 claims=(), paper_cells=(), config_files=files, python=Path("/py"),
                 source=Path("/src"))


def _job(rules: Rules, name: str):
    (found,) = [r for r in rules.training_rules if r.name == name]
    return found


PID = parse(_raw()).experiments["tiny"].partitions[0].id
RUN = SimpleNamespace(experiment="tiny", partition=PID, method="fedavg", split="0", seed="1")
PARTITION = f"results/partitions/digits/{PID}/split0.parquet"
PUBLIC = f"results/public/digits/{PID}/split0-digits100.parquet"
META = "results/data/digits/meta.json"


def test_a_job_of_one_run_names_its_files(tmp_path: Path) -> None:
    rules = _rules(_raw(), tmp_path)
    train = _job(rules, "train")
    assert rules.run_inputs(train)(RUN) == {"public": PUBLIC, "public_meta": META,
                                           "meta": META, "partition": PARTITION}
    params = rules.run_params(train)
    assert set(params) == {"spec", "public", "python", "source"}
    assert params["python"] == Path("/py") and params["source"] == Path("/src")
    spec = params["spec"](RUN)
    assert isinstance(spec, str) and json.loads(spec)["train_seed"] == 1
    assert params["public"](RUN) == ["--public", PUBLIC, "--public-data", META]
    resources = rules.run_resources(train)
    assert [resources[k](RUN) for k in ("gpu", "mem_mb", "runtime")] == [0, 1000, 5]
    assert rules.run_selections(train)(RUN) == {}  # nothing tuned


def test_a_job_of_several_runs_lists_each_runs_files(tmp_path: Path) -> None:
    rules = _rules(_raw(runs_per_job="all"), tmp_path)
    batch = _job(rules, "train_s0t0_s0t1")
    job = SimpleNamespace(experiment="tiny", partition=PID, method="fedavg")
    assert rules.run_inputs(batch)(job) == {"meta": META, "partition": [PARTITION],
                                           "public": [PUBLIC], "public_meta": META}
    params = rules.run_params(batch)
    specs = params["spec"](job)
    assert [json.loads(s)["train_seed"] for s in specs] == [0, 1]
    assert params["partitions"](job) == [PARTITION, PARTITION]
    assert params["public"](job) == ["--public", PUBLIC, PUBLIC, "--public-data", META]
    log = f"logs/train/tiny/{PID}/fedavg"
    assert params["logs"](job) == [f"{log}/split0-seed0.log", f"{log}/split0-seed1.log"]
    assert params["checkpoints"](job, ["a.parquet", "b.parquet"]) == \
        ["a.parquet.ckpt", "b.parquet.ckpt"]
    # the job's runtime is its runs'
    assert rules.run_resources(batch)["runtime"](job) == 10


def test_a_tuning_run_is_a_training_run_on_its_validation_partition(tmp_path: Path) -> None:
    rules = _rules(_raw(tuned=True), tmp_path)
    tune = _job(rules, "tune_train")
    run = SimpleNamespace(experiment="tiny", partition=PID, method="fedamp", split="0",
                          seed="0", point="sigma1e-05")
    inputs = rules.run_inputs(tune)(run)
    assert inputs["partition"] == f"results/tuning/tiny/partitions/{PID}/split0.parquet"
    assert inputs["meta"] == META and inputs["public"] == PUBLIC
    assert json.loads(rules.run_params(tune)["spec"](run))["params"]["sigma"] == 1e-5
    assert "checkpoints" not in rules.run_params(tune)
    assert rules.run_selections(tune)(run) == {}  # a tuning run reads no selection


def test_a_final_run_of_a_tuned_method_waits_for_and_reads_its_selection(
        tmp_path: Path) -> None:
    rules = _rules(_raw(tuned=True), tmp_path)
    train = _job(rules, "train")
    run = SimpleNamespace(**{**vars(RUN), "method": "fedamp"})
    selection = {PID: {"0": {"point": {"sigma": 0.5}, "params": {"sigma": 0.5}}}}
    (tmp_path / "tiny-fedamp.json").write_text(json.dumps(selection))
    found = rules.run_selections(train)(run)
    assert list(found) == ["tuned_fedamp"]
    assert found["tuned_fedamp"] == str(tmp_path / "tiny-fedamp.json")
    assert is_flagged(found["tuned_fedamp"], "ancient")  # its params rerun a job, not dates
    assert json.loads(rules.run_params(train)["spec"](run))["params"]["sigma"] == 0.5
    assert rules.checkpoints.asked == [("tiny", "fedamp"), ("tiny", "fedamp")]
    # the table's --tuning names the selection; an untuned method reads none
    notes = json.loads(rules.experiment.tuning(SimpleNamespace(experiment="tiny")))
    assert [(n["method"], n["selection"]) for n in notes] == [("fedamp", selection)]
    assert rules.run_selections(train)(RUN) == {}


def test_a_scope_answers_for_its_experiments(tmp_path: Path) -> None:
    raw = _raw()
    raw["tables"] = {"both": {"experiments": ["tiny"], "metric": "mean_bmta"}}
    rules = _rules(raw, tmp_path)
    job = SimpleNamespace(experiment="tiny", table="both")
    for scope in (rules.experiment, rules.table):
        assert scope.methods(job) == ["local", "fedavg", "fedavg_plus", "federico"]
        assert json.loads(scope.labels(job))["experiments"] == {"tiny": "tiny"}
        assert scope.selections(job) == []
    assert rules.table_experiments(job) == ["tiny"]
    assert rules.table_metric(job) == "mean_bmta" and rules.table_caption(job) == ""


def test_targets_and_the_loaded_config(tmp_path: Path) -> None:
    rules = _rules(_raw(), tmp_path, files=(tmp_path / "config.yaml", tmp_path / "my.yaml"))
    assert rules.loaded_config == "my.yaml"
    assert _rules(_raw(), tmp_path).loaded_config == "config.yaml"
    found = rules.all_input(SimpleNamespace())
    assert "results/tables/tiny.md" in found and W.COST_PROJECTION.format(ext="md") in found
    assert rules.cost_tables(None) == ["results/tables/tiny-cost.csv"]
    assert words("--a 'b c'") == ["--a", "b c"]


def test_a_report_of_files_never_built_stops_naming_the_command(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from snakemake.exceptions import WorkflowError
    from snakemake.io import IOFile, report

    rules = _rules(_raw(), tmp_path)
    rules.workflow.rules = [SimpleNamespace(output=[IOFile(report(W.TABLE.format(
        experiment="{experiment}", ext="md")))])]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.argv", ["snakemake", "--report", "r.html"])
    with pytest.raises(WorkflowError, match="snakemake"):
        rules.all_input(SimpleNamespace())
    monkeypatch.setattr("sys.argv", ["snakemake"])  # no report: every target, no check
    assert "results/tables/tiny.md" in rules.all_input(SimpleNamespace())
