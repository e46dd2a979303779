"""SCAFFOLD: corrected local SGD, option II control variates, uniform server step."""

import io

import pytest
import torch
from _alg_helpers import algorithm_factory
from _fl_helpers import B, W, assert_params_close, clone, make_engine, manual_loss_and_grad

from pflrepro.algorithms import ALGORITHMS
from pflrepro.algorithms.base import parse_hyper
from pflrepro.algorithms.scaffold import Scaffold, ScaffoldHyper
from pflrepro.training.params import take

STEPS = [2, 1, 2]  # ceil(n_k / 2) for train sizes 4, 2, 3 and batch 2


_alg = algorithm_factory(Scaffold)


def _manual(x, c, c_i, e, k, rnd, lr):
    """Corrected SGD by hand: y ← y − lr (∇f(y) + c − c_i); returns y and c_i⁺ (option II)."""
    y = clone(x)
    steps = e.steps_per_round(k)
    for idx in e.minibatches(k, rnd, "local", steps):
        _, g = manual_loss_and_grad(y, e.data.x[idx], e.data.y[idx])
        y = {n: y[n] - lr * (g[n] + c[n] - c_i[n]) for n in y}
    c_new = {n: c_i[n] - c[n] + (x[n] - y[n]) / (steps * lr) for n in y}
    return y, c_new


def _mean(models):
    return {n: sum(m[n] for m in models) / len(models) for n in (W, B)}


def test_registered_init_and_default():
    assert ALGORITHMS["scaffold"] is Scaffold
    assert parse_hyper(Scaffold, {}) == ScaffoldHyper(server_lr=1.0)
    e, alg = _alg()
    state = alg.init()
    assert_params_close(state["global"], e.init_params(), atol=0, rtol=0)
    assert all(torch.count_nonzero(v) == 0 for v in state["control"].values())
    assert state["client_control"][W].shape == (3, *state["global"][W].shape)
    assert torch.count_nonzero(state["client_control"][W]) == 0


def test_first_round_is_uniformly_averaged_fedavg_and_controls_by_hand():
    lr = 0.2
    e, alg = _alg(lr=lr)
    x0 = e.init_params()
    state, losses = alg.round(alg.init(), 1)
    zero = {n: torch.zeros_like(v) for n, v in x0.items()}
    ys, cs = zip(*[_manual(x0, zero, zero, e, k, 1, lr) for k in range(3)], strict=True)
    # c = c_i = 0: plain local SGD, then the *uniform* mean (SCAFFOLD), not (4, 2, 3)-weighted
    assert_params_close(state["global"], _mean(ys))
    sized = {n: (4 * ys[0][n] + 2 * ys[1][n] + 3 * ys[2][n]) / 9 for n in (W, B)}
    assert not torch.allclose(state["global"][W], sized[W])
    for k in range(3):
        # c_i⁺ = (x − y_i) / (K_i lr)
        expected = {n: (x0[n] - ys[k][n]) / (STEPS[k] * lr) for n in x0}
        assert_params_close(take(state["client_control"], k), expected)
        assert_params_close(take(state["client_control"], k), cs[k])
    assert_params_close(state["control"], _mean(cs))
    assert losses.shape == (3,) and not any(map(torch.isnan, torch.tensor(losses)))


def test_one_local_step_control_is_the_gradient_at_x():
    # K = 1: (x − y)/lr = ∇f(x) + c − c_i, hence c_i⁺ = ∇f(x; batch), also when c, c_i ≠ 0
    e, alg = _alg(lr=0.3, local_steps=1)
    s1, _ = alg.round(alg.init(), 1)
    x1 = clone(s1["global"])
    assert torch.count_nonzero(s1["control"][W]) > 0
    s2, _ = alg.round(s1, 2)
    for k in range(3):
        (idx,) = e.minibatches(k, 2, "local", 1)
        _, g = manual_loss_and_grad(x1, e.data.x[idx], e.data.y[idx])
        assert_params_close(take(s2["client_control"], k), g, atol=1e-5)


