"""workflow/rules/preflight.smk: the jobs run this workflow's code; bad folders refused.

Issue 27, item 6: the train rule ran whichever ``pflrepro`` came first on PATH, so a
wrapper for another clone there ran that clone's code although the preflight check
(which sees only Snakemake's own Python) passed. Item 11: a file where a results
folder goes gave Snakemake's bare NotADirectoryError. Each is checked with a dry run
(``snakemake -n``) in a temporary working directory.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from pflrepro.cli import build_parser

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).parent))
from test_rule_shell_quoting import HOSTILE, TEMPLATES, cli_args, render  # noqa: E402


def _dry_run(workdir: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "-d", str(workdir),
         "-n", "-p", "--cores", "1", "--configfile", str(REPO / "tests/workflow/config.yaml"),
         "--replace-workflow-config"],
        cwd=workdir, capture_output=True, text=True, timeout=300,
        env={**os.environ, **(env or {})})


def test_train_jobs_run_the_workflows_own_python_not_pflrepro_on_path(tmp_path: Path) -> None:
    # another clone's wrapper first on PATH: the old rule's `pflrepro train ...` ran it
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "pflrepro").write_text("#!/bin/sh\necho OTHER CLONE\n")
    (fake / "pflrepro").chmod(0o755)
    work = tmp_path / "work"
    work.mkdir()
    done = _dry_run(work, {"PATH": f"{fake}{os.pathsep}{os.environ['PATH']}"})
    assert done.returncode == 0, done.stderr[-2000:]
    commands = [line.split("Shell command: ", 1)[1] for line in done.stdout.splitlines()
                if "Shell command: " in line and " train --spec " in line]
    assert len(commands) == 16  # 2 partitions x 4 methods x 2 seeds
    for command in commands:
        words = shlex.split(command)
        assert words[:5] == [sys.executable, "-m", "pflrepro", "--require-source",
                             str(REPO / "src")], command


def test_the_train_command_parses_with_the_cli() -> None:
    template = TEMPLATES["train"]
    assert template.startswith("{params.python:q} -m pflrepro --require-source "
                                "{params.source:q} train ")
    args = build_parser().parse_args(cli_args(template))
    assert args.command == "train"
    # one word per run (several runs may share a job: issue 28)
    assert args.spec == [HOSTILE] and args.public == [HOSTILE]
    assert shlex.split(render(template, "V"))[:3] == ["V", "-m", "pflrepro"]


@pytest.mark.parametrize("blocker", ["results", "results/runs", "logs"])
def test_a_file_where_a_results_folder_goes_is_named(tmp_path: Path, blocker: str) -> None:
    (tmp_path / blocker).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / blocker).write_text("not a folder")
    done = _dry_run(tmp_path)
    output = done.stdout + done.stderr
    assert done.returncode != 0
    assert f"{tmp_path / blocker} is a file, but the workflow writes the directory" \
        in output, output[-2000:]
    assert "NotADirectoryError" not in output
