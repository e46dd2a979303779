"""Per-FedAvg: MAML local steps (FO and exact-HVP HF), one α-step personalisation."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from _alg_helpers import algorithm_factory
from _fl_helpers import (
    B,
    W,
    assert_params_close,
    clone,
    make_engine,
    manual_loss_and_grad,
)
from _objective_helpers import (
    MODELS,
    OPTIMISERS,
    both_paths,
    engine_for,
    rows_of,
    train,
)

from pflrepro.algorithms.base import parse_hyper
from pflrepro.algorithms.fedavg import FedAvg
from pflrepro.algorithms.per_fedavg import (
    HESSIAN,
    INNER,
    MAML,
    OUTER,
    PERSONALISE,
    PerFedAvg,
)
from pflrepro.training import local_training as LT
from pflrepro.training.communication import Traffic, size
from pflrepro.training.params import take

_alg = algorithm_factory(PerFedAvg)


def _manual_hvp(params, x, y, vector):
    """∇²f(params) · vector of the linear model, by torch.autograd.functional.hvp."""
    def loss(w, b):
        return F.cross_entropy(x.flatten(1) @ w.T + b, y)

    _, (hw, hb) = torch.autograd.functional.hvp(
        loss, (params[W].detach(), params[B].detach()), (vector[W], vector[B]))
    return {W: hw, B: hb}


def _manual_round(e, start, rnd, alpha, lr, variant, weighted=False):
    """Plain-SGD Per-FedAvg round by hand: each client's τ MAML steps, then the uniform
    mean (Algorithm 1: 1/(rn) each), or the size-weighted one."""
    x, y = e.data.x, e.data.y
    models, losses = [], []
    for k in range(e.num_clients):
        steps = e.steps_per_round(k)
        inner = e.minibatches(k, rnd, INNER, steps)
        outer = e.minibatches(k, rnd, OUTER, steps)
        hess = e.minibatches(k, rnd, HESSIAN, steps)
        w, total = clone(start), 0.0
        for d, d1, d2 in zip(inner, outer, hess, strict=True):
            _, g = manual_loss_and_grad(w, x[d], y[d])
            temp = {n: w[n] - alpha * g[n] for n in (W, B)}
            loss, g1 = manual_loss_and_grad(temp, x[d1], y[d1])
            if variant == "hf":
                hv = _manual_hvp(w, x[d2], y[d2], g1)
                g1 = {n: g1[n] - alpha * hv[n] for n in (W, B)}
            w = {n: w[n] - lr * g1[n] for n in (W, B)}
            total += loss
        models.append(w)
        losses.append(total / steps)
    sizes = e.train_sizes() if weighted else torch.ones(e.num_clients)
    weights = sizes / sizes.sum()
    mean = {n: sum(weights[k] * models[k][n] for k in range(e.num_clients)) for n in (W, B)}
    return mean, losses


@pytest.mark.parametrize("variant", ["fo", "hf"])
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_alpha_zero_is_fedavg_bit_for_bit(variant, optimizer):
    """temp = w when α = 0, D' is FedAvg's 'local' stream, and the HF term vanishes."""
    e, per = _alg({"alpha": 0.0, "variant": variant, "aggregation": "weighted"},
                  optimizer=optimizer, lr=0.1)
    fedavg = FedAvg(e, parse_hyper(FedAvg, {}))
    a, b = per.init(), fedavg.init()
    for rnd in (1, 2, 3):
        a, loss_a = per.round(a, rnd)
        b, loss_b = fedavg.round(b, rnd)
        assert_params_close(a["global"], b["global"], atol=0, rtol=0)
        assert loss_a.tolist() == loss_b.tolist()
    x = e.data.x[e.data.test[0]]
    torch.testing.assert_close(per.predict(a, 0, x, 3), fedavg.predict(b, 0, x, 3),
                               atol=0, rtol=0)


@pytest.mark.parametrize("variant", ["fo", "hf"])
def test_round_by_hand(variant):
    # plain SGD β = 0.3, α = 0.2, two MAML steps per client on its three streams
    alpha, lr = 0.2, 0.3
    e, alg = _alg({"alpha": alpha, "variant": variant}, lr=lr, optimizer="sgd",
                  local_steps=2)
    state = alg.init()
    start = clone(state["global"])
    state, losses = alg.round(state, 1)
    expected, expected_losses = _manual_round(e, start, 1, alpha, lr, variant)
    assert_params_close(state["global"], expected)
    assert losses.tolist() == pytest.approx(expected_losses, rel=1e-5)
    # a second round starts from the new global model
    start = clone(state["global"])
    state, _ = alg.round(state, 2)
    expected, _ = _manual_round(e, start, 2, alpha, lr, variant)
    assert_params_close(state["global"], expected)


def test_server_averages_uniformly_by_default_and_by_size_when_weighted():
    # train sizes (4, 2, 3): the paper's mean gives each client 1/3, the weighted form
    # 4/9, 2/9, 3/9; one plain-SGD FO step per client by hand
    alpha, lr = 0.2, 0.3
    assert parse_hyper(PerFedAvg, {}).aggregation == "uniform"
    got = {}
    for aggregation in ("uniform", "weighted"):
        e, alg = _alg({"alpha": alpha, "variant": "fo", "aggregation": aggregation},
                      lr=lr, optimizer="sgd", local_steps=1)
        state = alg.init()
        start = clone(state["global"])
        state, _ = alg.round(state, 1)
        expected, _ = _manual_round(e, start, 1, alpha, lr, "fo",
                                    weighted=aggregation == "weighted")
        assert_params_close(state["global"], expected)
        got[aggregation] = state["global"]
    assert not torch.allclose(got["uniform"][W], got["weighted"][W])
    with pytest.raises(ValueError, match="aggregation"):
        parse_hyper(PerFedAvg, {"aggregation": "median"})


def test_hf_differs_from_fo_when_alpha_positive():
    def one_round(variant):
        e, alg = _alg({"alpha": 0.5, "variant": variant}, lr=0.3)
        return alg.round(alg.init(), 1)[0]["global"]

    fo, hf = one_round("fo"), one_round("hf")
    assert not torch.allclose(fo[W], hf[W])


def test_optimiser_state_per_client_kept_across_rounds():
    e, alg = _alg(optimizer="adam", lr=0.01)
    state = alg.init()
    for rnd in (1, 2):
        state, _ = alg.round(state, rnd)
    # τ = ceil(n_k / batch 2) steps per round for n = (4, 2, 3)
    assert state["opt"]["step"].tolist() == [4, 2, 4]
    assert state["opt"][f"m.{W}"].shape == (3, *state["global"][W].shape)


@pytest.mark.parametrize("personal_steps", [1, 2])
def test_predict_personalises_by_alpha_steps_without_touching_the_state(personal_steps):
    alpha = 0.4
    e, alg = _alg({"alpha": alpha, "personal_steps": personal_steps}, lr=0.2)
    state, _ = alg.round(alg.init(), 1)
    before = clone(state)
    x = e.data.x[e.data.test[2]]
    w = clone(state["global"])
    batches = e.minibatches(2, 1, PERSONALISE, personal_steps)
    assert len(batches) == personal_steps
    for idx in batches:
        _, g = manual_loss_and_grad(w, e.data.x[idx], e.data.y[idx])
        w = {n: w[n] - alpha * g[n] for n in (W, B)}
    p = alg.predict(state, 2, x, 1)
    torch.testing.assert_close(p, e.probs(w, x))
    torch.testing.assert_close(alg.predict(state, 2, x, 1), p, atol=0, rtol=0)
    assert not torch.allclose(p, e.probs(state["global"], x))
    assert_params_close(state["global"], before["global"], atol=0, rtol=0)
    assert_params_close(state["opt"], before["opt"], atol=0, rtol=0)


def test_round_reports_one_model_each_way_per_client():
    e, alg = _alg()
    state = alg.init()
    e.traffic = Traffic(e.num_clients)
    alg.round(state, 1)
    p = size(e.init_params())
    assert p == 2 * 2 + 2
    assert e.traffic.up.tolist() == [p] * 3
    assert e.traffic.down.tolist() == [p] * 3


def test_state_is_checkpointable(tmp_path):
    e, alg = _alg({"variant": "hf"})
    state, _ = alg.round(alg.init(), 1)
    torch.save(state, tmp_path / "s.pt")
    loaded = torch.load(tmp_path / "s.pt", weights_only=True)
    assert_params_close(loaded["global"], state["global"], atol=0, rtol=0)


def test_bad_hyperparameters():
    with pytest.raises(ValueError, match="alpha"):
        parse_hyper(PerFedAvg, {"alpha": -0.1})
    with pytest.raises(ValueError, match="variant"):
        parse_hyper(PerFedAvg, {"variant": "so"})
    with pytest.raises(ValueError, match="personal_steps"):
        parse_hyper(PerFedAvg, {"personal_steps": 0})


def test_client_sampling_alpha_zero_is_fedavgs():
    """With C < 1 only the sampled clients train; α = 0 FO still equals FedAvg bit for bit."""
    from _fl_helpers import make_data

    data = make_data(n_train=(4, 2, 3, 5), n_test=(1, 1, 1, 1))
    e = make_engine(data, client_fraction=0.5, lr=0.2)
    alg = PerFedAvg(e, parse_hyper(PerFedAvg, {"alpha": 0.0, "variant": "fo",
                                               "aggregation": "weighted"}))
    ref = FedAvg(e, parse_hyper(FedAvg, {}))
    a, b = alg.init(), ref.init()
    for rnd in (1, 2):
        a, la = alg.round(a, rnd)
        b, lb = ref.round(b, rnd)
        for n in a["global"]:
            assert torch.equal(a["global"][n], b["global"][n])
        assert torch.equal(a["opt"]["step"], b["opt"]["step"])
        chosen = e.participants(rnd)
        assert [k for k in range(4) if la[k] == la[k]] == chosen  # NaN: did not train


def test_docstring_states_client_sampling():
    from pflrepro.algorithms import per_fedavg

    assert PerFedAvg.client_sampling
    assert "full participation" not in per_fedavg.__doc__
    assert "client_fraction" in per_fedavg.__doc__


@pytest.mark.parametrize("variant", ["fo", "hf"])
def test_trains_through_the_one_path_and_vmap_equals_loop(variant, monkeypatch):
    """A round is one ``local_training.train`` call over its participants; vmap ≈ loop."""
    from pflrepro.training import local_training as LT

    calls = []
    real = LT.train

    def spy(engine, params, opt_state, clients, rnd, purpose, *args, **kwargs):
        calls.append((list(clients), purpose, kwargs["path"]))
        return real(engine, params, opt_state, clients, rnd, purpose, *args, **kwargs)

    monkeypatch.setattr(LT, "train", spy)
    out = {}
    for mode in ("loop", "vmap"):
        e, alg = _alg({"alpha": 0.2, "variant": variant}, optimizer="adam", lr=0.05,
                      client_fraction=0.67, client_training=mode)
        state = alg.init()
        losses = []
        for rnd in (1, 2):
            state, loss = alg.round(state, rnd)
            losses.append(loss)
        out[mode] = (state, np.stack(losses))
    assert [c[1:] for c in calls] == [("local", "loop")] * 2 + [("local", "vmap")] * 2
    assert calls[0][0] == e.participants(1) and len(calls[0][0]) == 2
    (sv, lv), (sl, ll) = out["vmap"], out["loop"]
    np.testing.assert_allclose(lv, ll, rtol=1e-5, atol=1e-6)
    assert np.isnan(ll).sum() == 2  # the one client left out of each round
    assert_params_close(sv["global"], sl["global"], rtol=1e-5, atol=1e-6)
    for n in sl["opt"]:
        torch.testing.assert_close(sv["opt"][n], sl["opt"][n], rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------ the objective: MAML
@pytest.mark.parametrize("model", sorted(MODELS))
@pytest.mark.parametrize("opt", sorted(OPTIMISERS))
@pytest.mark.parametrize("hessian", [None, "maml_hessian"])
def test_maml_vmap_equals_loop(model, opt, hessian):
    e = engine_for(model, opt)
    start = e.client_init(shared=True)
    both_paths(e, start["params"], start["opt"], MAML(0.3, "maml_inner", hessian))


def test_maml_one_step_by_hand():
    # w1 = w − lr (g' − α H g'), g' = ∇f(w − α ∇f(w; D); D'), H = ∇²f(w; D'') (autograd)
    e = engine_for("mlp", "sgd")
    start = e.client_init(shared=True)
    k, alpha, lr = 2, 0.3, OPTIMISERS["sgd"]["lr"]
    w = take(start["params"], k)
    (d,) = e.minibatches(k, 1, "inner", 1)
    (d1,) = e.minibatches(k, 1, "local", 1)
    (d2,) = e.minibatches(k, 1, "hess", 1)
    _, g = e.loss_and_grad(w, d)
    temp = {n: w[n] - alpha * g[n] for n in w}
    f1, g1 = e.loss_and_grad(temp, d1)
    names = list(w)

    def grad_at(*flat):
        p = {n: t.requires_grad_(True) for n, t in zip(names, flat, strict=True)}
        loss = F.cross_entropy(torch.func.functional_call(e.model, p, (e.data.x[d2],)),
                               e.data.y[d2])
        return torch.autograd.grad(loss, list(p.values()), create_graph=True)

    _, hv = torch.autograd.functional.vjp(grad_at, tuple(w[n].clone() for n in names),
                                          tuple(g1[n] for n in names))
    want = {n: w[n] - lr * (g1[n] - alpha * h) for n, h in zip(names, hv, strict=True)}
    first_order = {n: w[n] - lr * g1[n] for n in names}
    for path in LT.PATHS:
        one = rows_of(start["params"], [k]), rows_of(start["opt"], [k]), [k], path
        out = train(e, *one, MAML(alpha, "inner", "hess"), steps=1)
        assert_params_close(take(out[0], 0), want, atol=1e-6, rtol=1e-5)
        assert out[2][0] == pytest.approx(f1, rel=1e-5)
        fo = train(e, *one, MAML(alpha, "inner"), steps=1)
        assert_params_close(take(fo[0], 0), first_order, atol=1e-6, rtol=1e-5)
