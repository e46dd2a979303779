"""A file of another shipped config named as a target (workflow/rules/hints.smk)."""

from __future__ import annotations

import re
import zipfile
from pathlib import Path

import pytest
import yaml
from _wf import new_workdir, snakemake

import pflrepro.config as C
import pflrepro.pipeline.workflow as W

pytestmark = pytest.mark.workflow


def test_a_demo_figure_without_the_demo_profile_names_the_profile(tmp_path: Path) -> None:
    wd = new_workdir(tmp_path / "wd")
    proc = snakemake(wd, "-n", "figures/demo_fedamp-accuracy.png", check=False,
                     configfile=False)
    text = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert ("figures/demo_fedamp-accuracy.png belongs to config/demo.yaml, not to "
            "config.yaml: add --profile profiles/demo") in text
    assert "MissingRuleException" not in text
    assert "Traceback" not in text and "InputFunctionException" not in text


def test_a_report_of_an_unbuilt_config_names_it_and_the_demo(tmp_path: Path) -> None:
    wd = new_workdir(tmp_path / "wd")
    proc = snakemake(wd, "--report", "report.zip", check=False)
    text = proc.stdout + proc.stderr
    assert proc.returncode != 0 and not (wd / "report.zip").exists()
    assert re.search(r"the report is of config\.yaml at the paper scale, and (\d+) of the \1 "
                     r"files it shows are not built \(e\.g\. figures/tiny-[^ ]+\.png\): build "
                     r"them first with snakemake --cores N; or the report of "
                     r"config/demo\.yaml: snakemake --profile profiles/demo --report\n", text)
    assert "marked for report but does not exist" not in text


def test_a_report_of_named_targets_that_exist_is_written(tmp_path: Path) -> None:
    wd = new_workdir(tmp_path / "wd")
    cfg = C.parse(yaml.safe_load((wd / "config.yaml").read_text()))
    figure = next(t for t in W.partition_targets(cfg, W.chosen_experiments(cfg))
                  if t.endswith(".png"))
    snakemake(wd, figure)  # a partition figure: no training
    snakemake(wd, "--report", "report.zip", figure)
    with zipfile.ZipFile(wd / "report.zip") as zf:
        assert any(n.endswith(Path(figure).name) for n in zf.namelist())


def test_a_config_of_new_experiments_merged_over_config_yaml_is_said(tmp_path: Path) -> None:
    wd = new_workdir(tmp_path / "wd")
    tiny = yaml.safe_load((wd / "config.yaml").read_text())
    mine = {**tiny, "experiments": {"my_study": {**tiny["experiments"]["tiny"],
                                                 "description": "my own study"}}}
    (wd / "my.yaml").write_text(yaml.safe_dump(mine))
    proc = snakemake(wd, "-n", "--configfile", "my.yaml", configfile=False)
    assert ("my.yaml was merged over config.yaml (its experiments are all new, so "
            "config.yaml's run too); to run it alone: snakemake --configfile my.yaml "
            "--replace-workflow-config --cores N") in proc.stdout + proc.stderr
    alone = snakemake(wd, "-n", "--configfile", "my.yaml", "--replace-workflow-config",
                      configfile=False)
    assert "was merged over" not in alone.stdout + alone.stderr


def test_a_partition_figure_of_no_experiment_names_the_partitions_in_one_line(
        tmp_path: Path) -> None:
    wd = new_workdir(tmp_path / "wd")
    cfg = C.parse(yaml.safe_load((wd / "config.yaml").read_text()))
    pid = cfg.experiments["tiny"].partitions[0].id
    typo = pid[:-1] + ("x" if pid[-1] != "x" else "y")
    target = f"figures/partitions/digits/{typo}-split0.png"
    proc = snakemake(wd, "-n", target, check=False, configfile=False)
    text = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert (f"{target}: no experiment of config.yaml uses partition {typo!r} of digits; "
            f"did you mean {pid!r}?") in text
    assert "Traceback" not in text and "InputFunctionException" not in text
