"""benchmarks/perfedckt_readings.py: the majority rule's scores and a readings row by hand."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[2]
if str(REPO / "benchmarks") not in sys.path:
    sys.path.insert(0, str(REPO / "benchmarks"))

import perfedckt_readings as R  # noqa: E402


def test_majority_scores_by_hand() -> None:
    labels = np.array([0, 0, 1, 1, 1])
    frame = pd.DataFrame({"client": [0, 0, 0, 1, 1], "index": [0, 1, 2, 3, 4],
                          "split": ["train", "train", "test", "train", "test"]})
    s = R.majority_scores(frame, labels, 2)
    # client 0 predicts 0, its test row is 1: 0; client 1 predicts 1: 1
    assert s["own_mean"] == s["own_weighted"] == 50.0
    assert s["global"] == 50.0  # the test rows (1, 1): client 0 right on 0, client 1 on both
    assert (s["one_class"], s["at_min"]) == (1, 1)
    assert (s["clients"], s["size_min"], s["size_max"]) == (2, 2, 3)


def test_reading_rows_of_a_single_draw_and_of_a_redraw_that_never_passes() -> None:
    labels = np.random.default_rng(7).permutation(np.repeat(np.arange(10), 60))
    row = R.reading_row("top_up", 20, labels)
    assert row["clients"] == "20/20/20" and row["passing"] == "single draw"
    assert all(len(row[k].split("/")) == 3 for k in row if k != "passing")
    # 600 rows over 100 clients at alpha 0.01: no draw gives every client 5 rows
    row = R.reading_row("resample", 100, labels)
    assert row["passing"] == "0/0/0 of 1000"
    assert {row[k] for k in row if k != "passing"} == {"-/-/-"}
