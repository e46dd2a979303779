"""pflrepro.reporting.tuning: the tuning table's warnings and its Markdown."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from pflrepro.reporting.tuning import LAST_ROUND, tuning_table, write_outputs
from pflrepro.tuning import Grid


def _scores(rows: list[tuple[float, float, int, int, float]]) -> pd.DataFrame:
    """(sigma, prox, best round, last round, score) per trial; no xi across."""
    return pd.DataFrame([{"partition": "p", "split": 0, "point": f"sigma{s:g}_prox{x:g}",
                          "value_sigma": s, "value_prox": x, "seed": 0, "score": v,
                          "round": r, "last_round": last, "xi_within": 0.05,
                          "xi_across": math.nan}
                         for s, x, r, last, v in rows])


GRIDS = [Grid("sigma", (1e-6, 1e-5, 1e-4)), Grid("prox", (0.0, 0.01, 1.0))]


def test_a_selection_at_a_grid_edge_or_at_the_budgets_end_is_warned() -> None:
    scores = _scores([(1e-4, 0.01, 9, 9, 0.9), (1e-5, 0.0, 4, 9, 0.8),
                      (1e-6, 1.0, 3, 9, 0.7)])
    table = tuning_table(scores, GRIDS, {("p", 0): {"sigma": 1e-4, "prox": 0.01}})
    assert table["warning"].tolist() == [
        f"sigma = 0.0001: the grid's highest value; {LAST_ROUND}", "", ""]
    # inside the grid, a best round before the last, prox 0 (nothing below it): none
    table = tuning_table(scores, GRIDS, {("p", 0): {"sigma": 1e-5, "prox": 0.0}})
    assert table["warning"].tolist() == ["", "", ""]
    # the last round is the criterion's own round under final_mean: no warning for it
    table = tuning_table(scores, GRIDS, {("p", 0): {"sigma": 1e-4, "prox": 0.01}},
                         "final_mean")
    assert table["warning"].tolist()[0] == "sigma = 0.0001: the grid's highest value"


def test_markdown_rounds_are_integers_and_a_missing_xi_is_a_dash(tmp_path: Path) -> None:
    scores = _scores([(1e-5, 0.01, 10, 10, 0.9), (1e-5, 0.01, 7, 10, 0.8),
                      (1e-6, 0.0, 3, 10, 0.5)])
    scores.loc[1, "seed"] = 1  # two seeds: best round 8.5 on average
    scores.loc[2, "xi_across"] = 0.01  # another point logs a pair across groups
    table = tuning_table(scores, GRIDS, {("p", 0): {"sigma": 1e-5, "prox": 0.01}})
    md, csv = tmp_path / "t.md", tmp_path / "t.csv"
    write_outputs(table, "note.", str(md), str(csv), "title")
    lines = md.read_text().splitlines()
    header = [c.strip() for c in lines[2].strip("|").split("|")]
    row = dict(zip(header, (c.strip() for c in lines[4].strip("|").split("|")), strict=True))
    assert row["best_round"] == "8.5" and row["last_round"] == "10"
    assert row["xi_within"] == "0.0500" and row["xi_across"] == "–"
    assert "nan" not in md.read_text() and "10.0" not in md.read_text()
    # one seed, a whole round: an integer
    table = tuning_table(scores[scores["seed"] == 0].head(1), GRIDS,
                         {("p", 0): {"sigma": 1e-5, "prox": 0.01}})
    write_outputs(table, "note.", str(md), str(csv), "title")
    text = md.read_text()
    assert "| 10 | 10 |" in text
    assert f"- p split 0: {LAST_ROUND}" in text  # warnings under the table
    assert pd.read_csv(csv)["warning"].tolist() == [LAST_ROUND]
