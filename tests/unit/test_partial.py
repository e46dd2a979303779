"""pflrepro.reporting.partial: the table of the runs that finished, failed ones listed."""

from pathlib import Path

import pandas as pd
from test_tables import make_run

from pflrepro.reporting.partial import PartialRun, write_partial_report
from pflrepro.store.io import write_parquet


def _runs(tmp_path: Path) -> list[PartialRun]:
    runs = []
    for i, method in enumerate(["fedavg", "local", "ckt"]):
        path = tmp_path / f"{method}.parquet"
        if method != "ckt":  # ckt failed: no table
            write_parquet(make_run({0: [0.1, 0.1], 5: [0.5 + 0.1 * i, 0.9]}, method=method),
                          path)
        runs.append(PartialRun(str(path), f"logs/{method}.log", f"{method}, p, split 0"))
    return runs


def test_present_runs_tabled_and_missing_ones_listed(tmp_path: Path) -> None:
    md, csv = tmp_path / "out" / "e.md", tmp_path / "out" / "e.csv"
    assert write_partial_report("e", _runs(tmp_path), md, csv) == (2, 1)
    text = md.read_text()
    assert "PARTIAL: e, 2 of 3 runs" in text
    assert f"- ckt, p, split 0: `{tmp_path / 'ckt.parquet'}` (log: `logs/ckt.log`)" in text
    # fedavg (0.5*10 + 0.9*30)/40 = 80 %, local (0.6*10 + 0.9*30)/40 = 82.5 %
    table = pd.read_csv(csv).set_index("method")["mean"]
    assert table.to_dict() == {"fedavg": 80.0, "local": 82.5}


def test_damaged_runs_count_as_missing_and_complete_or_empty_sets_write_nothing(
        tmp_path: Path) -> None:
    runs = _runs(tmp_path)
    path = Path(runs[0].path)
    path.write_bytes(path.read_bytes()[:50])  # truncated
    md, csv = tmp_path / "e.md", tmp_path / "e.csv"
    assert write_partial_report("e", runs, md, csv) == (1, 2)
    assert "- fedavg, p, split 0" in md.read_text()
    md.unlink()
    assert write_partial_report("e", runs[1:2], md, csv) == (1, 0)  # nothing missing
    assert write_partial_report("e", runs[2:], md, csv) == (0, 1)  # nothing to table
    assert not md.exists()
