"""pflrepro.config.files: which files a config comes from, and a merge said in one line."""

from __future__ import annotations

from pathlib import Path

from pflrepro.config import files_in_force, merge_note


def _files(tmp_path: Path) -> tuple[str, str, str]:
    own = tmp_path / "config.yaml"
    own.write_text("experiments:\n  paper_a: {}\n  paper_b: {}\n")
    mine = tmp_path / "my.yaml"
    mine.write_text("experiments:\n  my_study: {}\n")
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text("experiments:\n  paper_a: {training: {rounds: 2}}\n")
    return str(own), str(mine), str(overlay)


def test_files_in_force_weakest_first(tmp_path: Path) -> None:
    own, mine, _ = _files(tmp_path)
    assert files_in_force([mine, own], [mine]) == [own, mine]
    assert files_in_force([mine, own], [mine], replace=True) == [mine]


def test_a_file_of_new_experiments_merged_over_the_own_config_is_said(tmp_path: Path) -> None:
    own, mine, _ = _files(tmp_path)
    note = merge_note([mine, own], [mine])  # tmp_path lies outside the working directory
    assert note == (f"{mine} was merged over {own} (its experiments are all new, so "
                    f"{own}'s run too); to run it alone: snakemake --configfile {mine} "
                    f"--replace-workflow-config --cores N")


def test_nothing_is_said_when_the_merge_is_meant_or_absent(tmp_path: Path) -> None:
    own, mine, overlay = _files(tmp_path)
    assert merge_note([mine, own], [mine], replace=True) == ""  # run alone
    assert merge_note([overlay, own], [overlay]) == ""  # an overlay of the own experiments
    assert merge_note([own], []) == ""  # no --configfile
    settings = tmp_path / "settings.yaml"
    settings.write_text("scale: cpu\n")  # no experiments of its own
    assert merge_note([str(settings), own], [str(settings)]) == ""
    assert merge_note([overlay, mine, own], [overlay, mine]) == ""  # one of them overlays
