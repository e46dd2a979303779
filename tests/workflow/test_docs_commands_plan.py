"""The Snakemake commands of docs/**/*.md, planned as written, and the counts the docs quote.

``tests/unit/test_docs_commands.py`` parses every command of the docs; here each
Snakemake command is planned with ``-n`` on a copy of the project with the repository's
``config.yaml`` (and the reader's ``my.yaml`` of docs/your-experiment.md), so a target,
a profile or a ``--config`` key that the workflow does not know fails. Commands that
differ only in their targets are planned in one dry run of all their targets (a dry run
plans each target; a wrong one fails it by name). The README's commands and
docs/first-hour.md's are planned by their own tests (:data:`PLANNED_ELSEWHERE`), and a
command that only adds ``-n``, ``--cores``, ``--nolock`` or ``--group-components`` to one
of them is theirs too. Then the job and run counts the docs state for the code as it
is are computed from dry runs and compared.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml
from _docs_commands import (
    DESCRIBED,
    NOT_COMMANDS,
    NOT_RUN,
    REPO,
    all_commands,
    brace_expand,
    command_words,
    doc_files,
)
from _paper_smoke import OVERLAY
from _wf import new_workdir, snakemake

pytestmark = pytest.mark.workflow_full

#: Pages whose Snakemake commands another test plans.
PLANNED_ELSEWHERE = {
    "README.md": "tests/workflow/test_readme.py::test_every_snakemake_command_of_the_readme_plans",
    "docs/first-hour.md": "tests/workflow/test_first_hour.py::test_each_command_plans",
}
#: Options a dry run does not change what it plans by (dropped before comparing).
NO_PLAN_CHANGE = {"-n": 0, "--dry-run": 0, "--nolock": 0, "--cores": 1,
                  "--group-components": 1}
#: Snakemake commands that are not dry runs, and what checks them instead.
NOT_PLANNED = {
    ("--lint",): ".ci/run's lint stage runs it (checked below)",
    ("--report",): "a report of a build: tests/workflow/test_snakemake_report.py builds one",
    ("--unlock",): "run on the copy below",
}


def _normal(args: list[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(options, targets) of a Snakemake command, options that plan nothing dropped."""
    options: list[str] = []
    targets: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            targets += args[i + 1:]
            break
        if arg in NO_PLAN_CHANGE:
            i += 1 + NO_PLAN_CHANGE[arg]
            continue
        if arg.startswith(("results/", "figures/")) or arg == DESCRIBED:
            targets.append(arg)
        else:
            options.append(arg)
        i += 1
    return tuple(options), tuple(t for target in targets for t in brace_expand(target))


def _snakemake_commands(pages: set[str] | None = None) -> list[tuple[str, list[str]]]:
    """(where, arguments) of every Snakemake command (of ``pages``, if given)."""
    found = []
    for command in all_commands():
        if (pages is not None and command.page not in pages) or \
                command.text in NOT_RUN or command.text in NOT_COMMANDS:
            continue
        for words in command_words(command.text):
            if words[:3] == ["python", "-m", "snakemake"]:
                words = words[2:]
            if words[0] != "snakemake" or (command.inline and len(words) > 1 and all(
                    w.startswith("-") for w in words[1:]) and
                    tuple(words[1:]) not in NOT_PLANNED and words[1:] != ["-n"]):
                continue  # an option named in prose: parsed by the unit test
            found.append((str(command), words[1:]))
    return found


def _plans() -> dict[tuple[str, ...], tuple[list[str], list[str]]]:
    """Options -> (targets, where the docs show them) of each dry run to make."""
    covered = {_normal(args) for _, args in _snakemake_commands(set(PLANNED_ELSEWHERE))}
    plans: dict[tuple[str, ...], tuple[list[str], list[str]]] = {}
    for where, args in _snakemake_commands():
        if where.split(":")[0] in PLANNED_ELSEWHERE:
            continue
        options, targets = _normal(args)
        if (options, targets) in covered or options in NOT_PLANNED:
            continue
        if DESCRIBED in targets:  # targets described in words: its options only
            targets = ()
            if (options, ()) in covered:
                continue
        known, wheres = plans.setdefault(options, ([], []))
        known += [t for t in targets if t not in known]
        wheres.append(where)
    return plans


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the project with config.yaml and the reader's my.yaml."""
    work = new_workdir(tmp_path_factory.mktemp("docs") / "work")
    (work / "config.yaml").write_bytes((REPO / "config.yaml").read_bytes())
    for name, text in doc_files().items():
        (work / name).write_text(text)
    return work


def test_the_other_planners_and_the_lint_exist() -> None:
    for where in PLANNED_ELSEWHERE.values():
        path, _, name = where.partition("::")
        assert f"def {name}(" in (REPO / path).read_text(), where
    assert "snakemake --lint" in (REPO / ".ci/run").read_text()
    plans = _plans()
    assert plans and sum(len(t) for t, _ in plans.values()) >= 10, plans


