"""Every command of README.md and docs/**/*.md, checked as written (default tier).

The commands are found by ``_docs_commands`` (fenced shell blocks, command lines of
unlabelled blocks, inline code spans that start with a command word or a project
script). Placeholders (``N``, ``FILE``, ``<jobid>``) get a value
(``_docs_commands.PLACEHOLDERS``). Each simple command (split at ``&&``, ``|``, ``;``)
is checked by its first word:

- ``pflrepro``: parsed by the real CLI parser (``pflrepro.cli.build_parser``); a
  subcommand or option named in prose (``pflrepro train``, ``pflrepro run -o``) must
  exist; ``pflrepro list ...`` and ``pflrepro check-config`` are run.
- ``snakemake``: parsed by Snakemake's own argument parser; its profile and config files
  exist, its ``--config`` keys are keys of the schema, its ``--set-threads`` and
  ``--group-components`` names are rules, its ``--resources`` are those an experiment's
  ``resources:`` sets, its targets lie under ``results/`` or ``figures/``.
  ``tests/workflow/test_docs_commands_plan.py`` (``workflow_full``) plans each one.
- ``python``: a script exists and defines every option given; ``-m pflrepro`` and
  ``-m snakemake`` as above; ``-c`` code compiles and the modules it imports exist.
- ``pytest``: every option is pytest's, every ``-m`` marker is registered, every path exists.
- ``pip``: the project and its extras exist; ``ruff``: the command is CI's.
- a project script: it exists, and is executable where it is run without an interpreter.
- ``cd``, ``.``: the folder or the virtual environment's activate script; ``ls``, ``du``,
  ``git`` ...: a system tool on PATH.

What cannot run here (SLURM, a package index, a GPU) is in :data:`NOT_RUN` with its
reason; what looks like a command but is none (an error line's format, an example of a
bad input) in :data:`NOT_COMMANDS`. A command of no class fails the test, so a new
command in the docs needs a check. The job counts the docs quote are checked by
:func:`test_every_job_count_is_computed_by_a_test_or_a_dated_record`.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import re
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
import yaml
from _docs_commands import (
    DESCRIBED,
    NOT_COMMANDS,
    NOT_RUN,
    PAGES,
    REPO,
    Command,
    all_commands,
    brace_expand,
    command_words,
    doc_files,
    page_commands,
)

#: System tools the docs name beside the project's commands.
SYSTEM_TOOLS = frozenset({"ls", "du", "sha256sum", "tail", "head", "cat", "git", "tar",
                          "/usr/bin/time"})
#: Snakemake options whose value names a rule (``train=1``).
RULE_OPTIONS = ("set_threads", "group_components")
#: Counts of jobs (Snakemake's "steps") and runs the docs state for the code as it is,
#: and the test that computes each (page, the count as written).
COMPUTED_COUNTS = {
    ("docs/first-hour.md", "3 jobs"):
        "tests/workflow/test_first_hour.py::test_each_command_plans",
    ("docs/slurm.md", "100 jobs"):
        "tests/unit/test_docs_commands.py::test_the_slurm_profiles_job_limit_is_the_docs",
    **{("docs/paper_smoke.md", count):
       "tests/workflow/test_docs_commands_plan.py::test_the_smoke_grids_counts_are_the_docs"
       for count in ("1193 steps", "294 training jobs", "90 tuning jobs", "2473 tuning runs")},
    ("docs/running.md", "36 tuning runs"):
        "tests/workflow/test_docs_commands_plan.py::"
        "test_the_demos_tuning_runs_and_processes_are_the_docs",
    ("README.md", "3 runs"):
        "tests/unit/test_docs_commands.py::test_the_readmes_runs_per_cell_are_the_cpu_scales",
    ("docs/your-experiment.md", "12 runs"):
        "tests/unit/test_docs_commands.py::test_the_example_configs_runs_are_the_pages",
    ("docs/your-experiment.md", "3 runs"):
        "tests/unit/test_docs_commands.py::test_the_example_configs_runs_are_the_pages",
}
#: What the count pattern finds that counts no job or planned run, and what it counts.
NOT_JOB_COUNTS = {
    ("docs/methods/fedamp.md", "1 local steps"): "optimiser steps a round",
    ("docs/methods/fedamp.md", "3 steps"): "optimiser steps an epoch",
    ("docs/methods/perfedckt.md", "100 steps"): "FedDF's server steps between scores",
    ("docs/methods/perfedckt.md", "1000 steps"): "FedDF's patience in server steps",
    ("docs/methods/perfedckt.md", "43,300 server steps"): "FedDF's server steps in 30 rounds",
    ("docs/paper_smoke.md", "256 runs"): "the runs one measurement timed",
    ("docs/paper_smoke.md", "40 runs"): "the runs of the job one measurement timed",
}
_JOBS = r"(?:[a-z_-]+\s+)?(?:job\(s\)|jobs?|steps?)"
_RUNS = r"(?:[a-z_-]+\s+)?(?:run\(s\)|runs?)"
_COUNT = re.compile(rf"(?<![\w.-])\d[\d,]*(?:\s+of\s+\d[\d,]*)?\s+(?:{_JOBS}|(?P<runs>{_RUNS}))"
                    r"(?![\w-])")
#: A date or a commit: a section naming one records a measurement of that run.
_DATED = re.compile(r"(?<!\d)20\d\d-\d\d-\d\d(?!\d)"
                    r"|\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b")
#: Pages whose counts of runs are the sample sizes of their measurements (n of a mean),
#: not the pipeline's plan: only their job counts are checked.
SAMPLE_PAGES = ("docs/methods/",)


@cache
def pflrepro_parser():
    from pflrepro.cli import build_parser

    return build_parser()


@cache
def snakemake_parser():
    from snakemake.cli import get_argument_parser

    return get_argument_parser()


@cache
def pytest_help() -> str:
    return subprocess.run([sys.executable, "-m", "pytest", "--help", "-p", "no:cacheprovider"],
                          cwd=REPO / "tests", capture_output=True, text=True,
                          timeout=120).stdout


@cache
def schema_keys() -> frozenset[str]:
    schema = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
    return frozenset(schema["properties"])


@cache
def rule_names() -> frozenset[str]:
    """The rules written out in workflow/rules, and the name every training rule answers to."""
    from pflrepro.pipeline.workflow.cluster import TRAINING_RULE

    text = "".join(p.read_text() for p in (REPO / "workflow/rules").glob("*.smk"))
    return frozenset({*re.findall(r"^(?:rule|checkpoint) (\w+):", text, flags=re.M),
                      TRAINING_RULE})


@cache
def resources() -> frozenset[str]:
    """The Snakemake resources an experiment's ``resources:`` sets (the config schema)."""
    schema = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
    found: set[str] = set()

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("resources"), dict):
                found.update(node["resources"].get("properties", {}))
            for value in node.values():
                walk(value)

    walk(schema)
    return frozenset(found)


