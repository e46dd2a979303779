"""No command ends in a traceback: every subcommand, every malformed input, one line.

Each subcommand of the CLI is run with every value-taking option (and positional) set
to one kind of malformed input at a time: JSON of the wrong shape, a number out of
range, text where a number belongs, a folder, an empty file, a binary file, a text file
of the wrong kind, a path that does not exist. Whatever the command makes of it, it
ends with a non-zero status and at most a few lines on stderr, none of them a
traceback, and none the catch-all's "unexpected" line (cli.support.run_command) that
stands for an input the command does not check; the error line names the value (a
path: its file), the option or the argument.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest

from pflrepro.cli import build_parser, main

#: The malformed inputs: name -> function of a scratch folder giving the value.
BAD_VALUES = {
    "json-list": lambda d: "[1, 2]",
    "json-object-of-nothing": lambda d: '{"algorithm": "fedavg"}',
    "broken-json": lambda d: '{"scheme": ',
    "negative": lambda d: "-3",
    "text": lambda d: "zebra",
    "folder": lambda d: str(d / "folder"),
    "empty-file": lambda d: str(d / "empty"),
    "binary-file": lambda d: str(d / "binary.bin"),
    "wrong-text-file": lambda d: str(d / "notes.yaml"),
    "missing": lambda d: str(d / "nowhere" / "x"),
}
#: Options whose value is never read as input: the output files (test_targets.py) and
#: options that only name things to show.
SKIP = {"--help"}


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def _argv(command: str, sub: argparse.ArgumentParser, value: str) -> list[str]:
    argv = [command]
    positionals: list[str] = []
    for action in sub._actions:
        if isinstance(action, (argparse._HelpAction, argparse._StoreTrueAction,
                               argparse._StoreFalseAction)) or action.nargs == 0:
            continue
        count = action.nargs if isinstance(action.nargs, int) else 1
        if action.option_strings:
            if set(action.option_strings) & SKIP:
                continue
            argv += [action.option_strings[0], *[value] * count]
        else:
            positionals += [value] * count
    return [*argv, *positionals]


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "folder").mkdir()
    (tmp_path / "empty").write_bytes(b"")
    (tmp_path / "binary.bin").write_bytes(bytes(range(256)) * 4)
    (tmp_path / "notes.yaml").write_text("experiments: [1, 2]\nrounds: many\n")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)  # no Snakefile, no results/: nothing of the project's is touched
    monkeypatch.setenv("PFLREPRO_NO_NETWORK", "1")
    return tmp_path


@pytest.mark.parametrize("bad", sorted(BAD_VALUES))
@pytest.mark.parametrize("command", sorted(_subcommands()))
def test_malformed_input_ends_in_one_line(command: str, bad: str, scratch: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    sub = _subcommands()[command]
    argv = _argv(command, sub, BAD_VALUES[bad](scratch))
    try:
        code = main(argv)
    except SystemExit as exit_info:  # argparse: usage and one error line
        code = exit_info.code
    err = capsys.readouterr().err
    assert "Traceback" not in err, (argv, err)
    # the catch-all's line is for bugs: a malformed input gets a message of its own
    assert "unexpected" not in err, (argv, err)
    if code == 0:  # some commands accept some of these (text is a valid title)
        return
    lines = [line for line in err.splitlines() if line.strip()]
    errors = [line for line in lines if "error" in line.lower()]
    assert errors, (argv, err)
    assert len(errors) <= 2, (argv, err)
    # the line says what is wrong where: the value (a path names its file), the option
    # or argparse's "argument ..."
    value = BAD_VALUES[bad](scratch)
    options = [o for a in sub._actions for o in a.option_strings]
    assert any(value in line or "argument" in line or any(o in line for o in options)
               for line in errors), (argv, err)
    assert os.listdir(scratch / "folder") == []  # nothing written into what was no output
