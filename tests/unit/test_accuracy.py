"""pflrepro.reporting.accuracy: per-run accuracies of synthetic aggregates, by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from _table_helpers import make_run, two_run_aggregate

from pflrepro.reporting.accuracy import (
    best_mean_accuracy,
    final_accuracy,
    weighted_accuracy_per_round,
)
from pflrepro.store.results import N_TEST


def test_weighted_accuracy_by_hand() -> None:
    agg = make_run({0: [0.0, 0.2], 3: [0.5, 0.9]})
    out = weighted_accuracy_per_round(agg)
    assert out["round"].tolist() == [0, 3]
    # (0.5*10 + 0.9*30) / 40 = 0.8; unweighted (0.5 + 0.9) / 2 = 0.7
    assert out["weighted_accuracy"].tolist() == pytest.approx([0.15, 0.8])
    assert out["mean_accuracy"].tolist() == pytest.approx([0.1, 0.7])
    assert out["clients"].tolist() == [2, 2]
    assert out["n_test"].tolist() == [40, 40]
    assert out["method"].tolist() == ["federico", "federico"]


def test_weights_and_clients_without_test_set_are_ignored() -> None:
    agg = make_run({0: [0.5, 0.9, float("nan")]}, n_test=(10, 30, 0),
                   weights={0: np.eye(3)})
    out = weighted_accuracy_per_round(agg)
    assert out["weighted_accuracy"].item() == pytest.approx(0.8)
    assert out["mean_accuracy"].item() == pytest.approx(0.7)
    assert out["clients"].item() == 2


def test_final_accuracy_is_last_round_per_run() -> None:
    final = final_accuracy(two_run_aggregate())
    assert len(final) == 3
    assert set(final["round"]) == {5}
    got = dict(zip(zip(final["method"], final["split_seed"], strict=True),
                   final["weighted_accuracy"], strict=True))
    assert got == pytest.approx({("fedavg", 0): 0.8, ("fedavg", 1): 0.6, ("federico", 0): 0.5})


def test_missing_metrics_raise() -> None:
    agg = make_run({0: [0.5, 0.9]}, with_n_test=False)
    with pytest.raises(ValueError, match="n_test"):
        weighted_accuracy_per_round(agg)
    no_acc = make_run({})
    with pytest.raises(ValueError, match="test_accuracy"):
        final_accuracy(no_acc)
    with pytest.raises(ValueError, match="lacks column"):
        weighted_accuracy_per_round(pd.DataFrame({"metric": ["x"]}))
    with pytest.raises(ValueError, match="empty"):
        weighted_accuracy_per_round(make_run({}).iloc[:0])


def test_client_without_n_test_raises() -> None:
    agg = make_run({0: [0.5, 0.9]})
    agg = agg[~((agg["metric"] == N_TEST) & (agg["client"] == 1))]
    with pytest.raises(ValueError, match=r"client\(s\) \[1\]"):
        weighted_accuracy_per_round(agg)


def test_duplicate_accuracy_raises() -> None:
    run = make_run({0: [0.5, 0.9]})
    with pytest.raises(ValueError, match="twice"):
        weighted_accuracy_per_round(pd.concat([run, run]))


def test_best_mean_accuracy_by_hand() -> None:
    # unweighted per-round means: 0.5, 0.8, 0.7 -> BMTA 0.8 (round 5), final 0.7
    agg = make_run({0: [0.4, 0.6], 5: [0.7, 0.9], 10: [0.6, 0.8]})
    out = best_mean_accuracy(agg)
    assert len(out) == 1
    row = out.iloc[0]
    assert row["mean_bmta"] == pytest.approx(0.8)
    assert row["bmta_round"] == 5
    assert row["mean_final"] == pytest.approx(0.7)
    assert row["round"] == 10
    assert row["weighted_final"] == pytest.approx((0.6 * 10 + 0.8 * 30) / 40)  # 0.75


def test_best_mean_accuracy_ties_take_earliest_round() -> None:
    out = best_mean_accuracy(make_run({1: [0.9, 0.9], 2: [0.5, 0.5], 3: [0.9, 0.9]}))
    assert out["bmta_round"].item() == 1 and out["mean_bmta"].item() == pytest.approx(0.9)