@cache
def markers() -> frozenset[str]:
    block = (REPO / "pyproject.toml").read_text().split("markers = [", 1)[1].split("]\n", 1)[0]
    return frozenset(re.findall(r'"(\w+):', block))


def check_pflrepro(args: list[str], inline: bool) -> str:
    """Parse a ``pflrepro`` command with the CLI's parser; the class it falls in."""
    if not args:
        assert "pflrepro = " in (REPO / "pyproject.toml").read_text()
        return "the tool named"
    parser = pflrepro_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            parser.parse_args(args)
            return "parsed by the CLI"
        except SystemExit:
            pass
    while args and args[0].startswith("-"):  # global options (and their values)
        action = parser._option_string_actions.get(args[0])
        assert action, f"pflrepro has no {args[0]}"
        args = args[1 + (action.nargs != 0):]
    if not args and inline:  # global options before `...`: `pflrepro --require-source SRC ...`
        return "global options named"
    assert args, err.getvalue().strip()
    name, rest = args[0], args[1:]
    assert name in sub.choices, f"pflrepro has no command {name!r}"
    if inline and "the following arguments are required" in err.getvalue():
        return "a command named, its required arguments left out"
    if inline and all(a.startswith("-") for a in rest):  # named in prose
        for option in rest:
            assert option in sub.choices[name]._option_string_actions, \
                f"pflrepro {name} has no option {option}"
        return "a command or option named"
    raise AssertionError(err.getvalue().strip())