def test_correction_is_applied_in_local_steps():
    # round 2 starts with c − c_i ≠ 0; the result must match corrected SGD, not plain SGD
    lr = 0.2
    e, alg = _alg(lr=lr)
    s1, _ = alg.round(alg.init(), 1)
    x1, c1, ci1 = clone(s1["global"]), clone(s1["control"]), clone(s1["client_control"])
    s2, _ = alg.round(s1, 2)
    zero = {n: torch.zeros_like(v) for n, v in x1.items()}
    ys, cs = [], []
    for k in range(3):
        y, c_new = _manual(x1, c1, take(ci1, k), e, k, 2, lr)
        ys.append(y)
        cs.append(c_new)
        assert_params_close(take(s2["client_control"], k), c_new)
    assert_params_close(s2["global"], _mean(ys))
    delta = _mean([{n: cs[k][n] - ci1[n][k] for n in x1} for k in range(3)])
    assert_params_close(s2["control"], {n: c1[n] + delta[n] for n in x1})
    plain = _mean([_manual(x1, zero, zero, e, k, 2, lr)[0] for k in range(3)])
    assert not torch.allclose(s2["global"][W], plain[W], atol=1e-5)


def test_server_lr_scales_the_global_step():
    e, half = _alg({"server_lr": 0.5}, lr=0.2)
    _, full = _alg(lr=0.2)
    x0 = e.init_params()
    a, _ = half.round(half.init(), 1)
    b, _ = full.round(full.init(), 1)
    assert_params_close(a["global"], {n: x0[n] + 0.5 * (b["global"][n] - x0[n]) for n in x0})
    assert_params_close(a["control"], b["control"], atol=0, rtol=0)


@pytest.mark.parametrize("training", [{"optimizer": "adam", "lr": 0.01},
                                      {"optimizer": "sgd", "momentum": 0.9}])
def test_non_plain_sgd_raises(training):
    e = make_engine(**training)
    with pytest.raises(ValueError, match="plain SGD"):
        Scaffold(e, parse_hyper(Scaffold, {}))


def test_zero_server_lr_raises():
    with pytest.raises(ValueError, match="server_lr"):
        _alg({"server_lr": 0.0})


def test_predict_is_global_for_every_client():
    e, alg = _alg()
    state, _ = alg.round(alg.init(), 1)
    ref = e.probs(state["global"], e.data.x)
    for k in range(3):
        torch.testing.assert_close(alg.predict(state, k, e.data.x, 1), ref)


def test_deterministic_and_checkpointable():
    def two_rounds(seed):
        _, alg = _alg(seed=seed)
        state, _ = alg.round(alg.init(), 1)
        buf = io.BytesIO()
        torch.save(state, buf)
        buf.seek(0)
        state, losses = alg.round(torch.load(buf, weights_only=True), 2)
        return state["global"][W], state["control"][W], losses

    a, ca, la = two_rounds(0)
    b, cb, lb = two_rounds(0)
    assert torch.equal(a, b) and torch.equal(ca, cb) and la.tolist() == lb.tolist()
    assert not torch.equal(a, two_rounds(1)[0])


def test_parse_hyper():
    assert parse_hyper(Scaffold, {"server_lr": 2}).server_lr == 2.0
    for bad in ({"lr": 1.0}, {"server_lr": "1"}, {"server_lr": True}, {"server_lr": -1.0}):
        with pytest.raises(ValueError):
            parse_hyper(Scaffold, bad)


def test_client_sampling_updates_controls_of_the_sampled_only():
    # c ← c + (1/N) Σ_{i∈S} (c_i⁺ − c_i); x ← x + mean_{i∈S}(y_i − x); others untouched
    from _fl_helpers import make_data

    lr = 0.1
    e = make_engine(make_data(n_train=(4, 2, 3, 5), n_test=(1, 1, 1, 1)), optimizer="sgd",
                    lr=lr, client_fraction=0.5)
    alg = Scaffold(e, parse_hyper(Scaffold, {}))
    state = alg.init()
    x0 = clone(state["global"])
    zero = {n: torch.zeros_like(v) for n, v in x0.items()}
    chosen = e.participants(1)
    state, losses = alg.round(state, 1)
    ys, cs = [], []
    for k in chosen:
        y, c_new = _manual(x0, zero, zero, e, k, 1, lr)
        ys.append(y)
        cs.append(c_new)
        assert_params_close(take(state["client_control"], k), c_new)
    for k in set(range(4)) - set(chosen):
        assert_params_close(take(state["client_control"], k), zero, atol=0, rtol=0)
    assert_params_close(state["global"], _mean(ys))
    assert_params_close(state["control"], {n: sum(c[n] for c in cs) / 4 for n in x0})
