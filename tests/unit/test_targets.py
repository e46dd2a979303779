"""Writers write only regular files: store.targets, and every output option of the CLI."""

from __future__ import annotations

import argparse
import os
import stat
from pathlib import Path

import pytest

from pflrepro.cli import build_parser, main
from pflrepro.cli.options import output_file
from pflrepro.store.io import write_text
from pflrepro.store.targets import NotRegularFileError, target_problem

#: Option names that name an output file, in every command that has them.
OUTPUT_OPTIONS = {"--out", "--md", "--tex", "--csv", "--pdf", "--png", "--path", "--selection",
                  "--figure", "--checkpoint", "--log", "--projection-csv"}
#: Output options that name a folder, not a file: (command, option).
FOLDER_OUTPUTS = {("prepare", "--out")}
#: Options with an output's name that name an input: (command, option). report-html reads
#: the table it renders (pflrepro.store.recorded_text: a FIFO there is set aside unopened).
INPUT_OPTIONS = {("report-html", "--md")}


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def output_options() -> list[tuple[str, str, int]]:
    """(command, option, values it takes) of every output-file option of the CLI."""
    found = []
    for name, sub in _subcommands().items():
        for action in sub._actions:
            for option in action.option_strings:
                if (option in OUTPUT_OPTIONS
                        and (name, option) not in FOLDER_OUTPUTS | INPUT_OPTIONS):
                    found.append((name, option, action.nargs if isinstance(action.nargs, int)
                                  else 1))
    return found


@pytest.fixture
def specials(tmp_path: Path) -> dict[str, Path]:
    """A FIFO, a folder and (as root) a character device node, in a temporary folder."""
    out = {"fifo": tmp_path / "fifo", "folder": tmp_path / "folder"}
    os.mkfifo(out["fifo"])
    out["folder"].mkdir()
    try:
        os.mknod(tmp_path / "null", stat.S_IFCHR | 0o666, os.makedev(1, 3))
        out["device"] = tmp_path / "null"
    except PermissionError:
        pass
    return out


def test_every_output_option_is_checked() -> None:
    options = output_options()
    # the commands that write tables, figures, runs and records are all found
    assert {"table", "plot", "train", "schema", "tune-select", "aggregate"} <= {c for c, _, _
                                                                                  in options}
    unchecked = [(c, o) for c, o, _ in options
                 for a in _subcommands()[c]._actions if o in a.option_strings
                 and a.type is not output_file]
    assert unchecked == []


@pytest.mark.parametrize(("command", "option", "count"), output_options())
def test_output_options_refuse_special_files(command: str, option: str, count: int,
                                             specials: dict[str, Path],
                                             capsys: pytest.CaptureFixture[str]) -> None:
    for kind, path in specials.items():
        before = os.lstat(path)
        with pytest.raises(SystemExit) as exit_info:
            main([command, option, *[str(path)] * count])
        assert exit_info.value.code == 2
        err = capsys.readouterr().err
        assert "not a regular file" in err, (kind, err)
        assert "Traceback" not in err
        after = os.lstat(path)
        assert (after.st_mode, after.st_ino) == (before.st_mode, before.st_ino), kind


def test_schema_write_refuses_a_fifo_and_leaves_it(specials: dict[str, Path]) -> None:
    with pytest.raises(SystemExit):
        main(["schema", "--write", "--path", str(specials["fifo"])])
    assert stat.S_ISFIFO(os.lstat(specials["fifo"]).st_mode)


@pytest.mark.parametrize("kind", ["fifo", "folder", "device"])
def test_atomic_path_refuses_what_is_no_regular_file(kind: str,
                                                     specials: dict[str, Path]) -> None:
    if kind not in specials:
        pytest.skip("making a device node needs root")
    path = specials[kind]
    mode = os.lstat(path).st_mode
    with pytest.raises(NotRegularFileError, match="not a regular file"):
        write_text(path, "x")
    assert os.lstat(path).st_mode == mode
    assert list(path.parent.glob(".*.tmp")) == []  # no temporary file left


def test_a_link_is_replaced_not_written_through(tmp_path: Path) -> None:
    target = tmp_path / "target.txt"
    target.write_text("theirs")
    link = tmp_path / "out.txt"
    link.symlink_to(target)
    write_text(link, "ours")
    assert not link.is_symlink() and link.read_text() == "ours"
    assert target.read_text() == "theirs"


def test_command_line_outputs_create_folders_only_inside_the_working_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project, outside = tmp_path / "project", tmp_path / "elsewhere"
    project.mkdir()
    monkeypatch.chdir(project)
    assert "create it first" in str(target_problem(outside / "t.md"))
    assert target_problem(project / "new" / "t.md") is None
    assert target_problem(tmp_path / "t.md") is None  # an existing folder outside: fine
    write_text("results/tables/t.md", "x")  # the library creates what it is given
    assert (project / "results" / "tables" / "t.md").read_text() == "x"


def test_schema_write_to_a_missing_folder_outside_creates_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "project").mkdir()
    monkeypatch.chdir(tmp_path / "project")
    with pytest.raises(SystemExit):
        main(["schema", "--write", "--path", str(tmp_path / "nowhere" / "x.yaml")])
    assert "create it first" in capsys.readouterr().err
    assert not (tmp_path / "nowhere").exists()
