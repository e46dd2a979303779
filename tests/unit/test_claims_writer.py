"""pflrepro.reporting.claims.writer: the claims table as Markdown and CSV, and its CLI."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
import yaml
from _claims_helpers import (
    COMPARE,
    REPO,
    _claim,
    copies,
    design_from,
    doc,
    evaluate,
    table1,
)

from pflrepro.cli import main
from pflrepro.reporting.claims.parse import (
    COLUMNS,
    design_json,
)
from pflrepro.reporting.claims.writer import write_claims


def test_write_claims_markdown_and_csv(tmp_path: Path) -> None:
    frame = evaluate(table1(), COMPARE, {**COMPARE, "a": "fedavg", "op": "<"},
                     {**COMPARE, "b": "fedem"})
    write_claims(frame, tmp_path / "c.md", tmp_path / "c.csv", scale="paper")
    csv = pd.read_csv(tmp_path / "c.csv")
    assert csv["verdict"].tolist() == ["fails", "holds", "missing"]
    assert csv["margin"].tolist()[:2] == [pytest.approx(-2.0), pytest.approx(12.0)]
    assert csv["n"].tolist() == [2, 2, 0] and (csv["level"] == 0.95).all()
    # identical copies: zero-width intervals at the margin
    assert csv["ci_low"].tolist()[:2] == csv["ci_high"].tolist()[:2] == [pytest.approx(-2.0),
                                                                        pytest.approx(12.0)]
    assert math.isnan(csv["margin"].iloc[2]) and math.isnan(csv["ci_low"].iloc[2])
    assert list(csv.columns) == list(COLUMNS)
    md = (tmp_path / "c.md").read_text()
    # the summary opens the file: counts per paper (all three rows are FedeRiCo's), then
    # the failing rows with their margins, then every row
    lines = md.splitlines()
    assert lines[2] == "## Summary"
    assert ("| paper | rows | holds | fails | inconclusive | undecidable | incomplete "
            "| missing | by design | selection |") in md
    assert "| FedeRiCo | 3 | 1 | 1 | 0 | 0 | 0 | 1 | 0 | 0 |" in md
    assert "| **all** | 3 | 1 | 1 | 0 | 0 | 0 | 1 | 0 | 0 |" in md
    assert "Failing rows (1)" in md
    assert "| c0 | FedeRiCo | exp | -2.00 pp | [-2.00, -2.00] | claim 0 |" in md
    assert md.index("## Summary") < md.index("Failing rows") < md.index("## Every claim")
    assert "| **fails** | -2.00 pp | 2 | [-2.00, -2.00] |" in md
    assert "| holds | +12.00 pp | 2 | [+12.00, +12.00] |" in md
    assert "| missing | — | 0 | — |" in md
    assert not list(tmp_path.glob(".*.tmp"))


def test_cli_claims(tmp_path: Path) -> None:
    agg = tmp_path / "exp.parquet"
    from pflrepro.store.io import write_parquet

    write_parquet(copies(table1()), agg)  # with its digest record (issue 27, item 3)
    claims = tmp_path / "claims.yaml"
    claims.write_text(yaml.safe_dump(doc(
        _claim(check={**COMPARE, "a": "fedavg", "op": "<"}),
        _claim(id="y", experiments={"paper": ["nope"], "cpu": []}))))
    labels = json.dumps({"partitions": {"p2": "2 distributions"}, "experiments": {}})
    design = design_json(design_from(copies(table1())))
    md, csv = tmp_path / "out/c.md", tmp_path / "out/c.csv"
    md.parent.mkdir()
    args = ["claims", "--claims", str(claims), "--scale", "paper", "--md", str(md),
            "--csv", str(csv)]
    assert main([*args, "--aggregate", str(agg), "--labels", labels, "--design", design]) == 0
    out = pd.read_csv(csv)
    assert out["verdict"].tolist() == ["holds", "missing"]
    assert out["numbers"].iloc[0] == ("fedavg vs local: 2 distributions 60.0 vs 85.0; "
                                      "p4 70.0 vs 82.0")
    first = csv.read_bytes()
    assert main([*args, "--aggregate", str(agg), "--labels", labels, "--design", design]) == 0
    assert csv.read_bytes() == first  # byte-identical, bootstrap included
    # no aggregate at all: every row missing
    assert main([*args, "--aggregate", "--design", design]) == 0
    assert set(pd.read_csv(csv)["verdict"]) == {"missing"}
    # the design from a config file: exp is not in it, so missing
    assert main([*args, "--aggregate", str(agg),
                 "--config", str(REPO / "tests/workflow/config.yaml")]) == 0
    assert set(pd.read_csv(csv)["verdict"]) == {"missing"}
    with pytest.raises(SystemExit):  # the design is required
        main([*args, "--aggregate", str(agg)])
    claims.write_text("claims: [{id: x}]\n")
    assert main([*args, "--design", design]) == 1


def test_summary_counts_per_paper_and_no_failure() -> None:
    from pflrepro.reporting.claims.writer import summary_lines

    frame = evaluate(table1(), {**COMPARE, "a": "fedavg", "op": "<"},
                     {**COMPARE, "b": "fedem"})
    frame.loc[1, "paper"] = "FedMix"
    text = "\n".join(summary_lines(frame))
    assert "| FedeRiCo | 1 | 1 | 0 | 0 | 0 | 0 | 0 | 0 | 0 |" in text
    assert "| FedMix | 1 | 0 | 0 | 0 | 0 | 0 | 1 | 0 | 0 |" in text
    assert "| **all** | 2 | 1 | 0 | 0 | 0 | 0 | 1 | 0 | 0 |" in text
    assert "No independent claim fails." in text and "Failing rows" not in text
