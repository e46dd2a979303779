"""HypCluster: argmin assignment, per-hypothesis size-weighted averaging, q = 1 is FedAvg,
prediction, the cluster record and the traffic, on tiny linear-model engines.

The hand-made case: two classes, clients 0 and 2 hold only label 0, client 1 only
label 1; h_0 = 0 (loss ln 2 everywhere), h_1 = bias (+3, −3) (favours class 0, loss
log(1 + e^−6) ≈ 0.0025 on label 0, ≈ 6.0025 on label 1), h_2 = bias (−3, +3) (the
mirror). So clients 0 and 2 choose h_1, client 1 chooses h_2, nobody chooses h_0.
"""

import dataclasses
import math

import numpy as np
import pytest
import torch
from _alg_helpers import algorithm_factory
from _fl_helpers import B, W, assert_params_close, clone, make_data, manual_sgd

from pflrepro.algorithms import clustered_fl
from pflrepro.algorithms.base import parse_hyper
from pflrepro.algorithms.fedavg import FedAvg
from pflrepro.algorithms.hypcluster import CLUSTER, HypCluster, HypClusterHyper
from pflrepro.store.results import MetricLog
from pflrepro.training.communication import Traffic
from pflrepro.training.params import put, take

_alg = algorithm_factory(HypCluster)


def _labelled(labels=(0, 1, 0)):
    """make_data's three clients (train 4, 2, 3; test 2, 1, 2), client k all label labels[k]."""
    data = make_data()
    y = data.y.clone()
    for k, label in enumerate(labels):
        y[data.train[k]] = label
        y[data.test[k]] = label
    return dataclasses.replace(data, y=y)


def _bias_only(b0: float, b1: float):
    return {W: torch.zeros(2, 2), B: torch.tensor([b0, b1])}


def _set_hypotheses(state, values):
    for m, params in enumerate(values):
        put(state["hypotheses"], m, params)


HAND = [_bias_only(0.0, 0.0), _bias_only(3.0, -3.0), _bias_only(-3.0, 3.0)]


def test_defaults_and_metric_name():
    assert HypClusterHyper().hypotheses == 3
    assert HypCluster.records == (CLUSTER,) and CLUSTER == clustered_fl.CLUSTER


def test_init_draws_and_initial_choice():
    e, alg = _alg({"hypotheses": 3})
    state = alg.init()
    assert_params_close(take(state["hypotheses"], 0), e.init_params(), atol=0, rtol=0)
    for m in (1, 2):
        assert_params_close(take(state["hypotheses"], m), e.init_params(client=m),
                            atol=0, rtol=0)
    assert not torch.equal(state["hypotheses"][W][1], state["hypotheses"][W][2])
    losses = [[e.mean_loss(take(state["hypotheses"], m), k) for m in range(3)]
              for k in range(3)]
    assert state["cluster"].tolist() == [int(np.argmin(row)) for row in losses]
    assert state["opt"]["step"].shape == (3,)


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_one_hypothesis_is_fedavg_bit_for_bit(optimizer):
    e, alg = _alg({"hypotheses": 1}, optimizer=optimizer, lr=0.1)
    fedavg = FedAvg(e, parse_hyper(FedAvg, {}))
    a, b = alg.init(), fedavg.init()
    assert_params_close(take(a["hypotheses"], 0), b["global"], atol=0, rtol=0)
    for rnd in (1, 2, 3):
        a, loss_a = alg.round(a, rnd)
        b, loss_b = fedavg.round(b, rnd)
        assert_params_close(take(a["hypotheses"], 0), b["global"], atol=0, rtol=0)
        np.testing.assert_array_equal(loss_a, loss_b)
        assert a["cluster"].tolist() == [0, 0, 0]
    for name in a["opt"]:
        torch.testing.assert_close(a["opt"][name], b["opt"][name], atol=0, rtol=0)


def test_hand_made_losses_and_argmin():
    e, alg = _alg({"hypotheses": 3}, data=_labelled())
    state = alg.init()
    _set_hypotheses(state, HAND)
    scores = alg.losses(state["hypotheses"])
    good, bad = math.log1p(math.exp(-6.0)), 6.0 + math.log1p(math.exp(-6.0))
    expected = [[math.log(2.0), good, bad], [math.log(2.0), bad, good],
                [math.log(2.0), good, bad]]
    np.testing.assert_allclose(scores, expected, rtol=1e-5, atol=1e-6)  # float32
    assert alg.assign(state["hypotheses"]).tolist() == [1, 2, 1]


def test_ties_go_to_the_lowest_index_and_nan_is_never_chosen():
    e, alg = _alg({"hypotheses": 3}, data=_labelled())
    state = alg.init()
    _set_hypotheses(state, [HAND[0], HAND[0], HAND[0]])  # all equal: h_0
    assert alg.assign(state["hypotheses"]).tolist() == [0, 0, 0]
    _set_hypotheses(state, [HAND[0], HAND[1], HAND[1]])  # h_1 = h_2 better for 0, 2
    assert alg.assign(state["hypotheses"]).tolist() == [1, 0, 1]
    _set_hypotheses(state, [_bias_only(math.nan, 0.0), HAND[2], HAND[2]])
    assert alg.assign(state["hypotheses"]).tolist() == [1, 1, 1]


