"""docs/first-hour.md: each of its shell commands planned as written (a dry run)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from _wf import REPO, new_workdir, snakemake

pytestmark = pytest.mark.workflow_full  # a paper-scale dry run takes ~15 s

PAGE = REPO / "docs/first-hour.md"


def _commands() -> list[str]:
    """The page's ```bash commands, continuation lines joined, comments dropped."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", PAGE.read_text(), flags=re.S):
        for command in block.replace("\\\n", " ").splitlines():
            command = command.split("#")[0].strip()
            if command:
                commands.append(command)
    return commands


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = new_workdir(tmp_path_factory.mktemp("first-hour") / "work")
    (work / "config.yaml").write_bytes((REPO / "config.yaml").read_bytes())
    return work


def test_the_page_has_its_commands() -> None:
    assert len(_commands()) == 4, _commands()


@pytest.mark.parametrize("command", _commands())
def test_each_command_plans(project: Path, command: str) -> None:
    args = shlex.split(command)
    assert args[0] == "snakemake"
    args = args[1:] if "-n" in args else ["-n", *args[1:]]
    proc = snakemake(project, *args, configfile=False, timeout=600)
    text = proc.stdout + proc.stderr
    if "figures/partitions/" in command:  # the page: 3 jobs, no training
        assert re.search(r"^total\s+3$", text, flags=re.M), text[-2000:]
        assert "train" not in re.findall(r"^(\w+)\s+\d+$", text, flags=re.M)
    if "--quiet" in args:  # a summary by rule, not every job
        assert re.search(r"^total\s+\d+$", text, flags=re.M), text[-2000:]
