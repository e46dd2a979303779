"""A wrong target named on the command line: one line naming it, never a traceback.

Every error a user can cause from a target name ends as one line with what to do. Each
case below is ``snakemake -n TARGET`` on the tiny project of the workflow tests. Without
the check before planning (``workflow/rules/hints.smk``, ``Rules.target_problems``) a
wrong name ends inside Snakemake: an input function raises and the error comes wrapped
in its ``InputFunctionException`` with a traceback, or no rule matches and Snakemake's
``MissingRuleException`` says only that.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from _wf import new_workdir, snakemake

import pflrepro.config as C

pytestmark = pytest.mark.workflow_full

#: ``{pid}``: the tiny experiment's first partition id.
CASES = [
    pytest.param("figures/demo_fedamp-accuracy.png", id="demo figure without the profile"),
    pytest.param("figures/partitions/digits/nosuch-split0.png", id="unknown partition figure"),
    pytest.param("results/runs/tiny/nosuch/fedavg/split0-seed0.parquet",
                 id="run of an unknown partition"),
    pytest.param("results/partitions/digits/nosuch/split0.parquet",
                 id="unknown partition"),
    pytest.param("results/tuning/tiny/fedavg.md", id="tuning of an untuned experiment"),
    pytest.param("results/tables/nosuch.md", id="table of an unknown experiment"),
    pytest.param("figures/nosuch-accuracy.png", id="figure of an unknown experiment"),
    pytest.param("figures/tiny-weights-nosuch.png", id="figure of an unknown method"),
    pytest.param("results/aggregate/tiny/nosuch.parquet", id="aggregate of an unknown method"),
    pytest.param("results/runs/tiny/{pid}/nosuch/split0-seed0.parquet",
                 id="run of an unknown method"),
    pytest.param("results/data/nosuch/meta.json", id="unknown data set"),
    pytest.param("figures/tiny-weights-fedavg.png", id="weights of a method recording none"),
    pytest.param("figures/tiny-client9-accuracy.png", id="a client the experiment lacks"),
]


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return new_workdir(tmp_path_factory.mktemp("targets") / "wd")


@pytest.mark.parametrize("target", CASES)
def test_a_wrong_target_is_one_line_naming_it(project: Path, target: str) -> None:
    cfg = C.parse(yaml.safe_load((project / "config.yaml").read_text()))
    target = target.format(pid=cfg.experiments["tiny"].partitions[0].id)
    proc = snakemake(project, "-n", target, check=False, configfile=False, timeout=300)
    text = proc.stdout + proc.stderr
    assert proc.returncode != 0, text[-2000:]
    for wrapper in ("Traceback", "InputFunctionException", "MissingRuleException"):
        assert wrapper not in text, text[-2000:]
    assert any(line.startswith(target) for line in text.splitlines()), text[-2000:]
