"""pflrepro.training.objectives: weights, peers' batches, APFL's pair, MAML, distillation, gated
experts on both paths.

Each objective's vectorised pass (``local_training.VMAP``) must equal its per-client
loop within float32 rounding, with clients of different step counts and batch sizes
(padding), for SGD, SGD with momentum and Adam, on a small MLP and a small CNN.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest
import torch
from _fl_helpers import assert_params_close, make_data, make_engine

from pflrepro.training import local_training as LT
from pflrepro.training.engine import Engine
from pflrepro.training.objectives import (
    ALPHA_KEY,
    EXPERT_LOSS_KEY,
    MAML,
    Distill,
    GatedExperts,
    MixedPair,
    PeerWeighted,
    SampleWeighted,
    Stream,
    gate_logits,
    join_experts,
    join_pair,
    join_pair_states,
    mix,
    split_experts,
    split_pair,
    split_pair_states,
)
from pflrepro.training.params import stack, take

RTOL, ATOL = 1e-4, 1e-5
N_TRAIN = (7, 3, 12, 5, 1)  # batch 4: batch sizes 4, 3, 4, 4, 1; steps per epoch 2, 1, 3, 2, 1
MODELS: dict[str, dict[str, Any]] = {
    "mlp": {"model": "mlp", "model_options": {"hidden": [6]}, "shape": (1, 4, 4)},
    "cnn": {"model": "cnn", "model_options": {"channels": [2, 3], "hidden": 8,
                                              "kernel_size": 3}, "shape": (2, 8, 8)},
}
OPTIMISERS: dict[str, dict[str, Any]] = {
    "sgd": {"optimizer": "sgd", "lr": 0.1},
    "momentum": {"optimizer": "sgd", "lr": 0.05, "momentum": 0.9},
    "adam": {"optimizer": "adam", "lr": 0.01},
}


def engine_for(model: str, opt: str, seed: int = 3) -> Engine:
    spec = MODELS[model]
    data = make_data(n_train=N_TRAIN, n_test=(1,) * len(N_TRAIN), shape=spec["shape"],
                     num_classes=3, seed=seed, public=5)
    data = dataclasses.replace(data, x=data.x.to(torch.float32))
    return make_engine(data, seed=seed, model=spec["model"],
                       model_options=spec["model_options"], batch_size=4, local_epochs=2,
                       **OPTIMISERS[opt])


def row_weights(e: Engine, seed: int = 0) -> torch.Tensor:
    """Per client, a weight in [0, 1) for every data row (others' rows get weights too)."""
    gen = torch.Generator().manual_seed(seed)
    return torch.rand(e.num_clients, len(e.data.x), generator=gen)


def rows_of(stacked: dict, which: list[int]) -> dict:
    return {n: v[which] for n, v in stacked.items()}


def assert_same(a: tuple, b: tuple) -> None:
    assert_params_close(a[0], b[0], atol=ATOL, rtol=RTOL)
    assert_params_close(a[1], b[1], atol=ATOL, rtol=RTOL)
    np.testing.assert_allclose(np.asarray(a[2]), b[2], rtol=RTOL, atol=ATOL)


# ------------------------------------------------------------ SampleWeighted
@pytest.mark.parametrize("model", sorted(MODELS))
@pytest.mark.parametrize("opt", sorted(OPTIMISERS))
def test_sample_weighted_vmap_equals_loop(model: str, opt: str) -> None:
    e = engine_for(model, opt)
    start = e.client_init()
    clients = list(range(e.num_clients))
    objective = SampleWeighted(row_weights(e), per_client=True)
    looped = LT.train(e, start["params"], start["opt"], clients, 1, objective=objective,
                      path=LT.LOOP)
    vectorised = LT.train(e, start["params"], start["opt"], clients, 1, objective=objective,
                          path=LT.VMAP)
    assert_same(vectorised, looped)
    chunked = LT.train(e, start["params"], start["opt"], clients, 1, objective=objective,
                       path=LT.VMAP, chunk=2)
    assert_same(chunked, looped)
    # the weights matter: the plain mean loss moves the models elsewhere
    plain = LT.train(e, start["params"], start["opt"], clients, 1, path=LT.LOOP)
    assert any(not torch.allclose(plain[0][n], looped[0][n]) for n in plain[0])


def test_sample_weighted_loss_by_hand_and_zero_weights_freeze_sgd() -> None:
    e = engine_for("mlp", "sgd")
    start = e.client_init()
    k = 2
    w = row_weights(e)[k]
    (idx,) = e.minibatches(k, 1, "local", 1)
    # the loop's loss: Σ_s w_s ℓ_s / |batch|, from per-sample losses computed apart
    p = take(start["params"], k)
    each = torch.stack([e.loss_and_grad(p, idx[j:j + 1])[0] * torch.ones(())
                        for j in range(len(idx))])
    loss, _ = SampleWeighted(w).loss_and_grad(e, p, idx, {})
    assert loss == pytest.approx(float((w[idx] * each).sum() / len(idx)), rel=1e-5)
    # all-ones weights: the mean loss and gradient
    mean_loss, mean_grad = e.loss_and_grad(p, idx)
    ones_loss, ones_grad = SampleWeighted(torch.ones(len(e.data.x))).loss_and_grad(e, p, idx, {})
    assert ones_loss == pytest.approx(mean_loss, rel=1e-6)
    assert_params_close(ones_grad, mean_grad, atol=1e-7, rtol=1e-5)
    # zero weights for client 1 (SGD): no gradient, its model stays where it was
    weights = row_weights(e)
    weights[1] = 0.0
    for path in LT.PATHS:
        out = LT.train(e, rows_of(start["params"], [0, 1]), rows_of(start["opt"], [0, 1]),
                       [0, 1], 1, objective=SampleWeighted(weights[:2], per_client=True), path=path)
        assert_params_close(take(out[0], 1), take(start["params"], 1), atol=0, rtol=0)
        assert out[2][1] == 0.0
        assert any(not torch.equal(take(out[0], 0)[n], take(start["params"], 0)[n])
                   for n in start["params"])


def test_shared_weights_equal_stacked_weights() -> None:
    e = engine_for("mlp", "adam")
    start = e.client_init()
    w = row_weights(e)[0]
    clients = list(range(e.num_clients))
    shared = LT.train(e, start["params"], start["opt"], clients, 1,
                      objective=SampleWeighted(w), path=LT.VMAP)
    stacked = LT.train(e, start["params"], start["opt"], clients, 1,
                       objective=SampleWeighted(stack({"w": w}, e.num_clients)["w"],
                                                per_client=True), path=LT.VMAP)
    assert_same(shared, stacked)


# ------------------------------------------------------------ PeerWeighted
#: Per trained client (5), the users whose streams train its model: 0..4 streams, so
#: the vectorised pass pads both the streams and (users' sizes 7, 3, 12, 5, 1) batches.
PEER_USERS = ((0, 1, 2), (1,), (4, 0, 2, 3), (3, 4), ())


def peer_objective(whole: bool = False, seed: int = 0) -> PeerWeighted:
    """Client c's model on the streams of PEER_USERS[c] (purpose ``peer_<c>``), c ∈ (0, 1)."""
    gen = torch.Generator().manual_seed(seed)
    width = max(len(u) for u in PEER_USERS)
    coef = torch.rand(len(PEER_USERS), width, generator=gen, dtype=torch.float64)
    for c, users in enumerate(PEER_USERS):
        coef[c, len(users):] = 0.0
    streams = tuple(tuple(Stream(f"peer_{c}", client=i, whole=whole) for i in users)
                    for c, users in enumerate(PEER_USERS))
    return PeerWeighted(streams, coef)


@pytest.mark.parametrize("model", sorted(MODELS))
@pytest.mark.parametrize("opt", sorted(OPTIMISERS))
@pytest.mark.parametrize("whole", [False, True])
def test_peer_weighted_vmap_equals_loop(model: str, opt: str, whole: bool) -> None:
    e = engine_for(model, opt)
    start = e.client_init()
    clients = list(range(e.num_clients))
    objective = peer_objective(whole)
    looped = LT.train(e, start["params"], start["opt"], clients, 1, objective=objective,
                      path=LT.LOOP)
    vectorised = LT.train(e, start["params"], start["opt"], clients, 1, objective=objective,
                          path=LT.VMAP)
    assert_same(vectorised, looped)
    assert_same(LT.train(e, start["params"], start["opt"], clients, 1, objective=objective,
                         path=LT.VMAP, chunk=2), looped)
    # client 4 has no stream: zero gradients, its model stays (SGD, momentum, Adam from 0)
    assert_params_close(take(looped[0], 4), take(start["params"], 4), atol=0, rtol=0)
    assert looped[2][4] == 0.0
    # other coefficients move the models of several streams elsewhere (one stream's
    # coefficient is a scale, which Adam does not see)
    other = peer_objective(whole, seed=1)
    moved = LT.train(e, start["params"], start["opt"], clients, 1, objective=other,
                     path=LT.LOOP)
    for c in (0, 2, 3):
        a, b = take(moved[0], c), take(looped[0], c)
        assert any(not torch.allclose(a[n], b[n]) for n in a)


def test_peer_weighted_one_sgd_step_by_hand() -> None:
    # φ1 = φ − lr (0.25 ∇ mean ℓ(batch of client 1's stream 'a') + 0.75 ∇ mean ℓ(all of
    # D_2)); reported loss 0.25 ℓ_a + 0.75 ℓ_2; the trained client's own data unused
    e = engine_for("mlp", "sgd")
    start = e.client_init()
    k, lr = 0, OPTIMISERS["sgd"]["lr"]
    (batch_a,) = e.minibatches(1, 1, "a", 1)
    rows_2 = e.data.train[2]
    assert len(batch_a) == 3 and len(rows_2) == 12  # client 1's 3 samples, all of client 2's
    phi = take(start["params"], k)
    p = {n: v.clone().requires_grad_(True) for n, v in phi.items()}
    net = e.net_for(phi)
    loss_a = torch.nn.functional.cross_entropy(torch.func.functional_call(
        net, p, (e.data.x[batch_a],)), e.data.y[batch_a])
    loss_2 = torch.nn.functional.cross_entropy(torch.func.functional_call(
        net, p, (e.data.x[rows_2],)), e.data.y[rows_2])
    grads = torch.autograd.grad(0.25 * loss_a + 0.75 * loss_2, list(p.values()))
    expected = {n: phi[n] - lr * g for n, g in zip(p, grads, strict=True)}
    objective = PeerWeighted(((Stream("a", client=1), Stream("b", client=2, whole=True)),),
                             torch.tensor([[0.25, 0.75]], dtype=torch.float64))
    for path in LT.PATHS:
        p1, _, loss = LT.train(e, rows_of(start["params"], [k]), rows_of(start["opt"], [k]),
                               [k], 1, steps=1, objective=objective, path=path)
        assert_params_close(take(p1, 0), expected, atol=1e-6, rtol=1e-5)
        assert loss[0] == pytest.approx(float(0.25 * loss_a.detach() + 0.75 * loss_2.detach()),
                                        rel=1e-5)


def test_peer_weighted_shared_equals_stacked_and_checks() -> None:
    e = engine_for("mlp", "adam")
    start = e.client_init()
    clients = list(range(e.num_clients))
    streams = (Stream("x", client=3), Stream("y", client=1))
    coef = torch.tensor([[0.6, 0.4]], dtype=torch.float64)
    shared = PeerWeighted((streams,), coef, per_client=False)
    assert shared.streams == streams and shared.client_streams(4) == streams
    stacked = PeerWeighted((streams,) * len(clients), coef.expand(len(clients), -1))
    for path in LT.PATHS:
        assert_same(LT.train(e, start["params"], start["opt"], clients, 1, objective=shared,
                             path=path),
                    LT.train(e, start["params"], start["opt"], clients, 1, objective=stacked,
                             path=path))
    with pytest.raises(TypeError, match="client_streams"):
        _ = stacked.streams
    with pytest.raises(ValueError, match="coef must be"):
        PeerWeighted((streams,), torch.zeros(2))
    with pytest.raises(ValueError, match="1 columns for 2 streams"):
        PeerWeighted((streams,), torch.zeros(1, 1))
    with pytest.raises(ValueError, match="one row"):
        PeerWeighted((streams, streams), torch.zeros(2, 2), per_client=False)


def test_stream_checks() -> None:
    with pytest.raises(ValueError, match="public stream has no client"):
        Stream("p", public=True, client=1)
    with pytest.raises(ValueError, match="no batch size"):
        Stream("w", whole=True, batch_size=3)


# ------------------------------------------------------------ MixedPair
def pair_start(e: Engine, alpha: list[float]) -> tuple[dict, dict]:
    """w from the shared start, v from each client's own init; α per client."""
    shared, own = e.client_init(shared=True), e.client_init()
    params = join_pair(shared["params"], own["params"])
    opt = join_pair_states(shared["opt"], own["opt"],
                           torch.tensor(alpha, dtype=torch.float64))
    return params, opt


@pytest.mark.parametrize("model", sorted(MODELS))
@pytest.mark.parametrize("opt", sorted(OPTIMISERS))
@pytest.mark.parametrize("adaptive", [True, False])
def test_mixed_pair_vmap_equals_loop(model: str, opt: str, adaptive: bool) -> None:
    e = engine_for(model, opt)
    params, state = pair_start(e, [0.5, 0.2, 0.9, 0.0, 1.0])
    objective = MixedPair(lr=0.5, adaptive=adaptive)
    clients = list(range(e.num_clients))
    looped = LT.train(e, params, state, clients, 1, objective=objective, path=LT.LOOP)
    vectorised = LT.train(e, params, state, clients, 1, objective=objective, path=LT.VMAP)
    assert_same(vectorised, looped)
    alpha = looped[1][ALPHA_KEY]
    if adaptive:  # α moved (and stayed in [0, 1])
        assert not torch.equal(alpha, state[ALPHA_KEY])
        assert bool(((alpha >= 0) & (alpha <= 1)).all())
    else:
        assert torch.equal(alpha, state[ALPHA_KEY])
        assert torch.equal(vectorised[1][ALPHA_KEY], state[ALPHA_KEY])
    assert_same(LT.train(e, params, state, clients, 1, objective=objective, path=LT.VMAP,
                         chunk=3), looped)


def test_mixed_pair_one_sgd_step_by_hand() -> None:
    # w1 = w − lr ∇f(w); v1 = v − lr α ∇f(v̄); α1 = α − η ⟨∇f(v̄), v − w⟩; loss f(v̄)
    e = engine_for("mlp", "sgd")
    params, state = pair_start(e, [0.3] * e.num_clients)
    k, lr, eta = 3, OPTIMISERS["sgd"]["lr"], 0.25
    w, v = split_pair(take(params, k))
    (idx,) = e.minibatches(k, 1, "local", 1)
    _, g_w = e.loss_and_grad(w, idx)
    f_bar, g_bar = e.loss_and_grad(mix(v, w, 0.3), idx)
    g_alpha = sum(float((g_bar[n] * (v[n] - w[n])).sum()) for n in w)
    for path in LT.PATHS:
        p1, s1, loss = LT.train(e, rows_of(params, [k]), rows_of(state, [k]), [k], 1, steps=1,
                                objective=MixedPair(lr=eta), path=path)
        w1, v1 = split_pair(take(p1, 0))
        assert_params_close(w1, {n: w[n] - lr * g_w[n] for n in w}, atol=1e-6, rtol=1e-5)
        assert_params_close(v1, {n: v[n] - lr * 0.3 * g_bar[n] for n in v}, atol=1e-6,
                            rtol=1e-5)
        assert float(s1[ALPHA_KEY][0]) == pytest.approx(0.3 - eta * g_alpha, rel=1e-5)
        assert loss[0] == pytest.approx(f_bar, rel=1e-5)


def test_pair_dicts_round_trip() -> None:
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


# ------------------------------------------------------------ MAML
@pytest.mark.parametrize("model", sorted(MODELS))
@pytest.mark.parametrize("opt", sorted(OPTIMISERS))
@pytest.mark.parametrize("hessian", [None, "maml_hessian"])
def test_maml_vmap_equals_loop(model: str, opt: str, hessian: str | None) -> None:
    e = engine_for(model, opt)
    start = e.client_init(shared=True)
    objective = MAML(0.3, "maml_inner", hessian)
    clients = [0, 1, 2, 3, 4]
    looped = LT.train(e, start["params"], start["opt"], clients, 1, objective=objective,
                      path=LT.LOOP)
    vectorised = LT.train(e, start["params"], start["opt"], clients, 1, objective=objective,
                          path=LT.VMAP)
    assert_same(vectorised, looped)


def test_maml_one_step_by_hand() -> None:
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

    def grad_at(*flat: torch.Tensor) -> tuple[torch.Tensor, ...]:
        p = {n: t.requires_grad_(True) for n, t in zip(names, flat, strict=True)}
        loss = torch.nn.functional.cross_entropy(
            torch.func.functional_call(e.model, p, (e.data.x[d2],)), e.data.y[d2])
        return torch.autograd.grad(loss, list(p.values()), create_graph=True)

    _, hv = torch.autograd.functional.vjp(grad_at, tuple(w[n].clone() for n in names),
                                          tuple(g1[n] for n in names))
    want = {n: w[n] - lr * (g1[n] - alpha * h) for n, h in zip(names, hv, strict=True)}
    for path in LT.PATHS:
        out = LT.train(e, rows_of(start["params"], [k]), rows_of(start["opt"], [k]), [k], 1,
                       steps=1, objective=MAML(alpha, "inner", "hess"), path=path)
        assert_params_close(take(out[0], 0), want, atol=1e-6, rtol=1e-5)
        assert out[2][0] == pytest.approx(f1, rel=1e-5)


# ------------------------------------------------------------ Distill
def public_targets(e: Engine, clients: int, seed: int = 1) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    assert e.data.public is not None
    return torch.rand(clients, len(e.data.public), e.data.num_classes,
                      generator=gen).softmax(dim=-1)


@pytest.mark.parametrize("model", sorted(MODELS))
@pytest.mark.parametrize("opt", sorted(OPTIMISERS))
@pytest.mark.parametrize("public_batch", [None, 3])
def test_distill_vmap_equals_loop(model: str, opt: str, public_batch: int | None) -> None:
    e = engine_for(model, opt)
    start = e.client_init()
    clients = list(range(e.num_clients))
    objective = Distill(public_targets(e, len(clients)), 0.7, batch_size=public_batch,
                        per_client=True)
    looped = LT.train(e, start["params"], start["opt"], clients, 1, objective=objective,
                      path=LT.LOOP)
    vectorised = LT.train(e, start["params"], start["opt"], clients, 1, objective=objective,
                          path=LT.VMAP)
    assert_same(vectorised, looped)
    plain = LT.train(e, start["params"], start["opt"], clients, 1, path=LT.LOOP)
    assert any(not torch.allclose(plain[0][n], looped[0][n]) for n in plain[0])


def test_distill_one_step_by_hand() -> None:
    # g = ∇ CE(private) + λ ∇ mean_rows(−Σ t log softmax) on the public batch (autograd)
    e = engine_for("mlp", "sgd")
    start = e.client_init()
    k, lam, lr = 2, 0.7, OPTIMISERS["sgd"]["lr"]
    targets = public_targets(e, 1)[0]
    w = take(start["params"], k)
    (idx,) = e.minibatches(k, 1, "local", 1)
    assert e.data.public is not None
    (rows,) = e.minibatches(k, 1, "public", 1, pool=torch.arange(len(e.data.public)),
                            batch_size=3)
    p = {n: v.clone().requires_grad_(True) for n, v in w.items()}
    out = torch.func.functional_call(e.model, p, (e.data.x[idx],))
    pub = torch.func.functional_call(e.model, p, (e.data.public[rows],)).log_softmax(-1)
    ce = torch.nn.functional.cross_entropy(out, e.data.y[idx])
    total = ce + lam * (-(targets[rows] * pub).sum(-1).mean())
    grads = dict(zip(p, torch.autograd.grad(total, list(p.values())), strict=True))
    for path in LT.PATHS:
        got = LT.train(e, rows_of(start["params"], [k]), rows_of(start["opt"], [k]), [k], 1,
                       steps=1, objective=Distill(targets, lam, batch_size=3), path=path)
        assert_params_close(take(got[0], 0), {n: w[n] - lr * grads[n] for n in w},
                            atol=1e-6, rtol=1e-5)
        assert got[2][0] == pytest.approx(float(ce.detach()), rel=1e-5)


# ------------------------------------------------------------ GatedExperts
#: q(z | y) of the 3 classes over 2 experts: class 0 gives expert 1 no weight (it skips
#: batches of class 0 only), class 2 gives expert 0 all of it (weights all 1).
Q = [[1.0, 0.0], [0.3, 0.7], [1.0, 0.0]]


def gated_start(e: Engine, gate: bool = True, seed: int = 2) -> tuple[dict, dict]:
    """Two experts (own and shared draws), a 3-unit gate per client, the joint state."""
    c = e.num_clients
    experts = [e.client_init()["params"], e.client_init(shared=True)["params"]]
    gates = {}
    if gate:
        gen = torch.Generator().manual_seed(seed)
        features = int(np.prod(e.data.x.shape[1:]))
        shapes = {"w1": (3, features), "b1": (3,), "w2": (2, 3), "b2": (2,)}
        gates = {n: 0.5 * torch.randn(c, *sh, generator=gen) for n, sh in shapes.items()}
    params = join_experts(experts, gates)
    state = stack(e.init_opt(take(params, 0)), c)
    state[EXPERT_LOSS_KEY] = torch.zeros(c, 2, dtype=torch.float64)
    return params, state


def gated(e: Engine, marginal: bool = False, one_hot: bool = False) -> GatedExperts:
    c = e.num_clients
    q = torch.tensor(Q).unsqueeze(0).expand(c, -1, -1)
    trains = torch.ones(c, 2, dtype=torch.bool)
    trains[1, 0] = False  # client 1 never trains expert 0
    prior = torch.zeros(c, 2)
    if one_hot:  # client k's fixed gate: expert k % 2
        prior.fill_(-float("inf"))
        prior[torch.arange(c), torch.arange(c) % 2] = 0.0
    return GatedExperts(q, trains, prior, 2, marginal=marginal, learned_gate=not one_hot,
                        per_client=True)


@pytest.mark.parametrize("model", sorted(MODELS))
@pytest.mark.parametrize("opt", sorted(OPTIMISERS))
@pytest.mark.parametrize("kind", ["bound", "marginal", "one_hot"])
def test_gated_experts_vmap_equals_loop(model: str, opt: str, kind: str) -> None:
    e = engine_for(model, opt)
    params, state = gated_start(e, gate=kind != "one_hot")
    objective = gated(e, marginal=kind != "bound", one_hot=kind == "one_hot")
    clients = list(range(e.num_clients))
    looped = LT.train(e, params, state, clients, 1, objective=objective, path=LT.LOOP)
    vectorised = LT.train(e, params, state, clients, 1, objective=objective, path=LT.VMAP)
    assert_same(vectorised, looped)  # parameters, states with the running losses, losses
    assert_same(LT.train(e, params, state, clients, 1, objective=objective, path=LT.VMAP,
                         chunk=2), looped)
    running = looped[1][EXPERT_LOSS_KEY]
    assert bool((running[1, 0] == 0) & (running[:, 1] > 0).any())  # client 1 kept expert 0
    # a client's reported loss is the sum of its experts' running losses over its steps
    steps = np.array([e.steps_per_round(k) for k in clients])
    np.testing.assert_allclose(looped[2], running.sum(1).numpy() / steps, rtol=1e-12)
    if opt == "sgd":  # a zero gradient leaves an expert exactly where it was
        for path_result in (looped, vectorised):
            experts, _ = split_experts(take(path_result[0], 1), 2)
            start, _ = split_experts(take(params, 1), 2)
            assert all(torch.equal(experts[0][n], start[0][n]) for n in start[0])


def test_gated_experts_one_sgd_step_by_hand() -> None:
    # expert k: w − lr ∇ Σ_i r_ik ℓ_ik / n with r = q(· | y); the gate: θ − lr ∇ of the
    # mean cross-entropy of softmax(gate(x)) against r; loss Σ_k of the experts' losses
    e = engine_for("mlp", "sgd")
    params, state = gated_start(e)
    k, lr = 3, OPTIMISERS["sgd"]["lr"]
    (idx,) = e.minibatches(k, 1, "local", 1)
    x, y = e.data.x[idx], e.data.y[idx]
    r = torch.tensor(Q)[y]
    experts, gate = split_experts(take(params, k), 2)
    want, loss = {}, 0.0
    for j, expert in enumerate(experts):
        p = {n: v.clone().requires_grad_(True) for n, v in expert.items()}
        out = torch.func.functional_call(e.model, p, (x,))
        ell = (torch.nn.functional.cross_entropy(out, y, reduction="none") * r[:, j]).sum()
        ell = ell / len(idx)
        grads = torch.autograd.grad(ell, list(p.values()))
        want.update({f"expert{j}.{n}": expert[n] - lr * g
                     for n, g in zip(p, grads, strict=True)})
        loss += ell.item()
    g_params = {n: v.clone().requires_grad_(True) for n, v in gate.items()}
    gate_loss = -(r * gate_logits(g_params, x).log_softmax(-1)).sum(1).mean()
    grads = torch.autograd.grad(gate_loss, list(g_params.values()))
    want.update({f"gate.{n}": gate[n] - lr * g for n, g in zip(g_params, grads, strict=True)})
    for path in LT.PATHS:
        got = LT.train(e, rows_of(params, [k]), rows_of(state, [k]), [k], 1, steps=1,
                       objective=gated(e).rows(k, k + 1), path=path)
        assert_params_close(take(got[0], 0), want, atol=1e-6, rtol=1e-5)
        assert got[2][0] == pytest.approx(loss, rel=1e-5)


def test_expert_dicts_round_trip() -> None:
    a, b, g = {"w": torch.ones(2)}, {"w": torch.zeros(2)}, {"w2": torch.full((1,), 3.0)}
    joint = join_experts([a, b], g)
    assert list(joint) == ["expert0.w", "expert1.w", "gate.w2"]
    experts, gate = split_experts(joint, 2)
    assert experts == [a, b] and gate == g
    assert split_experts(join_experts([a], {}), 1) == ([a], {})
