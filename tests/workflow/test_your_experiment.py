"""docs/your-experiment.md: its example config runs as the page says, at a few rounds."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from _wf import REPO, new_workdir, snakemake

pytestmark = pytest.mark.workflow

PAGE = REPO / "docs/your-experiment.md"


def _blocks(kind: str) -> list[str]:
    return re.findall(rf"```{kind}\n(.*?)```", PAGE.read_text(), flags=re.S)


def test_the_pages_example_runs_to_its_table_and_figures(tmp_path: Path) -> None:
    (example,) = _blocks("yaml")
    config = yaml.safe_load(example)
    assert config["experiments"].keys() == {"my_study"}
    # the page's commands, in its order
    (commands,) = _blocks("bash")
    lines = [line.split("#")[0].strip() for line in commands.strip().splitlines()]
    assert lines[0] == "pflrepro check-config my.yaml"
    assert lines[2] == "snakemake --configfile my.yaml --replace-workflow-config --cores 2"
    # tiny: 2 rounds, one split, one method beside FedeRiCo and its variant
    config["training"]["rounds"] = 2
    study = config["experiments"]["my_study"]
    study["split_seeds"] = [0]
    study["methods"] = ["local", "federico", "federico_greedy"]
    wd = new_workdir(tmp_path / "wd")
    (wd / "my.yaml").write_text(yaml.safe_dump(config))
    snakemake(wd, *lines[2].split()[1:], configfile=False)
    table = (wd / "results/tables/my_study.md").read_text()
    for method in ("Local", "FedeRiCo"):
        assert method in table
    assert "FedeRiCo, greedy" in table  # the variant's label
    for name in ("my_study-accuracy", "my_study-weights-federico"):
        assert (wd / f"figures/{name}.png").stat().st_size > 0
    # nothing of config.yaml's experiments ran (the file ran alone)
    assert sorted(p.name for p in (wd / "results/runs").iterdir()) == ["my_study"]
