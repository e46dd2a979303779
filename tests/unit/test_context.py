"""pflrepro.training.context: what a local step needs, built by the engine, no engine in it."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from _fl_helpers import make_data, make_engine

from pflrepro.training.context import StepContext


def test_the_engine_builds_one_context_and_hands_its_lookups_down() -> None:
    e = make_engine(make_data(n_train=(5, 3, 4)), seed=7, batch_size=2, local_epochs=3)
    ctx = e.context
    assert isinstance(ctx, StepContext)
    assert ctx.data is e.data and ctx.threads is e.threads and ctx.optimizer is e.optimizer
    assert ctx.models == e.models and ctx.seed == 7 and ctx.device == e.device
    # the engine's batches, step counts and gradients are the context's
    assert [b.tolist() for b in e.minibatches(1, 2, "x", 4)] == \
        [b.tolist() for b in ctx.minibatches(1, 2, "x", 4)]
    assert e.steps_per_round(0) == ctx.steps_per_round(0) == 3 * 3  # 3 epochs of ⌈5/2⌉
    assert ctx.steps_per_round(0, epochs=1, samples=3) == 2
    params = e.init_params()
    idx = e.data.train[0]
    loss, grads = ctx.loss_and_grad(params, idx)
    assert (loss, set(grads)) == (e.loss_and_grad(params, idx)[0], set(params))
    assert ctx.net_for(params) is e.net_for(params)


def test_minibatches_depend_on_seed_round_client_and_purpose_only() -> None:
    data = make_data(n_train=(6, 6), n_test=(1, 1))
    a = make_engine(data, seed=3, batch_size=4).context
    b = make_engine(data, seed=3, batch_size=4).context
    first = [x.tolist() for x in a.minibatches(0, 1, "local", 3)]
    assert first == [x.tolist() for x in b.minibatches(0, 1, "local", 3)]
    # an epoch sees every sample once: 6 samples, batches of 4, then the next permutation
    assert [len(x) for x in first] == [4, 4, 4]
    assert sorted(first[0] + first[1][:2]) == sorted(data.train[0].tolist())
    for other in ((0, 2, "local"), (1, 1, "local"), (0, 1, "other")):
        assert [x.tolist() for x in a.minibatches(other[0], other[1], other[2], 3)] != first
    pool = torch.tensor([10, 11, 12])
    rows = a.minibatches(0, 1, "p", 2, pool=pool, batch_size=5)  # capped by the pool
    assert [sorted(r.tolist()) for r in rows] == [[10, 11, 12]] * 2
    assert a.minibatches(0, 1, "local", 0) == []


def test_weighted_loss_by_hand() -> None:
    # Σ_s weight_s ℓ_s: with weights 1/n it is the mean loss
    e = make_engine()
    params = e.init_params()
    idx = e.data.train[0]
    mean, g = e.context.loss_and_grad(params, idx)
    weighted, gw = e.context.loss_and_grad(params, idx, torch.full((len(idx),), 1 / len(idx)))
    assert weighted == pytest.approx(mean, rel=1e-6)
    for n in g:
        torch.testing.assert_close(gw[n], g[n])


def test_replacing_the_engines_data_reaches_local_training() -> None:
    # one copy of the data: what the engine holds is what a local step reads
    e = make_engine(make_data(n_train=(4, 2), n_test=(1, 1)), lr=0.1)
    start = e.init_params()
    doubled = dataclasses.replace(e.data, x=2 * e.data.x)
    before = e.train_client(start, e.init_opt(start), 0, 1)[0]
    e.data = doubled
    assert e.context.data is doubled and e.data is doubled
    after = e.train_client(start, e.init_opt(start), 0, 1)[0]
    assert any(not torch.equal(before[n], after[n]) for n in start)
