"""End to end: Snakemake on the tiny config, each test in a directory of its own.

The tests of tests/workflow/test_workflow.py that do not read its one module-scoped
build: a single figure as the target, config and YAML errors stopping before any job,
another clone's package refused, and a `--keep-going` build's partial table (a
build of its own: the ``workflow_full`` tier, ``pytest -m workflow_full``). Apart
from that module so that pytest-xdist (one test file per worker) runs them beside its
build.
"""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml
from _wf import new_workdir, planned_jobs, snakemake

TINY = Path(__file__).with_name("config.yaml")
RUNS = 2 * 4 * 1 * 2  # partitions x methods x split seeds x train seeds

pytestmark = pytest.mark.workflow
#: The config errors whose messages tests/unit/test_config_errors.py also checks through
#: pflrepro.config.check: their end-to-end runs are in the workflow_full tier; the
#: default tier runs one of each kind (a schema error, an unknown algorithm, an unknown
#: method, a model option, a duplicate).
FULL = pytest.mark.workflow_full


def test_one_figure_builds_only_what_it_needs(tmp_path: Path) -> None:
    work = new_workdir(tmp_path / "fig")
    jobs = planned_jobs(snakemake(work, "-n", "figures/tiny-weights-federico.pdf"))
    rules = Counter(rule for rule, _ in jobs)
    assert {w["method"] for r, w in jobs if r == "train"} == {"federico"}
    assert rules["train"] == RUNS // 4
    assert "table" not in rules and "plot_accuracy" not in rules
    snakemake(work, "figures/tiny-weights-federico.pdf")
    assert (work / "figures/tiny-weights-federico.pdf").stat().st_size > 0
    assert not (work / "figures/tiny-accuracy.pdf").exists()


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda c: c.update(colour="blue"), "colour"),
    pytest.param(lambda c: c["training"].update(rounds="ten"), "ten", marks=FULL),
    pytest.param(lambda c: c["training"].update(learning_rate=0.1), "learning_rate",
                 marks=FULL),
    (lambda c: c["methods"].update(magic={"algorithm": "magic"}), "magic"),
    pytest.param(lambda c: c["methods"]["federico"].update(epsilon=2.0), "epsilon",
                 marks=FULL),
    pytest.param(lambda c: c["methods"]["federico"].update(gamma=1.0), "gamma", marks=FULL),
    (lambda c: c["experiments"]["tiny"].update(methods=["local", "fedsgd"]), "fedsgd"),
    pytest.param(lambda c: c["experiments"]["tiny"].update(dataset="imagenet"), "imagenet",
                 marks=FULL),
    pytest.param(lambda c: c["experiments"]["tiny"]["partitions"][0].update(groups=20),
                 "groups", marks=FULL),
    (lambda c: c.update(colour="blue"),
     "unknown key 'colour' at config top level; known: allow_huge, data, experiments"),
    (lambda c: c["training"]["model_options"].update(hidden="abc"),
     "training.model_options.hidden (model 'mlp')"),
    pytest.param(lambda c: c["training"].update(lr=float("inf")),
                 "training.lr: must be a finite number", marks=FULL),
    (lambda c: c["experiments"]["tiny"].update(methods=["fedavg", "fedavg"]),
     "experiments.tiny.methods: 'fedavg' is listed twice"),
    pytest.param(lambda c: c["experiments"]["tiny"].update(train_seeds=[0, 0]),
                 "experiments.tiny.train_seeds: 0 is listed twice", marks=FULL),
    pytest.param(lambda c: c.update(scale="cpu"), "scale: no experiment has scale 'cpu'",
                 marks=FULL),
    pytest.param(lambda c: c["experiments"]["tiny"]["partitions"][0].update(max_samples=3),
                 "experiments.tiny.partitions[0].max_samples", marks=FULL),
])
def test_bad_config_stops_before_any_job(tmp_path: Path, mutate, message: str) -> None:
    config = yaml.safe_load(TINY.read_text())
    mutate(config)
    work = new_workdir(tmp_path / "bad", config)
    proc = snakemake(work, "-n", check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert message in out, out
    assert "rule train" not in out
    assert not (work / "results").exists()
    assert len(out) < 5000, out  # one short message, never the schema


@FULL
@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_on_a_machine_without_it_stops_before_any_job(tmp_path: Path) -> None:
    # the jobs would run here (the local executor): refused when Snakemake starts, before
    # any job; a cluster executor's jobs run on other machines (tests/slurm: the job fails)
    config = yaml.safe_load(TINY.read_text())
    config["experiments"]["tiny"]["training"] = {"device": "cuda"}
    work = new_workdir(tmp_path / "cuda", config)
    proc = snakemake(work, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert ("experiments.tiny.training.device: cuda, but this machine has no CUDA device "
            "and the jobs run here") in out, out
    assert not (work / "results").exists() or not list((work / "results").rglob("*.*")), out


def test_duplicate_key_in_config_file_stops_with_file_and_line(tmp_path: Path) -> None:
    work = new_workdir(tmp_path / "dup")
    config = work / "config.yaml"
    config.write_text(config.read_text().replace("  rounds: 3\n", "  rounds: 3\n  rounds: 30\n"))
    proc = snakemake(work, "-n", check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert f"{config}:5:3: duplicate key 'rounds'" in out, out
    assert "rule train" not in out


@pytest.mark.parametrize("replace", [True, False])
def test_a_configfile_error_names_that_file_not_the_snakefiles(tmp_path: Path,
                                                               replace: bool) -> None:
    """The key set in the --configfile file is named there, with or without
    --replace-workflow-config, though the Snakefile's config.yaml sets it too."""
    work = new_workdir(tmp_path / "cf")
    mine = work / "mine.yaml"
    mine.write_text("# my settings\n\n" + (work / "config.yaml").read_text()
                    .replace("  rounds: 3\n", "  rounds: -3\n"))
    line = mine.read_text().splitlines().index("  rounds: -3") + 1
    extra = ("--replace-workflow-config",) if replace else ()
    proc = snakemake(work, "-n", "--configfile", str(mine), *extra, check=False,
                     configfile=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert f"Invalid config: {mine}:{line}: " in out, out
    assert "rule train" not in out


def test_another_clones_package_is_refused(tmp_path: Path) -> None:
    # item 9: the Snakefile ran whatever pflrepro Python found, e.g. another clone's
    work = new_workdir(tmp_path / "wf")
    other = tmp_path / "other" / "src"
    shutil.copytree(work / "src", other)
    proc = snakemake(work, "-n", check=False, env={"PYTHONPATH": str(other)})
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert f"imports pflrepro from {other / 'pflrepro'}, not from this workflow's own " \
           f"source {work / 'src' / 'pflrepro'}" in out, out
    assert f"pip install -e {work}" in out, out
    assert "rule train" not in out
    proc = snakemake(work, "-n", env={"PYTHONPATH": str(other), "PFLREPRO_ANY_SOURCE": "1"})
    assert "rule train" in proc.stdout + proc.stderr


@pytest.mark.parametrize("text, message", [
    ("training:\n  rounds: 3\n   lr: 0.1\n", "config.yaml:3:6: YAML syntax error"),
    ("methods: [unclosed\n", "config.yaml:2:1: YAML syntax error"),
    ("", "config.yaml: the config file is empty"),
    ("# only a comment\n", "config.yaml: the config file is empty"),
])
def test_yaml_error_in_config_yaml_names_file_and_line(tmp_path: Path, text: str,
                                                       message: str) -> None:
    # Snakemake's own message names neither the file nor the line
    work = new_workdir(tmp_path / "yaml")
    (work / "config.yaml").write_text(text)
    proc = snakemake(work, "-n", check=False, configfile=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert f"Invalid config: {work / message}" in out, out
    assert len(out) < 2000, out


@pytest.mark.workflow_full
def test_keep_going_writes_a_partial_table_from_the_runs_that_finished(tmp_path: Path) -> None:
    """A method whose jobs fail (PerFed-CKT with more clusters than clients, refused when
    its run starts): --keep-going finishes the others, and the failed workflow leaves a
    PARTIAL table of them with the failed runs listed; the real table is not built."""
    config = yaml.safe_load(TINY.read_text())
    config["methods"]["ckt"] = {"algorithm": "perfedckt", "clusters": 5}
    config["experiments"]["tiny"]["methods"].append("ckt")
    config["experiments"]["tiny"]["partitions"] = config["experiments"]["tiny"]["partitions"][:1]
    work = new_workdir(tmp_path / "wf", config)
    proc = snakemake(work, "--keep-going", check=False)
    assert proc.returncode != 0
    assert not (work / "results/tables/tiny.md").exists()
    md = (work / "results/partial/tiny.md").read_text()
    assert "PARTIAL: tiny, 8 of 10 runs" in md
    assert md.count("- ckt, label_groups") == 2 and "logs/train/tiny/" in md
    csv = pd.read_csv(work / "results/partial/tiny.csv")
    assert set(csv["method"]) == {"local", "fedavg", "fedavg_plus", "federico"}
    assert "partial table" in proc.stdout + proc.stderr
