"""Majority class: each client predicts its most frequent training label."""

import numpy as np
import pytest
import torch
from _fl_helpers import make_engine

from pflrepro.algorithms import ALGORITHMS, INFOS
from pflrepro.algorithms.base import parse_hyper
from pflrepro.algorithms.majority import Majority, majority_labels
from pflrepro.data.federated import FederatedData
from pflrepro.store import results as R

# Three clients, three classes; rows 0-2 client 0's training rows, 3-4 its test rows,
# and so on. Client 0 trains on 2, 2, 1 (majority 2), tests on 2, 0; client 1 on 0, 1
# (a tie: 0), tests on 1; client 2 on 1, 1, 1, 0 (1), tests on 1, 1, 2.
LABELS = [2, 2, 1, 2, 0, 0, 1, 1, 1, 1, 1, 0, 1, 1, 2]
TRAIN = ([0, 1, 2], [5, 6], [8, 9, 10, 11])
TEST = ([3, 4], [7], [12, 13, 14])


def _data() -> FederatedData:
    n = len(LABELS)
    return FederatedData(x=torch.randn(n, 1, 1, 2, generator=torch.Generator().manual_seed(0)),
                         y=torch.tensor(LABELS), num_classes=3, groups=(-1, -1, -1),
                         train=tuple(torch.tensor(t) for t in TRAIN),
                         test=tuple(torch.tensor(t) for t in TEST))


def _accuracies(**training) -> tuple[dict[int, float], list[float]]:
    """Round 2's accuracy per client, and the logged test sizes."""
    e = make_engine(_data(), rounds=2, **training)
    frame = e.run(Majority(e, parse_hyper(Majority, {}))).to_frame(
        {c: "x" if "seed" not in c else 0 for c in R.CONFIG_COLUMNS})
    acc = frame[(frame.metric == R.TEST_ACCURACY) & (frame["round"] == 2)]
    sizes = frame[frame.metric == R.N_TEST].sort_values("client").value.tolist()
    return dict(zip(acc.client.astype(int), acc.value, strict=True)), sizes


def test_registered_without_hyperparameters():
    assert ALGORITHMS["majority"] is Majority
    info = INFOS["majority"]
    assert info.client_sampling and info.heterogeneous_models and not info.needs_public


def test_majority_labels_ties_to_the_smallest():
    labels = [torch.tensor([2, 2, 1]), torch.tensor([0, 1]), torch.tensor([1, 1, 1, 0]),
              torch.tensor([], dtype=torch.int64)]
    assert majority_labels(labels, 3).tolist() == [2, 0, 1, 0]


def test_own_test_rows_by_hand():
    # client 0 predicts 2 on (2, 0): 1/2; client 1 predicts 0 on (1,): 0; client 2
    # predicts 1 on (1, 1, 2): 2/3
    acc, sizes = _accuracies()
    assert acc == pytest.approx({0: 0.5, 1: 0.0, 2: 2 / 3}) and sizes == [2, 1, 3]


def test_global_test_rows_by_hand():
    # every client is scored on all test rows (2, 0, 1, 1, 1, 2): label 2 is 2/6 of
    # them, 0 is 1/6, 1 is 3/6
    acc, sizes = _accuracies(eval_test="global")
    assert acc == pytest.approx({0: 2 / 6, 1: 1 / 6, 2: 3 / 6}) and sizes == [6, 6, 6]


def test_nothing_trains_or_is_sent():
    e = make_engine(_data(), client_fraction=0.5)
    alg = Majority(e, parse_hyper(Majority, {}))
    state = alg.init()
    state, losses = alg.round(state, 1)
    assert np.isnan(losses).all() and state["labels"].tolist() == [2, 0, 1]
    p = alg.predict(state, 2, e.data.x[:4], 1)
    assert p.tolist() == [[0.0, 1.0, 0.0]] * 4
    frame = e.run(alg).to_frame({c: "x" if "seed" not in c else 0 for c in R.CONFIG_COLUMNS})
    assert not frame.metric.isin([R.TRAIN_LOSS]).any()