@pytest.mark.parametrize("options", list(_plans()), ids=" ".join)
def test_each_snakemake_command_of_the_docs_plans(project: Path, options: tuple[str, ...]
                                                 ) -> None:
    targets, wheres = _plans()[options]
    proc = snakemake(project, "-n", *options, *(["--", *targets] if targets else []),
                     configfile=False, check=False, timeout=600)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0, "\n".join(wheres) + "\n" + text[-3000:]
    assert re.search(r"^total\s+\d+$", text, flags=re.M) or "Nothing to be done" in text, \
        text[-2000:]


def test_unlock_runs_on_a_copy(project: Path) -> None:
    assert any(args == ["--unlock"] for _, args in _snakemake_commands())
    proc = snakemake(project, "--unlock", configfile=False, check=False, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def job_stats(text: str) -> dict[str, int]:
    """The first ``Job stats`` table of a dry run: rule -> jobs (``total`` included)."""
    block = text.split("Job stats:", 1)[1].split("\n\n", 1)[0]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", block, re.M)}


def tuning(stats: dict[str, int]) -> tuple[int, int]:
    """(tuning jobs, tuning runs) of a dry run's job stats.

    A tuning job of several runs is a rule ``tune_train_<method>_runs<a>to<b>of<n>``
    (runs a..b); ``tune_train`` trains one run a job.
    """
    jobs = runs = 0
    for rule, count in stats.items():
        if rule.startswith("tune_train"):
            m = re.search(r"_runs(\d+)to(\d+)of\d+$", rule)
            jobs += count
            runs += count * (int(m.group(2)) - int(m.group(1)) + 1 if m else 1)
    return jobs, runs


def test_tuning_counts_runs_by_rule_name() -> None:
    stats = {"tune_train_fedamp_runs1to6of6": 2, "tune_train": 3, "train": 5, "total": 10}
    assert tuning(stats) == (5, 15)
    assert job_stats("x\nJob stats:\njob  count\n---  ---\ntrain  4\ntotal  4\n\nJob stats:\n"
                     "train 9\n") == {"train": 4, "total": 4}


def _text(page: str) -> str:
    return " ".join((REPO / page).read_text().split())


def test_the_demos_tuning_runs_and_processes_are_the_docs(project: Path) -> None:
    """docs/running.md: the demo's tuning runs and the processes (jobs) they take."""
    (runs, jobs), = re.findall(r"the demo's (\d+) tuning runs take (\d+) processes",
                               _text("docs/running.md"))
    proc = snakemake(project, "--profile", "profiles/demo", "-n", "--quiet", "rules",
                     configfile=False, timeout=600)
    assert tuning(job_stats(proc.stdout + proc.stderr)) == (int(jobs), int(runs))


def test_the_smoke_grids_counts_are_the_docs(tmp_path: Path) -> None:
    """docs/paper_smoke.md: the smoke grid's dry run, by the kinds of job it names."""
    (steps, train, tune_jobs, tune_runs, selections, aggregates, pages, figures), = re.findall(
        r"`snakemake -n` on the smoke grid: (\d+) steps \((\d+) training jobs; (\d+) tuning "
        r"jobs holding (\d+) tuning runs, [^;]*; (\d+) tuning selections; (\d+) method "
        r"aggregates; (\d+) report pages; (\d+) figures\)", _text("docs/paper_smoke.md"))
    work = new_workdir(tmp_path / "run", yaml.safe_load((REPO / "config.yaml").read_text()))
    proc = snakemake(work, "-n", "--quiet", "rules", "--configfile", str(work / "config.yaml"),
                     str(work / "config" / OVERLAY.name), configfile=False, timeout=600)
    stats = job_stats(proc.stdout + proc.stderr)
    final = sum(n for rule, n in stats.items() if re.fullmatch(r"train(_\w+)?", rule))
    assert {"steps": stats["total"], "training jobs": final,
            "tuning": tuning(stats), "selections": stats.get("tune_select", 0),
            "aggregates": stats.get("aggregate_method", 0),
            "report pages": stats.get("report_table", 0),
            "figures": sum(n for rule, n in stats.items() if rule.startswith("plot_"))} == {
        "steps": int(steps), "training jobs": int(train),
        "tuning": (int(tune_jobs), int(tune_runs)), "selections": int(selections),
        "aggregates": int(aggregates), "report pages": int(pages), "figures": int(figures)}


def test_the_plans_split_options_from_targets() -> None:
    args = shlex.split("results/a.md figures/x-{b,c}.png --cores 2 -n --config scale=cpu")
    assert _normal(args) == (("--config", "scale=cpu"),
                             ("results/a.md", "figures/x-b.png", "figures/x-c.png"))
    assert _normal(["--cores", "1", "--", "results/z.md"]) == ((), ("results/z.md",))