def check_snakemake(args: list[str], cwd: Path, inline: bool) -> str:
    """Parse a ``snakemake`` command with Snakemake's parser; check what it names."""
    if not args:
        assert shutil.which("snakemake") or (Path(sys.executable).parent / "snakemake").exists()
        return "the tool named"
    parser = snakemake_parser()
    if inline and all(a.startswith("-") for a in args):  # options named in prose
        for option in args:
            assert option in parser._option_string_actions, f"snakemake has no {option}"
        if args != ["-n"] and not set(args) & {"--unlock", "--lint"}:
            return "an option named"
    with contextlib.redirect_stderr(io.StringIO()) as err:
        try:
            ns = parser.parse_args(args)
        except (SystemExit, Exception) as e:  # Snakemake raises CliException too
            raise AssertionError(f"{e} {err.getvalue().strip()[-300:]}") from e
    for profile in ns.profile or []:
        assert (cwd / profile / "config.yaml").is_file(), f"no profile {profile}"
    for path in ns.configfile or []:
        assert (cwd / path).is_file() or str(path) in doc_files(), f"no file {path}"
    for item in ns.config or []:
        key = item.split("=", 1)[0]
        assert key in schema_keys(), f"--config {key}: no such key in the config schema"
    for option in RULE_OPTIONS:
        for name in getattr(ns, option) or {}:
            assert name in rule_names(), f"--{option.replace('_', '-')} {name}: no such rule"
    for name in ns.resources or {}:
        assert name in resources(), f"--resources {name}: no training job declares it"
    for target in ns.targets or []:
        for path in brace_expand(target):
            assert path == DESCRIBED or path.startswith(("results/", "figures/")), \
                f"target {path} is no output of the workflow"
    return "parsed by Snakemake"


def check_script(path: str, args: list[str], cwd: Path, interpreter: bool) -> str:
    """A project script: it exists (executable when run bare) and defines each option."""
    file = cwd / path
    assert file.is_file(), f"no script {path} (from {cwd.relative_to(REPO) or '.'})"
    assert interpreter or os.access(file, os.X_OK), \
        f"{path} is not executable: write `python {path}`"
    source = file.read_text()
    if file.suffix == ".py":
        source += (file.parent / "_common.py").read_text() if (
            file.parent / "_common.py").exists() else ""
    for option in (a.split("=", 1)[0] for a in args if a.startswith("--")):
        assert f'"{option}"' in source or f"'{option}'" in source, \
            f"{path} defines no option {option}"
    return "a project script"


def check_python(args: list[str], cwd: Path, inline: bool) -> str:
    if args[:2] == ["-m", "venv"]:
        return "the virtual environment"
    if args[:2] == ["-m", "pflrepro"]:
        return check_pflrepro(args[2:], inline)
    if args[:2] == ["-m", "snakemake"]:
        return check_snakemake(args[2:], cwd, inline)
    if args[:2] == ["-m", "cProfile"]:  # a profiler around a command
        return check_python(args[2:], cwd, inline)
    if args[:1] == ["-c"]:  # compiled, and what it imports is installed
        code = compile(args[1], "<python -c>", "exec")
        for module in re.findall(r"\bimport (\w+)", args[1]):
            assert importlib.util.find_spec(module), f"python -c: no module {module}"
        return f"python code ({len(code.co_names)} names)"
    assert args, "python with nothing to run"
    if args[0].endswith("bin/snakemake"):  # a launcher of Snakemake
        assert (Path(sys.executable).parent / "snakemake").exists()
        return check_snakemake(args[1:], cwd, inline)
    return check_script(args[0], args[1:], cwd, interpreter=True)


