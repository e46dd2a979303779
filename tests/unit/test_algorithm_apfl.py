"""APFL: global w (FedAvg), personal v_i and mixing α_i, learnt on the same batches."""

import io

import pytest
import torch
import torch.nn.functional as F
from _alg_helpers import algorithm_factory
from _fl_helpers import B, W, assert_params_close, clone, manual_loss_and_grad
from _objective_helpers import (
    MODELS,
    OPTIMISERS,
    both_paths,
    engine_for,
    rows_of,
    train,
)

from pflrepro.algorithms import ALGORITHMS
from pflrepro.algorithms.apfl import (
    ALPHA,
    ALPHA_KEY,
    APFL,
    APFLHyper,
    MixedPair,
    join_pair,
    join_pair_states,
    mix,
    split_pair,
    split_pair_states,
)
from pflrepro.algorithms.base import parse_hyper
from pflrepro.algorithms.fedavg import FedAvg
from pflrepro.store import results as R
from pflrepro.training import local_training as LT
from pflrepro.training.params import take

_alg = algorithm_factory(APFL)


def _two_models(e):
    """Distinct w and v (client 1's and 2's fresh inits)."""
    return e.init_params(1), e.init_params(2)


def _one_step(alg, e, w, v, alpha, rnd=1, client=0):
    opt = e.init_opt(w)
    return alg.local_steps(w, v, alpha, client, rnd, clone(opt), clone(opt))


def test_registered_init_and_defaults():
    assert ALGORITHMS["apfl"] is APFL
    assert parse_hyper(APFL, {}) == APFLHyper(alpha=0.5, adaptive_alpha=True, alpha_lr=0.01)
    e, alg = _alg()
    state = alg.init()
    assert_params_close(state["global"], e.init_params(), atol=0, rtol=0)
    for k in range(3):
        assert_params_close(take(state["personal"], k), state["global"], atol=0, rtol=0)
    assert state["alpha"].tolist() == [0.5] * 3


def test_personal_gradient_is_alpha_times_mixed_gradient():
    # one SGD step: v1 = v − lr α ∇f(v̄), w1 = w − lr ∇f(w); ∇_v f(α v + (1−α) w) by autograd
    lr, alpha = 0.2, 0.3
    e, alg = _alg({"adaptive_alpha": False}, lr=lr, local_steps=1)
    w, v = _two_models(e)
    (idx,) = e.minibatches(0, 1, "local", 1)
    x, y = e.data.x[idx], e.data.y[idx]
    vv = {n: t.clone().requires_grad_(True) for n, t in v.items()}
    bar = {n: alpha * vv[n] + (1 - alpha) * w[n] for n in w}
    loss = F.cross_entropy(x.flatten(1) @ bar[W].T + bar[B], y)
    gv = dict(zip((W, B), torch.autograd.grad(loss, [vv[W], vv[B]]), strict=True))
    _, g_bar = manual_loss_and_grad(mix(v, w, alpha), x, y)
    for n in (W, B):
        torch.testing.assert_close(gv[n], alpha * g_bar[n])
    _, g_w = manual_loss_and_grad(w, x, y)
    w1, v1, a1, _, _, l1 = _one_step(alg, e, w, v, alpha)
    assert_params_close(v1, {n: v[n] - lr * gv[n] for n in v})
    assert_params_close(w1, {n: w[n] - lr * g_w[n] for n in w})
    assert a1 == alpha  # not adaptive
    assert l1 == pytest.approx(float(loss.detach()))  # the mixed model's loss is reported


def test_alpha_step_by_hand_and_by_autograd():
    lr, alpha, alpha_lr = 0.2, 0.4, 0.5
    e, alg = _alg({"alpha_lr": alpha_lr}, lr=lr, local_steps=1)
    w, v = _two_models(e)
    (idx,) = e.minibatches(0, 1, "local", 1)
    x, y = e.data.x[idx], e.data.y[idx]
    _, g_bar = manual_loss_and_grad(mix(v, w, alpha), x, y)
    g_alpha = sum(float((g_bar[n] * (v[n] - w[n])).sum()) for n in w)
    a = torch.tensor(alpha, requires_grad=True)
    bar = {n: a * v[n] + (1 - a) * w[n] for n in w}
    (auto,) = torch.autograd.grad(F.cross_entropy(x.flatten(1) @ bar[W].T + bar[B], y), [a])
    assert g_alpha == pytest.approx(float(auto), rel=1e-4, abs=1e-6)
    assert abs(g_alpha) > 1e-3
    _, v1, a1, _, _, _ = _one_step(alg, e, w, v, alpha)
    assert a1 == pytest.approx(alpha - alpha_lr * g_alpha, rel=1e-6)
    # v's step uses the α before its update
    assert_params_close(v1, {n: v[n] - lr * alpha * g_bar[n] for n in v})


