"""The options' types of pflrepro.cli.options: each value checked when the line is read."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pflrepro.cli.options import (
    open_unit_interval,
    output_file,
    positive_int,
    positive_minutes,
    positive_seconds,
)


@pytest.mark.parametrize("kind, text, value", [
    (positive_int, "1", 1), (positive_int, "16", 16),
    (positive_minutes, "0.5", 0.5), (positive_minutes, "60", 60.0),
    (positive_seconds, "5", 5.0), (positive_seconds, "1e-3", 0.001),
    (open_unit_interval, "0.2", 0.2), (open_unit_interval, "0.999", 0.999),
])
def test_a_good_value_is_read(kind: Callable[[str], Any], text: str, value: Any) -> None:
    assert kind(text) == value


@pytest.mark.parametrize("kind, text, message", [
    (positive_int, "0", "must be >= 1, got 0"),
    (positive_int, "-1", "must be >= 1, got -1"),
    (positive_int, "two", "expected an integer >= 1, got 'two'"),
    (positive_int, "1.5", "expected an integer >= 1, got '1.5'"),
    (positive_minutes, "0", "finite number of minutes > 0, got 0"),
    (positive_minutes, "nan", "finite number of minutes > 0, got nan"),
    (positive_minutes, "inf", "finite number of minutes > 0, got inf"),
    (positive_minutes, "soon", "expected minutes > 0, got 'soon'"),
    (positive_seconds, "-5", "finite number of seconds > 0, got -5"),
    (positive_seconds, "inf", "finite number of seconds > 0, got inf"),
    (positive_seconds, "x", "expected seconds > 0, got 'x'"),
    (open_unit_interval, "0", "0 is not in (0, 1)"),
    (open_unit_interval, "1", "1 is not in (0, 1)"),
    (open_unit_interval, "nan", "nan is not in (0, 1)"),
    (open_unit_interval, "half", "'half' is not a number"),
])
def test_a_bad_value_is_one_argparse_message(kind: Callable[[str], Any], text: str,
                                             message: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError) as err:
        kind(text)
    assert message in str(err.value)


def test_output_file_creates_folders_only_inside_the_working_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project, outside = tmp_path / "project", tmp_path / "elsewhere"
    project.mkdir()
    monkeypatch.chdir(project)
    with pytest.raises(argparse.ArgumentTypeError, match="create it first"):
        output_file(str(outside / "deep" / "t.md"))
    assert output_file("new/t.md") == "new/t.md"  # inside: created by the writer, later
    assert not (project / "new").exists()  # the type only looks
    with pytest.raises(argparse.ArgumentTypeError, match="is a directory, not a regular"):
        output_file(str(project))


def test_the_parser_prints_the_types_message(capsys: pytest.CaptureFixture[str]) -> None:
    from pflrepro.cli import build_parser

    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(["tune-split", "--partition", "p", "--seed", "0", "--out",
                                   "v.parquet", "--fraction", "1.5"])
    assert exit_info.value.code == 2
    assert ("argument --fraction: 1.5 is not in (0, 1): the share of each client's training "
            "rows held out for validation") in capsys.readouterr().err
