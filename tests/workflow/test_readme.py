"""The README's commands, run as a reader would type them.

Every command the README shows (its two set-up commands and the Running table) is taken
from README.md itself, so an edit there is tested as written. The ``pflrepro`` commands
run in a copy of the project and must exit 0. The Snakemake commands are planned with
``-n`` on a copy (the ``workflow_full`` tier, ~2 minutes in all): a dry run plans the
whole DAG, so a typo in a target, a profile or a ``--config`` key fails it. The test
set-up command is ``.ci/run``'s default stage verbatim. What a dry run cannot show (the
report, conda environments, a SLURM submission) is named in :data:`FURTHER` with the
test that goes further: the report and SLURM are built for real there; conda is not
installed on these machines, so its environment files are checked against
pyproject.toml only.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from _wf import REPO, new_workdir, snakemake

pytestmark = pytest.mark.workflow

README = REPO / "README.md"
#: Flags of README commands whose dry run is all this file checks, with the test
#: (path::name) that goes further; a test below checks each one still exists.
FURTHER = {
    "--report": "tests/workflow/test_snakemake_report.py::test_html_report_builds",
    "--profile profiles/slurm":
        "tests/slurm/test_slurm.py::test_every_job_ran_in_the_profiles_partition_and_account",
    # a pflrepro command that follows a running Snakemake: run against a run's log there
    "status --watch": "tests/unit/test_run_view.py::"
                      "test_watching_an_ended_run_renders_it_once_and_ends_with_one_line",
    "--use-conda": "tests/unit/test_environment.py::"
                   "test_rule_env_installs_the_project_by_its_post_deploy_script",
}
#: The README's placeholders and what a dry run here puts for them.
PLACEHOLDERS = {"N": "2", "M": "2", "gpu=N": "gpu=1", "train=T": "train=1"}


def _setup_commands() -> list[str]:
    block = re.search(r"```bash\n(.*?)```", README.read_text(), re.S)
    assert block, "README.md: no ```bash block with the set-up commands"
    return [line for line in block.group(1).splitlines() if line.strip()]


def _running_commands() -> list[str]:
    """The commands of the README's Running table (backticked, in its second column)."""
    text = README.read_text()
    section = text.split("## Running", 1)[1].split("\n## ", 1)[0]
    commands = []
    for row in section.splitlines():
        cells = row.split("|")
        if len(cells) < 4 or not cells[2].strip().startswith("`"):
            continue
        commands += [c for c in re.findall(r"`([^`]+)`", cells[2])
                     if c.split()[0] in ("snakemake", "pflrepro")]
    return commands


def test_two_setup_commands_demo_then_the_ci_test_command() -> None:
    demo, tests = _setup_commands()
    assert demo.endswith("pip install -e . && snakemake --profile profiles/demo"), demo
    assert tests in (REPO / ".ci/run").read_text(), "the README's test command is not CI's"


def test_the_running_table_names_both_tools() -> None:
    commands = _running_commands()
    assert sum(c.startswith("pflrepro") for c in commands) >= 5, commands
    assert sum(c.startswith("snakemake") for c in commands) >= 8, commands


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the project with the repository's own config.yaml and a user's my.yaml."""
    work = new_workdir(tmp_path_factory.mktemp("readme") / "work")
    (work / "config.yaml").write_bytes((REPO / "config.yaml").read_bytes())
    # a user's own complete config (`--configfile my.yaml --replace-workflow-config`)
    (work / "my.yaml").write_bytes((REPO / "config/demo.yaml").read_bytes())
    return work


def _pflrepro(work: Path, command: str) -> subprocess.CompletedProcess:
    """``command`` with the installed ``pflrepro`` script, importing the copy's package.

    PATH is the environment's ``bin`` and the system's default directories, as in a
    reader's shell (``pflrepro plan`` runs Snakemake, which runs ``which``).
    """
    bindir = Path(sys.executable).parent
    env = {"PYTHONPATH": str(work / "src"), "PATH": f"{bindir}{os.pathsep}{os.defpath}",
           "HOME": str(work)}
    return subprocess.run([str(bindir / "pflrepro"), *shlex.split(command)[1:]], cwd=work,
                          env=env, capture_output=True, text=True, timeout=300)


def test_every_pflrepro_command_of_the_readme_runs(project: Path) -> None:
    commands = [c for c in _running_commands() if c.startswith("pflrepro")
                and not any(flag in c for flag in FURTHER)]
    expanded = []
    for command in commands:
        expanded.append(command)
        if command == "pflrepro list":  # its five details, named beside it
            expanded += [f"pflrepro list {what}" for what in
                         ("methods", "datasets", "partitions", "hyperparameters", "settings")]
    (project / "results").mkdir(exist_ok=True)
    for command in expanded:
        proc = _pflrepro(project, command)
        assert proc.returncode == 0, f"{command}:\n{proc.stdout}\n{proc.stderr}"
        assert proc.stdout.strip() or "--out" in command, command
    out = re.search(r"--out (\S+)", " ".join(commands))
    assert out and (project / out.group(1)).stat().st_size > 0  # the single run's Parquet


def _dry_run(command: str) -> list[str]:
    """A Snakemake command of the README as dry-run arguments (N cores: 2)."""
    args = [PLACEHOLDERS.get(a, a) for a in shlex.split(command)[1:]]
    if "--cores" in args:  # the helper gives --cores 2
        i = args.index("--cores")
        del args[i:i + 2]
    if "--report" in args:  # a report is made from a build; its plan is the build's
        i = args.index("--report")
        del args[i:i + 2]
    return ["-n", *args]


@pytest.mark.workflow_full  # a dry run of the paper-scale DAG takes ~15 s
@pytest.mark.parametrize("command", [c for c in _running_commands()
                                     if c.startswith("snakemake")])
def test_every_snakemake_command_of_the_readme_plans(project: Path, command: str) -> None:
    if "--use-conda" in command and shutil.which("conda") is None:
        pytest.skip("conda is not installed: Snakemake cannot plan conda environments")
    proc = snakemake(project, *_dry_run(command), check=False, configfile=False,
                     timeout=600)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"{command}:\n{text[-3000:]}"
    assert "job" in text.lower(), text[-2000:]


def test_what_a_dry_run_cannot_show_is_run_by_a_named_test() -> None:
    commands = " ".join(_running_commands())
    for flag, where in FURTHER.items():
        assert flag in commands, f"{flag} is no longer in the README: drop it here"
        path, _, name = where.partition("::")
        source = (REPO / path).read_text()
        assert not name or f"def {name}(" in source, where
