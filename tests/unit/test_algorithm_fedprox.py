"""FedProx: FedAvg's round with the proximal gradient μ (w − w_global) in every local step."""

import io

import pytest
import torch
from _alg_helpers import algorithm_factory
from _fl_helpers import B, W, assert_params_close, clone, manual_loss_and_grad

from pflrepro.algorithms import ALGORITHMS
from pflrepro.algorithms.base import parse_hyper
from pflrepro.algorithms.fedavg import FedAvg
from pflrepro.algorithms.fedprox import FedProx, FedProxHyper
from pflrepro.training.params import take
from pflrepro.training.terms import Proximal

SIZES = (4, 2, 3)


_alg = algorithm_factory(FedProx)


def _manual_prox(start, e, k, rnd, steps, lr, mu):
    """Plain SGD on the engine's batches with gradient ∇f(w) + μ (w − start)."""
    data = e.data
    p = clone(start)
    for idx in e.minibatches(k, rnd, "local", steps):
        _, g = manual_loss_and_grad(p, data.x[idx], data.y[idx])
        p = {n: p[n] - lr * (g[n] + mu * (p[n] - start[n])) for n in p}
    return p


def _size_weighted(models):
    return {n: sum(s * m[n] for s, m in zip(SIZES, models, strict=True)) / sum(SIZES)
            for n in (W, B)}


def test_registered_and_default():
    assert ALGORITHMS["fedprox"] is FedProx
    assert parse_hyper(FedProx, {}) == FedProxHyper(mu=0.01)


def test_mu_zero_is_fedavg_exactly():
    e, prox = _alg({"mu": 0.0}, lr=0.2, local_steps=3)
    avg = FedAvg(e, parse_hyper(FedAvg, {}))
    a, b = prox.init(), avg.init()
    for rnd in (1, 2, 3):
        a, la = prox.round(a, rnd)
        b, lb = avg.round(b, rnd)
        assert_params_close(a["global"], b["global"], atol=0, rtol=0)
        assert la.tolist() == lb.tolist()


def test_round_matches_hand_computed_proximal_sgd():
    # 3 local steps per client; from step 2 on w != w_global and the pull acts
    lr, mu = 0.2, 0.7
    e, alg = _alg({"mu": mu}, lr=lr, local_steps=3)
    start = e.init_params()
    state, _ = alg.round(alg.init(), 1)
    models = [_manual_prox(start, e, k, 1, 3, lr, mu) for k in range(3)]
    assert_params_close(state["global"], _size_weighted(models))
    assert alg.engine is e  # the engine view is only used inside the round


def test_second_step_moves_by_extra_lr_mu_times_displacement():
    # lr·μ = 1: step 2 gives w2 = w1 − lr ∇f(w1) − (w1 − w0) = w0 − lr ∇f(w1)
    lr, mu = 0.25, 4.0
    e, alg = _alg({"mu": mu}, lr=lr, local_steps=2)
    w0 = e.init_params()
    state, _ = alg.round(alg.init(), 1)
    models = []
    for k in range(3):
        b1, b2 = e.minibatches(k, 1, "local", 2)
        _, g0 = manual_loss_and_grad(w0, e.data.x[b1], e.data.y[b1])
        w1 = {n: w0[n] - lr * g0[n] for n in w0}
        _, g1 = manual_loss_and_grad(w1, e.data.x[b2], e.data.y[b2])
        models.append({n: w0[n] - lr * g1[n] for n in w0})
        # FedAvg's second step would differ by exactly lr·μ (w1 − w0) = w1 − w0 ≠ 0
        assert float((w1[W] - w0[W]).abs().max()) > 1e-4
    assert_params_close(state["global"], _size_weighted(models))


def test_proximal_term_changes_training():
    # fails if the proximal gradient were dropped or detached to zero
    e, prox = _alg({"mu": 1.0}, lr=0.2, local_steps=4)
    avg = FedAvg(e, parse_hyper(FedAvg, {}))
    a, _ = prox.round(prox.init(), 1)
    b, _ = avg.round(avg.init(), 1)
    assert float((a["global"][W] - b["global"][W]).abs().max()) > 1e-4
    # and the pull shrinks the step away from the start
    start = e.init_params()
    assert float((a["global"][W] - start[W]).norm()) < float((b["global"][W] - start[W]).norm())


def test_adam_gets_the_proximal_gradient():
    mu = 0.5
    e, alg = _alg({"mu": mu}, optimizer="adam", lr=0.05, local_steps=3)
    state = alg.init()
    g0, opt0 = clone(state["global"]), clone(state["opt"])
    state, _ = alg.round(state, 1)
    models = [e.train_client(g0, take(opt0, k), k, 1, terms=[Proximal(g0, mu)])[0]
              for k in range(3)]
    assert_params_close(state["global"], _size_weighted(models))
    plain = [e.train_client(g0, take(opt0, k), k, 1)[0] for k in range(3)]
    assert not torch.allclose(state["global"][W], _size_weighted(plain)[W])


def test_hook_formula():
    p = {W: torch.tensor([[1.0, 2.0]]), B: torch.tensor([0.5])}
    a = {W: torch.tensor([[0.0, 4.0]]), B: torch.tensor([0.5])}
    g = {W: torch.tensor([[0.1, 0.1]]), B: torch.tensor([1.0])}
    out = Proximal(a, 0.5).add(p, g)
    torch.testing.assert_close(out[W], torch.tensor([[0.6, -0.9]]))
    torch.testing.assert_close(out[B], torch.tensor([1.0]))


def test_term_anchors_at_the_round_global_model():
    e, alg = _alg()
    state = alg.init()
    (term,) = alg.terms(state)
    p = {k: v + 1.0 for k, v in state["global"].items()}
    zero = {k: torch.zeros_like(v) for k, v in p.items()}
    out = term.add(p, zero)
    for k in out:  # μ (p − w_g) = μ · 1
        torch.testing.assert_close(out[k], torch.full_like(p[k], alg.hp.mu))


def test_predict_is_global_for_every_client():
    e, alg = _alg()
    state, _ = alg.round(alg.init(), 1)
    ref = e.probs(state["global"], e.data.x)
    for k in range(3):
        torch.testing.assert_close(alg.predict(state, k, e.data.x, 1), ref)


def test_deterministic_and_checkpointable():
    def two_rounds(seed):
        e, alg = _alg({"mu": 0.3}, seed=seed, optimizer="adam", lr=0.05)
        state = alg.init()
        state, _ = alg.round(state, 1)
        buf = io.BytesIO()
        torch.save(state, buf)
        buf.seek(0)
        state, losses = alg.round(torch.load(buf, weights_only=True), 2)
        return state["global"][W], losses

    a, la = two_rounds(0)
    b, lb = two_rounds(0)
    assert torch.equal(a, b) and la.tolist() == lb.tolist()
    c, _ = two_rounds(1)
    assert not torch.equal(a, c)


def test_parse_hyper():
    assert parse_hyper(FedProx, {"mu": 1}).mu == 1.0
    for bad in ({"lam": 0.1}, {"mu": "0.1"}, {"mu": True}, {"mu": -0.01}, {"mu": None}):
        with pytest.raises(ValueError):
            parse_hyper(FedProx, bad)
