"""A file of another shipped config named as a target (workflow/rules/hints.smk)."""

from __future__ import annotations

from pathlib import Path

import pytest
from _wf import new_workdir, snakemake

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