def test_alpha_is_clipped_to_unit_interval():
    # at α = 0.5 the mixed model is symmetric in (v, w), so swapping them flips ⟨g, v − w⟩
    e, alg = _alg({"alpha_lr": 1e6}, local_steps=1)
    w, v = _two_models(e)
    (idx,) = e.minibatches(0, 1, "local", 1)
    _, g_bar = manual_loss_and_grad(mix(v, w, 0.5), e.data.x[idx], e.data.y[idx])
    g_alpha = sum(float((g_bar[n] * (v[n] - w[n])).sum()) for n in w)
    assert g_alpha != 0
    high, low = (0.0, 1.0) if g_alpha > 0 else (1.0, 0.0)
    assert _one_step(alg, e, w, v, 0.5)[2] == high
    assert _one_step(alg, e, v, w, 0.5)[2] == low


def test_global_model_follows_fedavg_exactly():
    # w's updates never see v or α: the global model is FedAvg's (size-weighted)
    e, apfl = _alg(optimizer="adam", lr=0.05)
    avg = FedAvg(e, parse_hyper(FedAvg, {}))
    a, b = apfl.init(), avg.init()
    for rnd in (1, 2):
        a, _ = apfl.round(a, rnd)
        b, _ = avg.round(b, rnd)
        assert_params_close(a["global"], b["global"], atol=0, rtol=0)


def test_round_updates_personal_state_per_client():
    e, alg = _alg(lr=0.2)
    state = alg.init()
    g0 = clone(state["global"])
    state, _ = alg.round(state, 1)
    for k in range(3):
        w, v, a, opt_w, opt_v, _ = alg.local_steps(g0, g0, 0.5, k, 1, e.init_opt(g0),
                                                   e.init_opt(g0))
        assert_params_close(take(state["personal"], k), v, atol=0, rtol=0)
        assert float(state["alpha"][k]) == a
        assert state["personal_opt"]["step"][k] == opt_v["step"]
    assert not torch.equal(state["personal"][W][0], state["personal"][W][1])


def test_alpha_zero_fixed_predicts_with_the_global_model():
    e, alg = _alg({"alpha": 0.0, "adaptive_alpha": False}, lr=0.2)
    state = alg.init()
    for rnd in (1, 2):
        state, _ = alg.round(state, rnd)
        assert state["alpha"].tolist() == [0.0] * 3
        ref = e.probs(state["global"], e.data.x)
        for k in range(3):
            assert torch.equal(alg.predict(state, k, e.data.x, rnd), ref)


def test_predict_is_the_mixed_model():
    # v_i = w at the start, so α first moves at a client's second local step
    e, alg = _alg({"alpha_lr": 0.5}, lr=0.2, local_steps=2)
    state, _ = alg.round(alg.init(), 1)
    for k in range(3):
        a = float(state["alpha"][k])
        assert a != 0.5
        mixed = {n: a * state["personal"][n][k] + (1 - a) * state["global"][n] for n in (W, B)}
        torch.testing.assert_close(alg.predict(state, k, e.data.x, 1),
                                   e.probs(mixed, e.data.x))


def test_record_logs_alpha_per_client():
    e, alg = _alg()
    state = alg.init()
    log = R.MetricLog()
    alg.record(state, 0, log)
    state, _ = alg.round(state, 1)
    alg.record(state, 1, log)
    assert ALPHA == "alpha"
    assert log.metrics == [ALPHA] * 6 and log.clients == [0, 1, 2] * 2
    assert log.rounds == [0] * 3 + [1] * 3 and log.peers == [-1] * 6
    assert log.values[:3] == [0.5] * 3 and log.values[3:] == state["alpha"].tolist()


def test_deterministic_and_checkpointable():
    def two_rounds(seed):
        _, alg = _alg(seed=seed, optimizer="adam", lr=0.05)
        state, _ = alg.round(alg.init(), 1)
        buf = io.BytesIO()
        torch.save(state, buf)
        buf.seek(0)
        state, losses = alg.round(torch.load(buf, weights_only=True), 2)
        return state["personal"][W], state["alpha"], losses

    a, al, la = two_rounds(0)
    b, bl, lb = two_rounds(0)
    assert torch.equal(a, b) and torch.equal(al, bl) and la.tolist() == lb.tolist()
    assert not torch.equal(a, two_rounds(1)[0])


def test_parse_hyper():
    hp = parse_hyper(APFL, {"alpha": 1, "adaptive_alpha": False, "alpha_lr": 0})
    assert (hp.alpha, hp.adaptive_alpha, hp.alpha_lr) == (1.0, False, 0.0)
    for bad in ({"mix": 0.5}, {"alpha": 1.5}, {"alpha": -0.1}, {"alpha": "0.5"},
                {"adaptive_alpha": 1}, {"adaptive_alpha": "true"}, {"alpha_lr": -0.01}):
        with pytest.raises(ValueError):
            parse_hyper(APFL, bad)


