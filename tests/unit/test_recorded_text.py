"""A text output read again by a job (pflrepro.store.recorded_text)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from pflrepro.cli import main
from pflrepro.store.io import CorruptFileError, WrongFileError, digest_path, write_digest
from pflrepro.store.recorded_text import read_recorded_text


def _table(root: Path, text: str = "| a |\n|---|\n| 1 |\n", record: bool = True) -> Path:
    path = root / "results" / "tables" / "t.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if record:
        write_digest(path)
    return path


def test_a_table_matching_its_record_or_without_one_is_read(tmp_path: Path) -> None:
    assert read_recorded_text(_table(tmp_path)) == "| a |\n|---|\n| 1 |\n"
    hand = tmp_path / "mine.md"
    hand.write_text("# mine\n")
    assert read_recorded_text(hand) == "# mine\n"


def test_a_fifo_in_the_results_tree_is_set_aside_unopened(tmp_path: Path) -> None:
    path = tmp_path / "results" / "tables" / "t.md"
    path.parent.mkdir(parents=True)
    os.mkfifo(path)
    with pytest.raises(CorruptFileError, match="set aside as t.md.corrupt-1.*rerun snakemake"):
        read_recorded_text(path)  # opening the FIFO would wait for a writer forever
    assert not os.path.lexists(path)
    assert stat.S_ISFIFO(os.lstat(path.with_name("t.md.corrupt-1")).st_mode)


def test_a_fifo_elsewhere_is_refused_and_left(tmp_path: Path) -> None:
    path = tmp_path / "t.md"
    os.mkfifo(path)
    with pytest.raises(WrongFileError, match="is a FIFO.*nothing was changed"):
        read_recorded_text(path)
    assert stat.S_ISFIFO(os.lstat(path).st_mode)


def test_a_table_that_differs_from_its_record_is_set_aside(tmp_path: Path) -> None:
    path = _table(tmp_path)
    path.write_text("| a |\n|---|\n| 2 |\n")
    with pytest.raises(CorruptFileError, match="does not match its digest record"):
        read_recorded_text(path)
    assert not path.exists() and path.with_name("t.md.corrupt-1").exists()


def test_a_garbled_record_is_named_not_quoted(tmp_path: Path) -> None:
    path = _table(tmp_path)
    digest_path(path).write_bytes(b"\xff secret text")
    with pytest.raises(CorruptFileError, match="not UTF-8") as info:
        read_recorded_text(path)
    assert "secret" not in str(info.value)


def test_report_html_sets_a_fifo_table_aside_in_one_line(tmp_path: Path, monkeypatch,
                                                         capsys) -> None:
    monkeypatch.chdir(tmp_path)
    path = Path("results/tables/t.md")
    path.parent.mkdir(parents=True)
    os.mkfifo(path)
    assert main(["report-html", "--md", str(path), "--out", "results/report/t.html"]) != 0
    err = capsys.readouterr().err
    assert "set aside" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    _table(tmp_path)
    assert main(["report-html", "--md", str(path), "--out", "results/report/t.html"]) in (0, None)
    assert "<table" in Path("results/report/t.html").read_text()
