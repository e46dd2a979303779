"""Local training: every client trains alone, no mixing between clients."""

import numpy as np
import pytest
import torch
from _alg_helpers import algorithm_factory
from _fl_helpers import W, assert_params_close, clone, manual_sgd

from pflrepro.algorithms import ALGORITHMS
from pflrepro.algorithms.base import NoHyper, parse_hyper
from pflrepro.algorithms.local import Local
from pflrepro.training.params import take

_alg = algorithm_factory(Local)


def test_registered():
    assert ALGORITHMS["local"] is Local


def test_clients_start_from_their_own_init():
    e, alg = _alg()
    state = alg.init()
    for k in range(3):
        assert_params_close(take(state["params"], k), e.init_params(k), atol=0, rtol=0)
    w = state["params"][W]
    assert not torch.equal(w[0], w[1]) and not torch.equal(w[1], w[2])


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_one_round_equals_independent_local_training(optimizer):
    e, alg = _alg(optimizer=optimizer, lr=0.05, local_epochs=2)
    state = alg.init()
    state, losses = alg.round(state, 1)
    for k in range(3):
        start = e.init_params(k)
        ref, ref_opt, ref_loss = e.train_client(start, e.init_opt(start), k, 1)
        assert_params_close(take(state["params"], k), ref)
        assert_params_close(take(state["opt"], k), ref_opt)
        assert losses[k] == pytest.approx(ref_loss)


def test_sgd_round_by_manual_loop_and_no_mixing():
    # plain SGD, lr 0.2, batch 2, 1 epoch: client k's model after 2 rounds is the
    # manual SGD loop over its own batches of rounds 1 and 2, whatever the others hold
    e, alg = _alg(lr=0.2)
    state = alg.init()
    for rnd in (1, 2):
        state, _ = alg.round(state, rnd)
    for k in range(3):
        p = e.init_params(k)
        for rnd in (1, 2):
            p, _ = manual_sgd(p, e, k, rnd, "local", e.steps_per_round(k), lr=0.2)
        assert_params_close(take(state["params"], k), p)
    # changing client 2's model does not change what client 0 learns in the next round
    a, b = clone(state), clone(state)
    b["params"][W][2] += 10.0
    a, _ = alg.round(a, 3)
    b, _ = alg.round(b, 3)
    assert torch.equal(a["params"][W][0], b["params"][W][0])
    assert torch.equal(a["params"][W][1], b["params"][W][1])


def test_predict_uses_own_model():
    e, alg = _alg()
    state, _ = alg.round(alg.init(), 1)
    x = e.data.x
    for k in range(3):
        torch.testing.assert_close(alg.predict(state, k, x, 1),
                                   e.probs(take(state["params"], k), x))
    assert not torch.allclose(alg.predict(state, 0, x, 1), alg.predict(state, 1, x, 1))


def test_losses_shape():
    _, alg = _alg()
    _, losses = alg.round(alg.init(), 1)
    assert losses.shape == (3,) and np.isfinite(losses).all()


def test_parse_hyper():
    assert isinstance(parse_hyper(Local, {}), NoHyper)
    with pytest.raises(ValueError, match="unknown hyperparameter"):
        parse_hyper(Local, {"lr": 0.1})