def test_round_trains_the_chosen_hypothesis_and_averages_by_size():
    lr = 0.3
    e, alg = _alg({"hypotheses": 3}, data=_labelled(), lr=lr, optimizer="sgd")
    state = alg.init()
    _set_hypotheses(state, HAND)
    before = clone(state["hypotheses"])
    state, losses = alg.round(state, 1)
    assert state["cluster"].tolist() == [1, 2, 1]
    trained, expected_loss = {}, {}
    for k, m in ((0, 1), (1, 2), (2, 1)):
        trained[k], expected_loss[k] = manual_sgd(HAND[m], e, k, 1, "local",
                                                  e.steps_per_round(k), lr=lr)
    # h_1 from clients 0 (n = 4) and 2 (n = 3); h_2 from client 1 alone; h_0 untouched
    h1 = {n: (4 * trained[0][n] + 3 * trained[2][n]) / 7 for n in (W, B)}
    assert_params_close(take(state["hypotheses"], 1), h1)
    assert_params_close(take(state["hypotheses"], 2), trained[1])
    assert_params_close(take(state["hypotheses"], 0), take(before, 0), atol=0, rtol=0)
    np.testing.assert_allclose(losses, [expected_loss[k] for k in range(3)], rtol=1e-5)
    assert state["opt"]["step"].tolist() == [2, 1, 2]  # ceil(n / batch 2) steps each


def test_predict_uses_the_chosen_hypothesis():
    e, alg = _alg({"hypotheses": 3}, data=_labelled(), lr=0.3)
    state = alg.init()
    x = e.data.x[e.data.test[1]]
    # before round 1: the initial choice
    m0 = int(state["cluster"][1])
    torch.testing.assert_close(alg.predict(state, 1, x, 0),
                               e.probs(take(state["hypotheses"], m0), x))
    _set_hypotheses(state, HAND)
    state, _ = alg.round(state, 1)
    for k, m in ((0, 1), (1, 2), (2, 1)):
        xk = e.data.x[e.data.test[k]]
        torch.testing.assert_close(alg.predict(state, k, xk, 1),
                                   e.probs(take(state["hypotheses"], m), xk))
    assert not torch.allclose(alg.predict(state, 1, x, 1),
                              e.probs(take(state["hypotheses"], 1), x))


def test_predict_chooses_by_current_losses_not_a_stale_choice():
    # a client whose recorded choice is stale (it did not take part since the
    # hypotheses moved) predicts with argmin_m L_k(h_m) of the current hypotheses
    e, alg = _alg({"hypotheses": 3}, data=_labelled(), lr=0.3)
    state = alg.init()
    _set_hypotheses(state, HAND)
    state["cluster"] = torch.zeros(3, dtype=torch.int64)  # stale: h_0 for everyone
    for k, m in ((0, 1), (1, 2), (2, 1)):  # HAND: label-0 clients h_1, client 1 h_2
        xk = e.data.x[e.data.test[k]]
        torch.testing.assert_close(alg.predict(state, k, xk, 1),
                                   e.probs(take(state["hypotheses"], m), xk))
        assert alg.current_choice(state, k) == m
    assert state["cluster"].tolist() == [0, 0, 0]  # predicting leaves the state alone


def test_non_participants_predict_with_their_current_best_hypothesis():
    # C = 1/3: one client per round; the others' losses are recomputed at evaluation
    e, alg = _alg({"hypotheses": 3}, data=_labelled(), lr=0.3, client_fraction=0.34)
    state = alg.init()
    _set_hypotheses(state, HAND)
    state["cluster"] = alg.assign(state["hypotheses"])
    for rnd in (1, 2, 3):
        state, _ = alg.round(state, rnd)
    for k in range(3):
        best = int(alg.assign(state["hypotheses"], [k])[0])
        xk = e.data.x[e.data.test[k]]
        torch.testing.assert_close(alg.predict(state, k, xk, 3),
                                   e.probs(take(state["hypotheses"], best), xk))


def test_docstring_states_client_sampling():
    from pflrepro.algorithms import hypcluster

    assert HypCluster.client_sampling
    assert "full participation" not in hypcluster.__doc__
    assert "every client takes part in every round" not in hypcluster.__doc__
    assert "client_fraction" in hypcluster.__doc__


def test_records_the_choice_at_round_zero_and_every_round():
    e, alg = _alg({"hypotheses": 3}, data=_labelled(), lr=0.3)
    state = alg.init()
    _set_hypotheses(state, HAND)
    state["cluster"] = alg.assign(state["hypotheses"])
    log = MetricLog()
    alg.record(state, 0, log)
    state, _ = alg.round(state, 1)
    alg.record(state, 1, log)
    assert set(log.metrics) == {CLUSTER}
    assert log.rounds == [0, 0, 0, 1, 1, 1] and log.clients == [0, 1, 2] * 2
    assert log.values == [1.0, 2.0, 1.0] * 2 and log.peers == [-1] * 6


def test_traffic_per_round():
    e, alg = _alg({"hypotheses": 3})
    state = alg.init()
    e.traffic = Traffic(e.num_clients)  # count this round only
    alg.round(state, 1)
    p = 2 * 2 + 2  # the linear model: W (2 classes × 2 features) and b
    np.testing.assert_array_equal(e.traffic.down, [3 * p] * 3)
    np.testing.assert_array_equal(e.traffic.up, [p] * 3)


def test_bad_hyperparameters():
    for value in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="hypotheses"):
            parse_hyper(HypCluster, {"hypotheses": value})
    with pytest.raises(ValueError, match="hypotheses"):
        HypClusterHyper(hypotheses=0)
    with pytest.raises(ValueError, match="unknown"):
        parse_hyper(HypCluster, {"clusters": 2})
