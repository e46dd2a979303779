"""``pflrepro``'s grouped help and its one-line errors (the campaign's tracebacks).

Each command runs in its own process, as a user runs it: what counts is what reaches
the terminal (stdout and stderr), which logging set up inside pytest would hide.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pflrepro.cli import build_parser
from pflrepro.cli.support import JOB_COMMANDS, USER_COMMANDS, group_help, output_paths


def _pflrepro(*args: str, shell: str | None = None, cwd: Path | None = None
              ) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2] / "src")}
    command = [sys.executable, "-m", "pflrepro", *args]
    if shell is not None:  # a redirection the test needs (>&-, > /dev/full)
        command = ["bash", "-c", " ".join(f"'{w}'" for w in command) + " " + shell]
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=120)


def test_help_lists_the_users_commands_first_then_the_jobs() -> None:
    text = build_parser().format_help()
    user, jobs = text.index("\ncommands:\n"), text.index("\njob commands")
    assert user < jobs
    for name in USER_COMMANDS:
        assert user < text.index(f"\n  {name} ") < jobs, name
    for name in ("train", "prepare", "aggregate", "table", "tune-select"):
        assert text.index(f"\n  {name} ") > jobs, name
    assert "pflrepro partition --data" not in text  # the module's docstring is not the help


def test_every_command_is_listed_once_in_the_stated_order(
        capsys: pytest.CaptureFixture[str]) -> None:
    import argparse

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert list(sub.choices) == [*USER_COMMANDS, *JOB_COMMANDS]
    text = parser.format_help()
    listed = [line.split()[0] for line in text.splitlines()
              if line.startswith("  ") and not line.startswith("   ")  # not a wrapped line
              and line.split()[0] in sub.choices]
    assert listed == [*USER_COMMANDS, *JOB_COMMANDS]
    with pytest.raises(SystemExit):  # an unknown command's error lists them in that order
        parser.parse_args(["nosuch"])
    assert "(choose from 'run', 'list', 'plan'," in capsys.readouterr().err


def test_a_command_in_neither_list_is_refused() -> None:
    import argparse

    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    sub.add_parser("run", help="listed")
    sub.add_parser("frobnicate", help="in neither list")
    with pytest.raises(ValueError, match=r"\['frobnicate'\] in neither USER_COMMANDS"):
        group_help(parser, sub)


def test_output_paths_are_the_commands_given_output_options() -> None:
    args = build_parser().parse_args(["table", "--aggregate", "a.parquet", "--md", "t.md",
                                      "--tex", "t.tex", "--csv", "t.csv"])
    assert output_paths(args) == ["t.md", "t.tex", "t.csv"]
    args = build_parser().parse_args(["cost", "--runs", "r", "--benchmarks", "b", "--logs",
                                      "l", "--training", "{}", "--md", "c.md", "--csv",
                                      "c.csv"])
    assert output_paths(args) == ["c.md", "c.csv"]  # --projection-csv not given
    args = build_parser().parse_args(["aggregate", "--out", "a.parquet"])
    assert output_paths(args) == []  # a digested Parquet file: recorded as it is written


def _one_error_line(proc: subprocess.CompletedProcess, command: str) -> str:
    assert proc.returncode == 1, proc
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"pflrepro {command}: error: "), \
        proc.stderr  # once: no log ERROR line before it, no traceback
    return lines[0]


def test_an_error_is_printed_once(tmp_path: Path) -> None:
    # a log ERROR line, then argparse's "error:", said the same thing twice
    line = _one_error_line(_pflrepro("partition", "--data", str(tmp_path / "none"),
                                     "--dataset", "digits", "--spec",
                                     '{"scheme": "iid", "clients": 2}', "--seed", "0",
                                     "--out", str(tmp_path / "p.parquet")), "partition")
    assert "meta.json not found" in line


@pytest.mark.parametrize("redirect, command, message", [
    (">&-", "status", "standard output is closed"),
    ("> /dev/full", "list", "cannot write to standard output: No space left on device"),
])
def test_a_closed_or_full_stdout_is_one_line(redirect: str, command: str, message: str,
                                             tmp_path: Path) -> None:
    (tmp_path / "results/runs").mkdir(parents=True)
    if redirect == "> /dev/full" and not Path("/dev/full").exists():
        pytest.skip("no /dev/full")
    line = _one_error_line(_pflrepro(command, shell=redirect, cwd=tmp_path), command)
    assert message in line


def test_a_directory_given_for_an_output_file_is_one_line(tmp_path: Path) -> None:
    # plot --pdf /tmp: a traceback, and the temporary file went to the folder above
    before = sorted(p.name for p in tmp_path.parent.iterdir())
    proc = _pflrepro("schema", "--write", "--path", str(tmp_path))
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc  # as read
    assert (f"pflrepro schema: error: argument --path: {tmp_path} is a directory, not a "
            "regular file") in proc.stderr
    assert sorted(p.name for p in tmp_path.parent.iterdir()) == before


def test_a_config_nested_too_deeply_is_one_line(tmp_path: Path) -> None:
    deep = tmp_path / "deep.yaml"
    deep.write_text("x: " + "[" * 5000 + "]" * 5000 + "\n")
    line = _one_error_line(_pflrepro("check-config", str(deep)), "check-config")
    assert f"({deep}) is nested too deeply" in line


@pytest.mark.parametrize("spec, message", [
    ('{"scheme": "iid"}', "partition scheme 'iid' needs clients"),
    ('{"scheme": "practical", "clients": 4, "groups": "foo"}',
     "partition scheme 'practical': groups must be an integer, got 'foo'"),
])
def test_a_bad_partition_spec_is_one_line(tmp_path: Path, spec: str, message: str) -> None:
    import numpy as np

    from pflrepro.data.store import write_dataset

    write_dataset(tmp_path / "d", np.zeros((8, 1, 2, 2), dtype=np.uint8), np.arange(8) % 2,
                  name="d", num_classes=2, max_value=255, source="test")
    line = _one_error_line(_pflrepro("partition", "--data", str(tmp_path / "d"), "--dataset",
                                     "d", "--spec", spec, "--seed", "0", "--out",
                                     str(tmp_path / "p.parquet")), "partition")
    assert message in line


def test_a_missing_input_says_not_found(tmp_path: Path) -> None:
    # table --aggregate /nonexistent.parquet said only the path
    missing = tmp_path / "none.parquet"
    line = _one_error_line(_pflrepro("table", "--aggregate", str(missing), "--md",
                                     str(tmp_path / "t.md"), "--tex", str(tmp_path / "t.tex"),
                                     "--csv", str(tmp_path / "t.csv")), "table")
    assert line.endswith(f"{missing}: not found")
