"""pflrepro.algorithms.fedmix_experts: FedMix's objective (experts and gate trained jointly)
on both paths, by hand, and the joint parameter dict."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _fl_helpers import assert_params_close
from _objective_helpers import MODELS, OPTIMISERS, both_paths, engine_for, rows_of, train

from pflrepro.algorithms.fedmix_experts import (
    EXPERT_LOSS_KEY,
    GatedExperts,
    gate_logits,
    init_gate,
    join_experts,
    split_experts,
)
from pflrepro.training import local_training as LT
from pflrepro.training.params import stack, take

#: q(z | y) of the 3 classes over 2 experts: class 0 gives expert 1 no weight (it skips
#: batches of class 0 only), class 2 gives expert 0 all of it (weights all 1).
Q = [[1.0, 0.0], [0.3, 0.7], [1.0, 0.0]]


def _gated_start(e, gate=True, seed=2):
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


def _gated(e, marginal=False, one_hot=False):
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
def test_gated_experts_vmap_equals_loop(model, opt, kind):
    e = engine_for(model, opt)
    params, state = _gated_start(e, gate=kind != "one_hot")
    objective = _gated(e, marginal=kind != "bound", one_hot=kind == "one_hot")
    looped = both_paths(e, params, state, objective)  # with the running losses
    running = looped[1][EXPERT_LOSS_KEY]
    assert bool((running[1, 0] == 0) & (running[:, 1] > 0).any())  # client 1 kept expert 0
    # a client's reported loss is the sum of its experts' running losses over its steps
    steps = np.array([e.steps_per_round(k) for k in range(e.num_clients)])
    np.testing.assert_allclose(looped[2], running.sum(1).numpy() / steps, rtol=1e-12)
    if opt == "sgd":  # a zero gradient leaves an expert exactly where it was
        vectorised = train(e, params, state, list(range(e.num_clients)), LT.VMAP, objective)
        for result in (looped, vectorised):
            experts, _ = split_experts(take(result[0], 1), 2)
            start, _ = split_experts(take(params, 1), 2)
            assert all(torch.equal(experts[0][n], start[0][n]) for n in start[0])


def test_gated_experts_one_sgd_step_by_hand():
    # expert k: w − lr ∇ Σ_i r_ik ℓ_ik / n with r = q(· | y); the gate: θ − lr ∇ of the
    # mean cross-entropy of softmax(gate(x)) against r; loss Σ_k of the experts' losses
    e = engine_for("mlp", "sgd")
    params, state = _gated_start(e)
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
        got = train(e, rows_of(params, [k]), rows_of(state, [k]), [k], path,
                    _gated(e).rows(k, k + 1), steps=1)
        assert_params_close(take(got[0], 0), want, atol=1e-6, rtol=1e-5)
        assert got[2][0] == pytest.approx(loss, rel=1e-5)


def test_expert_dicts_round_trip():
    a, b, g = {"w": torch.ones(2)}, {"w": torch.zeros(2)}, {"w2": torch.full((1,), 3.0)}
    joint = join_experts([a, b], g)
    assert list(joint) == ["expert0.w", "expert1.w", "gate.w2"]
    experts, gate = split_experts(joint, 2)
    assert experts == [a, b] and gate == g
    assert split_experts(join_experts([a], {}), 1) == ([a], {})


def test_gate_logits_and_init_by_hand():
    # a linear gate: logits = x W2^T + b2; the hidden layer's ReLU cuts negative units
    x = torch.tensor([[[[1.0, 2.0]]]])
    linear = {"w2": torch.tensor([[1.0, 1.0], [0.0, -1.0]]), "b2": torch.tensor([0.5, 0.0])}
    assert gate_logits(linear, x).tolist() == [[3.5, -2.0]]
    hidden = {"w1": torch.tensor([[1.0, 0.0], [0.0, -1.0]]), "b1": torch.zeros(2),
              "w2": torch.eye(2), "b2": torch.zeros(2)}
    assert gate_logits(hidden, x).tolist() == [[1.0, 0.0]]
    gate = init_gate(4, 3, 2, torch.Generator().manual_seed(0))
    assert {n: tuple(v.shape) for n, v in gate.items()} == {
        "w1": (3, 4), "b1": (3,), "w2": (2, 3), "b2": (2,)}
    assert float(gate["w1"].abs().max()) <= 0.5 and float(gate["w2"].abs().max()) <= 3 ** -0.5
    assert set(init_gate(4, 0, 2, torch.Generator().manual_seed(0))) == {"w2", "b2"}