def test_trains_through_the_one_path_and_vmap_equals_loop(monkeypatch):
    """Every round is one ``local_training.train`` call over all clients; vmap ≈ loop."""
    from pflrepro.training import local_training as LT

    calls = []
    real = LT.train

    def spy(engine, params, opt_state, clients, *args, **kwargs):
        calls.append((list(clients), kwargs["path"]))
        return real(engine, params, opt_state, clients, *args, **kwargs)

    monkeypatch.setattr(LT, "train", spy)
    out = {}
    for mode in ("loop", "vmap"):
        e, alg = _alg({"alpha_lr": 0.5}, optimizer="adam", lr=0.05, client_training=mode)
        state = alg.init()
        for rnd in (1, 2):
            state, _ = alg.round(state, rnd)
        out[mode] = state
    assert calls == [([0, 1, 2], "loop")] * 2 + [([0, 1, 2], "vmap")] * 2
    torch.testing.assert_close(out["vmap"]["alpha"], out["loop"]["alpha"], rtol=1e-5, atol=1e-6)
    assert not torch.equal(out["loop"]["alpha"], torch.full((3,), 0.5, dtype=torch.float64))
    for key in ("global", "personal"):
        assert_params_close(out["vmap"][key], out["loop"][key], rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------ the objective: MixedPair
def _pair_start(e, alpha):
    """w from the shared start, v from each client's own init; α per client."""
    shared, own = e.client_init(shared=True), e.client_init()
    params = join_pair(shared["params"], own["params"])
    opt = join_pair_states(shared["opt"], own["opt"], torch.tensor(alpha, dtype=torch.float64))
    return params, opt


@pytest.mark.parametrize("model", sorted(MODELS))
@pytest.mark.parametrize("opt", sorted(OPTIMISERS))
@pytest.mark.parametrize("adaptive", [True, False])
def test_mixed_pair_vmap_equals_loop(model, opt, adaptive):
    e = engine_for(model, opt)
    params, state = _pair_start(e, [0.5, 0.2, 0.9, 0.0, 1.0])
    looped = both_paths(e, params, state, MixedPair(lr=0.5, adaptive=adaptive), chunk=3)
    alpha = looped[1][ALPHA_KEY]
    if adaptive:  # α moved (and stayed in [0, 1])
        assert not torch.equal(alpha, state[ALPHA_KEY])
        assert bool(((alpha >= 0) & (alpha <= 1)).all())
    else:
        assert torch.equal(alpha, state[ALPHA_KEY])


def test_mixed_pair_one_sgd_step_by_hand():
    # w1 = w − lr ∇f(w); v1 = v − lr α ∇f(v̄); α1 = α − η ⟨∇f(v̄), v − w⟩; loss f(v̄)
    e = engine_for("mlp", "sgd")
    params, state = _pair_start(e, [0.3] * e.num_clients)
    k, lr, eta = 3, OPTIMISERS["sgd"]["lr"], 0.25
    w, v = split_pair(take(params, k))
    (idx,) = e.minibatches(k, 1, "local", 1)
    _, g_w = e.loss_and_grad(w, idx)
    f_bar, g_bar = e.loss_and_grad(mix(v, w, 0.3), idx)
    g_alpha = sum(float((g_bar[n] * (v[n] - w[n])).sum()) for n in w)
    for path in LT.PATHS:
        p1, s1, loss = train(e, rows_of(params, [k]), rows_of(state, [k]), [k], path,
                             MixedPair(lr=eta), steps=1)
        w1, v1 = split_pair(take(p1, 0))
        assert_params_close(w1, {n: w[n] - lr * g_w[n] for n in w}, atol=1e-6, rtol=1e-5)
        assert_params_close(v1, {n: v[n] - lr * 0.3 * g_bar[n] for n in v}, atol=1e-6,
                            rtol=1e-5)
        assert float(s1[ALPHA_KEY][0]) == pytest.approx(0.3 - eta * g_alpha, rel=1e-5)
        assert loss[0] == pytest.approx(f_bar, rel=1e-5)


def test_pair_dicts_round_trip():
    e = engine_for("mlp", "adam")
    a, b = e.client_init(shared=True), e.client_init()
    alpha = torch.linspace(0, 1, e.num_clients, dtype=torch.float64)
    state = join_pair_states(a["opt"], b["opt"], alpha)
    assert set(state) == {"step", ALPHA_KEY} | {f"{s}.{p}{n}" for s in ("m", "v")
                                                for p in ("base.", "mixed.")
                                                for n in a["params"]}
    oa, ob, al = split_pair_states(state)
    for x, y in ((oa, a["opt"]), (ob, b["opt"])):
        assert set(x) == set(y) and all(torch.equal(x[n], y[n]) for n in y)
    assert torch.equal(al, alpha)
    pa, pb = split_pair(join_pair(a["params"], b["params"]))
    assert all(torch.equal(pa[n], a["params"][n]) and torch.equal(pb[n], b["params"][n])
               for n in a["params"])
    bad = {**b["opt"], "step": b["opt"]["step"] + 1}
    with pytest.raises(ValueError, match="step counts"):
        join_pair_states(a["opt"], bad, alpha)