def check_pytest(args: list[str]) -> str:
    help_text = pytest_help()
    i = 0
    while i < len(args):
        arg = args[i]
        if arg.startswith("-"):
            option = arg.split("=", 1)[0] if arg.startswith("--") else arg[:2]
            assert re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", help_text), \
                f"pytest has no option {option}"
            if arg in ("-m", "-p", "-k"):
                if arg == "-m":
                    names = set(re.findall(r"\w+", args[i + 1])) - {"and", "or", "not"}
                    assert names <= markers(), f"no marker {names - markers()}"
                i += 1
        else:
            assert (REPO / arg).exists(), f"pytest: no path {arg}"
        i += 1
    return "pytest's options and markers"


def check_pip(args: list[str], cwd: Path) -> str:
    assert args[:1] == ["install"], f"pip {args}"
    targets = [a for a in args[1:] if not a.startswith("-")]
    assert "-e" in args and len(targets) == 1, f"pip {args}"
    project, _, extras = targets[0].partition("[")
    pyproject = (cwd / project / "pyproject.toml").read_text()
    for extra in filter(None, extras.rstrip("]").split(",")):
        assert re.search(rf"^{extra} = \[", pyproject, flags=re.M), f"no extra [{extra}]"
    return "the project's install"


def check_part(args: list[str], cwd: Path, inline: bool) -> tuple[str, Path]:
    """The class of one simple command (its words), and the folder the next one runs in."""
    part = " ".join(args)
    while args and re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", args[0]):
        args = args[1:]
    if args[:1] == ["/usr/bin/time"] and args[1:] not in ([], ["-v"]):  # a wrapper
        args = args[2:] if args[1] == "-v" else args[1:]
    word, rest = args[0], args[1:]
    if word == "cd":
        if rest == [DESCRIBED]:  # `cd <a copy of the tree>`
            return "cd", REPO
        assert (cwd / rest[0]).is_dir(), f"no folder {rest[0]}"
        return "cd", cwd / rest[0]
    if word in (".", "source"):
        assert rest == [".venv/bin/activate"], rest
        return "the virtual environment", cwd
    if word == "pflrepro":
        return check_pflrepro(rest, inline), cwd
    if word == "snakemake":
        return check_snakemake(rest, cwd, inline), cwd
    if word in ("python", "python3"):
        return check_python(rest, cwd, inline), cwd
    if word == "pytest":
        return check_pytest(rest), cwd
    if word == "pip":
        return check_pip(rest, cwd), cwd
    if word == "ruff":
        assert not rest or part in (REPO / ".ci/run").read_text(), f"{part} is not CI's"
        return "CI's lint", cwd
    if word in ("bash", "sh"):
        return check_script(rest[0], rest[1:], cwd, interpreter=True), cwd
    if word in SYSTEM_TOOLS:
        assert shutil.which(word), f"{word} is not installed"
        return "a system tool", cwd
    if "/" in word and (cwd / word).exists():
        return check_script(word, rest, cwd, interpreter=False), cwd
    raise AssertionError(f"no check for a command starting with {word!r}: add one")


def check(command: Command) -> list[str]:
    """The classes of ``command``'s simple commands; AssertionError says what is wrong."""
    if command.text in NOT_COMMANDS:
        return ["not a command"]
    if command.text in NOT_RUN:
        return ["not run here"]
    cwd, classes = REPO, []
    for words in command_words(command.text):
        kind, cwd = check_part(words, cwd, command.inline)
        classes.append(kind)
    return classes


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_command_of_the_page_is_checked(page: Path) -> None:
    failures = []
    for command in page_commands(page):
        try:
            check(command)
        except (AssertionError, ValueError) as e:  # ValueError: shlex
            failures.append(f"{command}\n    {e}")
    assert not failures, "\n".join(failures)


