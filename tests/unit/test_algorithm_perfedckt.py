"""PerFed-CKT: co-distillation towards the nearest k-means centroid, by hand."""

import numpy as np
import pytest
import torch
from _alg_helpers import algorithm_factory
from _fl_helpers import (
    B,
    W,
    assert_params_close,
    clone,
    make_data,
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
from pflrepro.algorithms.perfedckt import Distill, PerFedCKT, cluster_soft_decisions, nearest
from pflrepro.training import local_training as LT
from pflrepro.training.params import take

SIX = dict(n_train=(4, 2, 3, 5, 4, 3), n_test=(1,) * 6, public=8)


_alg = algorithm_factory(PerFedCKT, sizes=SIX)


def test_one_cluster_no_distillation_is_local_training_of_the_sampled():
    e, alg = _alg({"clusters": 1, "lam": 0.0}, client_fraction=0.5, lr=0.3)
    state = alg.init()
    expected = {"params": [clone(p) for p in state["params"]],
                "opt": [clone(o) for o in state["opt"]]}
    for rnd in (1, 2, 3):
        chosen = e.participants(rnd)
        assert len(chosen) == 3
        for k in chosen:
            expected["params"][k], expected["opt"][k], _ = e.train_client(
                expected["params"][k], expected["opt"][k], k, rnd)
        state, losses = alg.round(state, rnd)
        assert np.isnan(losses[[k for k in range(6) if k not in chosen]]).all()
    for k in range(6):  # the unsampled kept their models, the sampled trained alone
        assert_params_close(state["params"][k], expected["params"][k], atol=0, rtol=0)


def test_kmeans_of_soft_decisions_by_hand():
    a = torch.tensor([[0.9, 0.1], [0.8, 0.2]])
    b = torch.tensor([[0.1, 0.9], [0.3, 0.7]])
    decisions = torch.stack([a, b, a + 0.02 * torch.tensor([[1, -1], [-1, 1]]), b])
    centroids, labels = cluster_soft_decisions(decisions, 2, seed=0)
    assert labels[0] == labels[2] != labels[1] == labels[3]
    first = centroids[labels[0]]
    torch.testing.assert_close(first, (decisions[0] + decisions[2]) / 2)
    torch.testing.assert_close(centroids[labels[1]], b)
    # eq. 4: a client's target is the centroid nearest its own soft decisions
    assert nearest(centroids, torch.tensor([[0.7, 0.3], [0.9, 0.1]])) == labels[0]
    assert nearest(centroids, torch.tensor([[0.2, 0.8], [0.2, 0.8]])) == labels[1]
    with pytest.raises(ValueError, match="need 1 <= clusters <= 4"):
        cluster_soft_decisions(decisions, 5, seed=0)


def _manual_distill_step(p, x_priv, y_priv, x_pub, target, lr, lam):
    """w ← w − lr (∇ mean CE(private) + λ ∇ mean KL(target ‖ softmax(w x))), by hand."""
    _, g = manual_loss_and_grad(p, x_priv, y_priv)
    logits = x_pub.flatten(1) @ p[W].T + p[B]
    residual = (logits.softmax(dim=-1) - target) / len(x_pub)  # ∂ mean KL / ∂ logits
    g_kl = {W: residual.T @ x_pub.flatten(1), B: residual.sum(dim=0)}
    return {n: p[n] - lr * (g[n] + lam * g_kl[n]) for n in p}


def test_second_round_distills_towards_the_nearest_centroid():
    lr, lam = 0.2, 0.7
    e, alg = _alg({"clusters": 2, "lam": lam}, lr=lr, local_steps=2, batch_size=2)
    state, _ = alg.round(alg.init(), 1)  # everyone sampled (C = 1); centroids exist now
    assert bool(state["has_centroids"])
    centroids = state["centroids"].clone()
    before = [clone(p) for p in state["params"]]
    state, _ = alg.round(state, 2)
    for k in range(6):
        p = before[k]
        target = centroids[nearest(centroids, e.probs(p, e.data.public))]
        private = e.minibatches(k, 2, "local", 2)
        public = alg.public_batches(k, 2, 2)
        for idx, rows in zip(private, public, strict=True):
            p = _manual_distill_step(p, e.data.x[idx], e.data.y[idx], e.data.public[rows],
                                     target[rows], lr, lam)
        assert_params_close(state["params"][k], p)


def test_a_first_time_participant_distills_towards_its_nearest_centroid():
    # eq. 4: every sampled client k' picks the centroid closest to its current logits,
    # also one never sampled before (its model is still its own initialisation)
    lr, lam = 0.2, 0.7
    e, alg = _alg({"clusters": 2, "lam": lam}, lr=lr, local_steps=2, batch_size=2,
                  client_fraction=0.5)
    state = alg.init()
    start = [clone(p) for p in state["params"]]
    first = set(e.participants(1))
    state, _ = alg.round(state, 1)
    rnd = next(r for r in range(2, 20) if set(e.participants(r)) - first)
    for r in range(2, rnd):  # rounds whose participants were all in round 1's
        state, _ = alg.round(state, r)
    new = sorted(set(e.participants(rnd)) - first)
    centroids = state["centroids"].clone()
    state, _ = alg.round(state, rnd)
    for k in new:
        p = start[k]  # never trained: still its initial model
        target = centroids[nearest(centroids, e.probs(p, e.data.public))]
        private = e.minibatches(k, rnd, "local", 2)
        public = alg.public_batches(k, rnd, 2)
        for idx, rows in zip(private, public, strict=True):
            p = _manual_distill_step(p, e.data.x[idx], e.data.y[idx], e.data.public[rows],
                                     target[rows], lr, lam)
        assert_params_close(state["params"][k], p)
        plain, _, _ = e.train_client(start[k], e.init_opt(start[k]), k, rnd)
        assert not torch.allclose(state["params"][k][W], plain[W])  # the term acted


def test_round_one_trains_without_the_term():
    # round 1: no centroids; every client trains alone whatever λ is
    e, alg = _alg({"clusters": 2, "lam": 5.0}, lr=0.3)
    state = alg.init()
    start = [clone(p) for p in state["params"]]
    state, _ = alg.round(state, 1)
    for k in range(6):
        ref, _, _ = e.train_client(start[k], e.init_opt(start[k]), k, 1)
        assert_params_close(state["params"][k], ref, atol=0, rtol=0)


def test_traffic_is_soft_decisions_not_parameters():
    e, alg = _alg({"clusters": 2}, client_fraction=0.5)
    numbers = 8 * 2  # |P| x N
    state = alg.init()
    state, _ = alg.round(state, 1)
    chosen = e.participants(1)
    assert e.traffic.up[chosen].tolist() == [numbers] * 3
    assert e.traffic.down.sum() == 0  # no centroids to send before round 1
    e.traffic.up[:] = 0
    alg.round(state, 2)
    chosen = e.participants(2)
    assert e.traffic.down[chosen].tolist() == [2 * numbers] * 3
    assert e.traffic.up[chosen].tolist() == [numbers] * 3


def test_predict_checks_and_settings():
    e, alg = _alg(lr=0.3)
    state, _ = alg.round(alg.init(), 1)
    x = e.data.x[e.data.test[2]]
    torch.testing.assert_close(alg.predict(state, 2, x, 1),
                               e.probs(state["params"][2], x))
    with pytest.raises(ValueError, match="clusters = 4 exceeds the 3 clients sampled"):
        _alg({"clusters": 4}, client_fraction=0.5)[1].init()
    no_public = make_engine(make_data(n_train=(2, 2), n_test=(1, 1)))
    with pytest.raises(ValueError, match="public set"):
        PerFedCKT(no_public, parse_hyper(PerFedCKT, {})).init()
    with pytest.raises(ValueError, match="lam"):
        parse_hyper(PerFedCKT, {"lam": -1.0})


def test_heterogeneous_clients_distill_across_architectures():
    # two architectures: a linear model and a 3-unit MLP; soft decisions are what
    # crosses, so both kinds cluster together and each trains its own model
    archs = [{"model": "mlp", "model_options": {"hidden": []}},
             {"model": "mlp", "model_options": {"hidden": [3]}}]
    e, alg = _alg({"clusters": 2, "lam": 0.5}, architectures=archs,
                  architecture_assignment="uniform", lr=0.2)
    assert e.heterogeneous and set(e.arch_of) == {0, 1}
    state = alg.init()
    for k in range(6):
        assert e.arch_index(state["params"][k]) == e.arch_of[k]
    for rnd in (1, 2):
        state, losses = alg.round(state, rnd)
        assert np.isfinite(losses).all()
    for k in range(6):
        assert e.arch_index(state["params"][k]) == e.arch_of[k]
        assert alg.predict(state, k, e.data.x[e.data.test[k]], 2).shape == (1, 2)


def test_trains_through_the_one_path_per_architecture_and_vmap_equals_loop(monkeypatch):
    """A round is one ``local_training.train`` call per architecture; vmap ≈ loop."""
    from pflrepro.training import local_training as LT

    archs = [{"model": "mlp", "model_options": {"hidden": []}},
             {"model": "mlp", "model_options": {"hidden": [3]}}]
    calls = []
    real = LT.train

    def spy(engine, params, opt_state, clients, *args, **kwargs):
        calls.append((list(clients), kwargs["objective"] is not None, kwargs["path"]))
        return real(engine, params, opt_state, clients, *args, **kwargs)

    monkeypatch.setattr(LT, "train", spy)
    out = {}
    for mode in ("loop", "vmap"):
        e, alg = _alg({"clusters": 2, "lam": 0.5}, architectures=archs,
                      architecture_assignment="uniform", lr=0.2, client_training=mode)
        state = alg.init()
        losses = []
        for rnd in (1, 2):
            state, loss = alg.round(state, rnd)
            losses.append(loss)
        out[mode] = (state, np.stack(losses))
    groups = [[k for k in range(6) if e.arch_of[k] == a] for a in (0, 1)]
    assert all(groups)
    # round 1 without centroids (no objective), round 2 distilling; one call per architecture
    assert calls == [(g, has, mode) for mode in ("loop", "vmap") for has in (False, True)
                     for g in groups]
    (sv, lv), (sl, ll) = out["vmap"], out["loop"]
    np.testing.assert_allclose(lv, ll, rtol=1e-5, atol=1e-6)
    for k in range(6):
        assert_params_close(sv["params"][k], sl["params"][k], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(sv["centroids"], sl["centroids"], rtol=1e-4, atol=1e-5)


# ------------------------------------------------------------ the objective: Distill
def _public_targets(e, clients, seed=1):
    gen = torch.Generator().manual_seed(seed)
    assert e.data.public is not None
    return torch.rand(clients, len(e.data.public), e.data.num_classes,
                      generator=gen).softmax(dim=-1)


@pytest.mark.parametrize("model", sorted(MODELS))
@pytest.mark.parametrize("opt", sorted(OPTIMISERS))
@pytest.mark.parametrize("public_batch", [None, 3])
def test_distill_vmap_equals_loop(model, opt, public_batch):
    e = engine_for(model, opt)
    start = e.client_init()
    clients = list(range(e.num_clients))
    looped = both_paths(e, start["params"], start["opt"],
                        Distill(_public_targets(e, len(clients)), 0.7, batch_size=public_batch,
                                per_client=True))
    both_paths(e, start["params"], start["opt"],
               Distill(_public_targets(e, 1)[0], 0.7, batch_size=public_batch))
    plain = train(e, start["params"], start["opt"], clients, LT.LOOP, None)
    assert any(not torch.allclose(plain[0][n], looped[0][n]) for n in plain[0])


def test_distill_one_step_by_hand():
    # g = ∇ CE(private) + λ ∇ mean_rows(−Σ t log softmax) on the public batch (autograd)
    e = engine_for("mlp", "sgd")
    start = e.client_init()
    k, lam, lr = 2, 0.7, OPTIMISERS["sgd"]["lr"]
    targets = _public_targets(e, 1)[0]
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
        got = train(e, rows_of(start["params"], [k]), rows_of(start["opt"], [k]), [k], path,
                    Distill(targets, lam, batch_size=3), steps=1)
        assert_params_close(take(got[0], 0), {n: w[n] - lr * grads[n] for n in w},
                            atol=1e-6, rtol=1e-5)
        assert got[2][0] == pytest.approx(float(ce.detach()), rel=1e-5)
