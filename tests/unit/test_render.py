"""pflrepro.reporting.render: an accuracy table's CSV rows, Markdown and LaTeX, by hand."""

import math

import pandas as pd
import pytest

from pflrepro.reporting.render import (
    render_latex,
    render_markdown,
    table_layout,
    table_text,
    tidy_table,
)


def _table() -> pd.DataFrame:
    """Two methods, two partitions; fedavg has no run on p2 (n = 0)."""
    cols = pd.MultiIndex.from_tuples([(p, s) for p in ("p1", "p2") for s in ("mean", "std", "n")],
                                     names=["partition", "stat"])
    table = pd.DataFrame([[70.0, 14.0, 2, math.nan, math.nan, 0],
                          [50.0, math.nan, 1, 60.0, 2.5, 2]],
                         index=pd.Index(["fedavg", "federico"], name="method"), columns=cols)
    for col in cols:
        if col[-1] == "n":
            table[col] = table[col].astype("int64")
    return table


def test_layout_and_tidy_rows_leave_empty_cells_out() -> None:
    assert table_layout(_table()) == (["partition"], [("p1",), ("p2",)], ["weighted_final"])
    tidy = tidy_table(_table())
    assert tidy.to_dict("records") == [
        {"method": "fedavg", "partition": "p1", "mean": 70.0, "std": 14.0, "n": 2},
        {"method": "federico", "partition": "p1", "mean": 50.0, "std": pytest.approx(math.nan,
                                                                                    nan_ok=True),
         "n": 1},
        {"method": "federico", "partition": "p2", "mean": 60.0, "std": 2.5, "n": 2}]
    with pytest.raises(ValueError, match="expected the result of accuracy_table"):
        table_layout(pd.DataFrame({"a": [1]}))


def test_markdown_and_latex_cells_and_note() -> None:
    text = table_text(_table(), "T", labels={"p2": "P two"})
    assert text.usual_n == 2 and text.single  # counts 2, 1, 2; one cell of a single run
    md = render_markdown(text)
    assert md.splitlines()[:5] == [
        "Table: T", "", "| method | p1 | P two |", "|:--|--:|--:|",
        "| FedAvg | 70.0 ± 14.0 | — |"]
    assert "| FedeRiCo | 50.0 ± n/a (n=1) | 60.0 ± 2.5 |" in md
    assert "n = 1–2; n = 2 unless marked (n=...). n/a: a single run, no std." in md
    tex = render_latex(text)
    assert r"    FedAvg & 70.0 $\pm$ 14.0 & --- \\" in tex
    assert r"    Method & p1 & P two \\" in tex