def test_the_pages_have_commands() -> None:
    commands = all_commands()
    assert len(commands) > 200, len(commands)
    for page in ("README.md", "docs/install.md", "docs/slurm.md", "docs/your-experiment.md"):
        assert any(c.page == page for c in commands), page


def test_the_listed_exceptions_are_still_in_the_docs() -> None:
    texts = {c.text for c in all_commands()}
    for text in (*NOT_RUN, *NOT_COMMANDS):
        assert text in texts, f"{text!r} is no longer in the docs: drop it here"
    for text in NOT_RUN:  # the project's scripts among them exist and run bare
        script = REPO / text.split()[0]
        assert "/" not in text.split()[0] or os.access(script, os.X_OK), script
    pins = re.findall(r"snakemake-executor-plugin-slurm==[\d.]+",
                      (REPO / "pyproject.toml").read_text())
    assert pins and {f"pip install {pin}" for pin in pins} <= set(NOT_RUN), pins


def test_a_broken_command_fails_its_check() -> None:
    """The checks can fail: a wrong option, profile, key, marker, script or word."""
    broken = ["pflrepro run --method fedamp --no-such-option 1", "pflrepro no-such-command",
              "snakemake --profile profiles/nowhere", "snakemake --config no_such_key=1",
              "snakemake --set-threads no_such_rule=2", "snakemake --no-such-flag",
              "snakemake notes.txt", "pytest -m no_such_marker",
              "python benchmarks/run_all.py --no-such-option",
              "benchmarks/run_all.py --quick", "cd no_such_folder", "make all",
              "pip install -e '.[no_such_extra]'", "ruff check src --fix"]
    for text in broken:
        with pytest.raises(AssertionError):
            check(Command("test", 1, text, inline=False))


@pytest.mark.parametrize("text", [
    "pflrepro list", "pflrepro list methods", "pflrepro list settings",
    "pflrepro check-config my.yaml", "pflrepro check-config FILE"])
def test_cheap_pflrepro_commands_of_the_docs_run(
        text: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture) -> None:
    """The side-effect-free ``pflrepro`` commands the docs show, run as written."""
    assert any(c.text == text for c in all_commands()), f"{text} is not in the docs"
    from pflrepro.cli import main

    for name, content in doc_files().items():
        (tmp_path / name).write_text(content)
    shutil.copy(REPO / "config.yaml", tmp_path / "config.yaml")
    monkeypatch.chdir(tmp_path)
    assert main(command_words(text)[0][1:]) == 0, capsys.readouterr()
    assert capsys.readouterr().out.strip()


def test_every_pflrepro_variable_the_docs_name_is_read_by_the_code() -> None:
    code = "".join(p.read_text() for p in (REPO / "src").rglob("*.py"))
    code += "".join(p.read_text() for p in (REPO / "workflow").rglob("*.smk"))
    code += (REPO / "Snakefile").read_text()
    named = {v for page in PAGES for v in re.findall(r"\bPFLREPRO_[A-Z_]+", page.read_text())}
    assert named, "no PFLREPRO_ variable in the docs"
    for variable in named:
        assert variable in code, f"the docs name {variable}; no code reads it"


def _counts() -> list[tuple[str, int, str, str]]:
    """(page, line, count as written, the section's text up to it) of every job count."""
    found = []
    for page in PAGES:
        name = str(page.relative_to(REPO))
        text = page.read_text()
        for m in _COUNT.finditer(text):
            if m.group("runs") and name.startswith(SAMPLE_PAGES):
                continue
            section_start = max(text.rfind("\n#", 0, m.start()), 0)
            found.append((name, text.count("\n", 0, m.start()) + 1,
                          " ".join(m.group(0).split()), text[section_start:m.end()]))
    return found


