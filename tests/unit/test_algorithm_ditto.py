"""Ditto: FedAvg's global model plus personal models pulled towards the round's w^t."""

import pytest
import torch
from _alg_helpers import algorithm_factory
from _fl_helpers import (
    B,
    W,
    assert_params_close,
    clone,
    manual_loss_and_grad,
    manual_sgd,
)

from pflrepro.algorithms.base import parse_hyper
from pflrepro.algorithms.ditto import Ditto
from pflrepro.algorithms.fedavg import FedAvg
from pflrepro.training.params import take

_alg = algorithm_factory(Ditto)


def test_init_personal_models_are_the_global_start():
    e, alg = _alg()
    state = alg.init()
    assert_params_close(state["global"], e.init_params(), atol=0, rtol=0)
    for k in range(3):
        assert_params_close(take(state["personal"], k), e.init_params(), atol=0, rtol=0)
    assert state["personal_opt"]["step"].shape == (3,)


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_global_model_is_fedavgs_bit_for_bit(optimizer):
    """The personal update never touches the global one (own batches, own states)."""
    e, ditto = _alg({"lam": 0.5}, optimizer=optimizer, lr=0.1)
    fedavg = FedAvg(e, parse_hyper(FedAvg, {}))
    a, b = ditto.init(), fedavg.init()
    for rnd in (1, 2, 3):
        a, _ = ditto.round(a, rnd)
        b, _ = fedavg.round(b, rnd)
        assert_params_close(a["global"], b["global"], atol=0, rtol=0)


def test_personal_step_by_hand():
    # SGD lr 0.2, λ = 0.5: v ← v − lr (∇F_k(v) + λ (v − w^t)), on the "personal" batches,
    # anchored at the global model the round started from
    lr, lam = 0.2, 0.5
    e, alg = _alg({"lam": lam}, lr=lr, optimizer="sgd")
    state = alg.init()
    state, _ = alg.round(state, 1)  # the personal models now differ from w^1
    w1, v1 = clone(state["global"]), clone(state["personal"])
    state, losses = alg.round(state, 2)
    for k in range(3):
        v = take(v1, k)
        total = 0.0
        batches = e.minibatches(k, 2, "personal", e.steps_per_round(k))
        for idx in batches:
            loss, g = manual_loss_and_grad(v, e.data.x[idx], e.data.y[idx])
            v = {n: v[n] - lr * (g[n] + lam * (v[n] - w1[n])) for n in (W, B)}
            total += loss
        assert_params_close(take(state["personal"], k), v)
        assert losses[k] == pytest.approx(total / len(batches), rel=1e-5)


def test_lam_zero_is_local_training_from_the_shared_start():
    e, alg = _alg({"lam": 0.0}, lr=0.3, optimizer="sgd")
    start = e.init_params()
    state = alg.init()
    expected = [clone(start) for _ in range(3)]
    for rnd in (1, 2):
        state, _ = alg.round(state, rnd)
        for k in range(3):
            expected[k], _ = manual_sgd(expected[k], e, k, rnd, "personal",
                                        e.steps_per_round(k), lr=0.3)
    for k in range(3):
        assert_params_close(take(state["personal"], k), expected[k])


def test_personal_steps_and_the_pull():
    e, alg = _alg({"lam": 0.0, "personal_steps": 3}, lr=0.3, optimizer="sgd")
    state, _ = alg.round(alg.init(), 1)
    assert state["personal_opt"]["step"].tolist() == [3, 3, 3]
    assert state["opt"]["step"].tolist() == [2, 1, 2]  # the global update: ceil(n/2)
    # a large λ holds the personal models near the round's starting global model
    def drift(lam: float) -> float:
        e, alg = _alg({"lam": lam}, lr=0.01, optimizer="sgd", local_steps=50)
        state = alg.init()
        w0 = clone(state["global"])
        state, _ = alg.round(state, 1)
        return max(float((state["personal"][n][k] - w0[n]).abs().max())
                   for n in (W, B) for k in range(3))

    assert drift(50.0) < 0.05 * drift(0.0)


def test_predict_uses_the_personal_model():
    e, alg = _alg({"lam": 0.0}, lr=0.5)
    state, _ = alg.round(alg.init(), 1)
    x = e.data.x[e.data.test[1]]
    torch.testing.assert_close(alg.predict(state, 1, x, 1),
                               e.probs(take(state["personal"], 1), x))
    assert not torch.allclose(alg.predict(state, 1, x, 1), e.probs(state["global"], x))


def test_bad_hyperparameters():
    with pytest.raises(ValueError, match="lam"):
        parse_hyper(Ditto, {"lam": -1.0})
    with pytest.raises(ValueError, match="personal_steps"):
        parse_hyper(Ditto, {"personal_steps": -2})


def test_docstring_cites_files_of_the_official_repository():
    # litian96/ditto has flearn/trainers_MTL/ditto.py (and fedbase.py), no flearn/trainers/
    from pflrepro.algorithms import ditto

    assert "flearn/trainers/ditto.py" not in ditto.__doc__
    assert "flearn/trainers_MTL/ditto.py" in ditto.__doc__
    assert Ditto.client_sampling
    assert "full participation" not in ditto.__doc__
