"""The table commands of pflrepro.cli.tables that no other test drives through main:
report-html and paper-vs-ours (aggregate, table, communication and claims: test_cli.py,
test_report_communication.py, test_claims_writer.py)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from pflrepro.cli import main
from pflrepro.store.records import record_problem

NUMBERS = Path(__file__).resolve().parents[2] / "config" / "paper_numbers.csv"


def test_report_html_writes_the_page_and_its_record(tmp_path: Path) -> None:
    md, page = tmp_path / "t.md", tmp_path / "t.html"
    md.write_text("# Title\n\n| a | b |\n|:--|--:|\n| x | 1.00 |\n")
    assert main(["report-html", "--md", str(md), "--out", str(page), "--title", "T"]) == 0
    text = page.read_text()
    assert "<title>T</title>" in text and '<td class="r">1.00</td>' in text
    assert record_problem(page) is None


def test_paper_vs_ours_without_runs_lists_every_cell_as_not_run(tmp_path: Path) -> None:
    from pflrepro.reporting.paper import load_paper_numbers

    table = "federico_table1"
    cells = [c for c in load_paper_numbers(NUMBERS)
             if c.table_id == table and c.experiment_at("cpu")]
    md, csv = tmp_path / "p.md", tmp_path / "p.csv"
    assert main(["paper-vs-ours", "--numbers", str(NUMBERS), "--table", table, "--scale",
                 "cpu", "--md", str(md), "--csv", str(csv)]) == 0
    frame = pd.read_csv(csv)
    assert frame["id"].tolist() == [c.id for c in cells]
    assert frame["status"].str.startswith("not run").all()
    assert md.read_text().startswith(f"# {cells[0].paper} {cells[0].table}: the paper's "
                                     "numbers and ours (cpu scale)")
    assert record_problem(md) is None and record_problem(csv) is None


def test_paper_vs_ours_names_an_unknown_table(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["paper-vs-ours", "--numbers", str(NUMBERS), "--table", "no_such_table",
                 "--scale", "cpu", "--md", str(tmp_path / "p.md"), "--csv",
                 str(tmp_path / "p.csv")]) == 1
    assert "no row of table 'no_such_table'" in capsys.readouterr().err
    assert not (tmp_path / "p.md").exists()