def test_every_job_count_is_computed_by_a_test_or_a_dated_record() -> None:
    """A count of jobs or runs is computed by a test, or is what a dated run measured.

    A count in a section that names the date or commit of its measurement (or on a page
    of the dated log, docs/log/) records that run: it cannot drift. Any other states
    the code as it is, and a test computes it.
    """
    undated, seen = [], set()
    for page, line, count, section in _counts():
        seen.add((page, count))
        where = COMPUTED_COUNTS.get((page, count))
        if where:
            path, _, name = where.partition("::")
            assert f"def {name}(" in (REPO / path).read_text(), where
        elif (page, count) not in NOT_JOB_COUNTS and not page.startswith("docs/log/") \
                and not _DATED.search(section):
            undated.append(f"{page}:{line}: {count}")
    assert not undated, ("counts neither computed by a test (COMPUTED_COUNTS) nor in a "
                         "dated measurement: " + "; ".join(undated))
    stale = (set(COMPUTED_COUNTS) | set(NOT_JOB_COUNTS)) - seen
    assert not stale, f"no longer in the docs: drop them here: {sorted(stale)}"


def test_the_count_pattern_finds_jobs_steps_and_runs() -> None:
    found = [m.group(0) for m in _COUNT.finditer(
        "1,168 steps; 102 of 102\nsteps; 279 training jobs; 4 job(s); 36 tuning runs; "
        "CIFAR-100 tuning job; 4200 job-seconds; 2.5 runs")]
    assert found == ["1,168 steps", "102 of 102\nsteps", "279 training jobs", "4 job(s)",
                     "36 tuning runs"], found


def test_the_readmes_runs_per_cell_are_the_cpu_scales() -> None:
    from pflrepro.config import parse
    from pflrepro.reporting.claims.parse import load_claims

    readme = " ".join((REPO / "README.md").read_text().split())
    (runs,) = re.findall(r"mean of (\d+) runs per cell", readme)
    (cap,) = re.findall(r"up to its cap of (\d+) seed pairs", readme)
    raw = yaml.safe_load((REPO / "config.yaml").read_text())
    cfg = parse(raw)
    cpu = {name for name, spec in raw["experiments"].items() if spec.get("scale") == "cpu"}
    assert cpu
    pairs = {name: len(cfg.experiments[name].seed_pairs()) for name in cpu}
    # more pairs only where a headline claim is checked, and at most the claims' cap
    claims = load_claims(REPO / "config/claims.yaml")
    headline = {e for c in claims if c.pair_cap is not None for e in c.experiments["cpu"]}
    more = {name for name, n in pairs.items() if n != int(runs)}
    assert more <= headline and {c.pair_cap for c in claims} == {None, int(cap)}
    assert all(int(runs) < pairs[name] <= int(cap) for name in more)
    # the README names their counts: FedeRiCo's two tables, FedAMP's and FedMix's
    named = readme.split("`power` in `config/claims.yaml`;")[1].split(")")[0]
    counts = re.findall(r"(?<!Table )\b\d\b", named)
    assert sorted(pairs[n] for n in more) == sorted(int(k) for k in counts)


def test_the_example_configs_runs_are_the_pages() -> None:
    from pflrepro.config import parse

    text = " ".join((REPO / "docs/your-experiment.md").read_text().split())
    cfg = parse(yaml.safe_load(doc_files()["my.yaml"]))
    (runs, methods, pairs), = re.findall(
        r"trains (\d+) runs \((\d+) methods x (\d+) seed pairs\)", text)
    (experiment,) = cfg.experiments
    assert len(list(cfg.runs(experiment))) == int(runs)
    assert len(cfg.experiments[experiment].methods) == int(methods)
    assert len(cfg.experiments[experiment].seed_pairs()) == int(pairs)
    assert f"mean ± std over the {pairs} runs" in text


def test_the_slurm_profiles_job_limit_is_the_docs() -> None:
    jobs = yaml.safe_load((REPO / "profiles/slurm/config.yaml").read_text())["jobs"]
    text = (REPO / "docs/slurm.md").read_text()
    assert f"At most {jobs} jobs are pending or running at a time" in " ".join(text.split())
