"""pflrepro.training.local_training: the vmapped path (all clients in one pass) equals the loop.

Reference: ``Engine.train_client`` once per client (the loop path). Clients hold
different numbers of samples, so their step counts and batch sizes differ and the
vectorised pass pads both; results must match within float32 rounding after two
rounds, for SGD, SGD with momentum and Adam, with and without a proximal term, on a
small MLP and a small CNN.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest
import torch
from _fl_helpers import (
    MODELS,
    OPTIMISERS,
    assert_params_close,
    clone,
    make_data,
    make_engine,
)

from pflrepro.training import local_training as LT
from pflrepro.training.engine import Engine
from pflrepro.training.local_training import padded_minibatches, stream_batches
from pflrepro.training.objective import Stream
from pflrepro.training.params import put, stack, take
from pflrepro.training.terms import Offset, Proximal

RTOL, ATOL = 1e-4, 1e-5
N_TRAIN = (7, 3, 12, 5, 1)  # batch 4: batch sizes 4, 3, 4, 4, 1; steps per epoch 2, 1, 3, 2, 1


def engine_for(model: str, opt: str, seed: int = 3, dtype: torch.dtype = torch.float32,
               **extra: Any) -> Engine:
    spec = MODELS[model]
    data = make_data(n_train=N_TRAIN, n_test=(1,) * len(N_TRAIN), shape=spec["shape"],
                     num_classes=3, seed=seed)
    data = dataclasses.replace(data, x=data.x.to(dtype))
    cfg = {"model": spec["model"], "model_options": spec["model_options"], "batch_size": 4,
           "local_epochs": 2, **OPTIMISERS[opt], **extra}
    return make_engine(data, seed=seed, **cfg)


def vmapped(engine: Engine, params: dict, opt: dict, clients: list[int], rnd: int,
            steps: list[int] | None = None, anchor: dict | None = None, coef: float = 0.0,
            offset: dict | None = None, chunk: int | None = None) -> tuple[dict, dict, np.ndarray]:
    """The vectorised path with a proximal term and/or an offset (shared or stacked)."""
    terms = []
    if anchor is not None:
        per_client = anchor[next(iter(anchor))].dim() == params[next(iter(params))].dim()
        terms.append(Proximal(anchor, coef, per_client=per_client))
    if offset is not None:
        terms.append(Offset(offset, per_client=True))
    return LT.train(engine.context, params, opt, clients, rnd, steps=steps, terms=terms,
                    path=LT.VMAP, chunk=chunk)


def loop(engine: Engine, params: dict, opt: dict, clients: list[int], rnd: int,
         steps: list[int] | None = None, anchor: dict | None = None,
         coef: float = 0.0) -> tuple[dict, dict, np.ndarray]:
    """``Engine.train_client`` client by client on stacked copies (the reference)."""
    params, opt = clone(params), clone(opt)
    losses = np.zeros(len(clients))
    for i, k in enumerate(clients):
        terms = [] if anchor is None else [Proximal(anchor, coef)]
        p, o, losses[i] = engine.train_client(take(params, i), take(opt, i), k,
                                              rnd, steps=None if steps is None else steps[i],
                                              terms=terms)
        put(params, i, p)
        put(opt, i, o)
    return params, opt, losses


def assert_same(batched: tuple, looped: tuple, rtol: float = RTOL, atol: float = ATOL) -> None:
    assert_params_close(batched[0], looped[0], atol=atol, rtol=rtol)
    assert_params_close(batched[1], looped[1], atol=atol, rtol=rtol)
    np.testing.assert_allclose(np.asarray(batched[2]), looped[2], rtol=rtol, atol=atol)


@pytest.mark.parametrize("model", sorted(MODELS))
@pytest.mark.parametrize("opt", sorted(OPTIMISERS))
@pytest.mark.parametrize("prox", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_vmap_equals_loop_over_two_rounds(model: str, opt: str, prox: bool,
                                             dtype: torch.dtype) -> None:
    """float32 within rounding; float64 to 1e-10 (the same arithmetic, reordered sums).

    In float32 a ReLU input or max-pool pair within rounding of a tie can fall the
    other way in the grouped and the single-client convolution, which changes a step's
    gradient by far more than rounding; float64 shows the computation itself is exact.
    """
    e = engine_for(model, opt, dtype=dtype)
    clients = list(range(e.num_clients))
    steps = [e.steps_per_round(k) for k in clients]
    assert len(set(steps)) == 3  # 4, 2, 6, 4, 2: steps differ
    start = e.client_init()
    start = {"params": {k: v.to(dtype) for k, v in start["params"].items()},
             "opt": {k: v if k == "step" else v.to(dtype) for k, v in start["opt"].items()}}
    anchor = e.init_params() if prox else None
    if anchor is not None:
        anchor = {k: v.to(dtype) for k, v in anchor.items()}
    tol = {"rtol": RTOL, "atol": ATOL} if dtype == torch.float32 else {"rtol": 1e-10,
                                                                        "atol": 1e-12}
    coef = 0.5 if prox else 0.0
    b_params, b_opt = start["params"], start["opt"]
    l_params, l_opt = clone(start["params"]), clone(start["opt"])
    moved = 0.0
    for rnd in (1, 2):
        b_params, b_opt, b_loss = vmapped(e, b_params, b_opt, clients, rnd,
                                                      anchor=anchor, coef=coef)
        l_params, l_opt, l_loss = loop(e, l_params, l_opt, clients, rnd, anchor=anchor,
                                       coef=coef)
        assert_same((b_params, b_opt, b_loss), (l_params, l_opt, l_loss), **tol)
        moved = max(moved, *(float((b_params[k] - start["params"][k]).abs().max())
                             for k in b_params))
    assert moved > 1e-3  # training did something the comparison can see
    assert torch.equal(b_opt["step"], torch.tensor([2.0 * s for s in steps],
                                                   dtype=torch.float64))


@pytest.mark.parametrize("opt", sorted(OPTIMISERS))
def test_proximal_term_matters(opt: str) -> None:
    """The proximal comparison above could pass if the term were ignored on both sides."""
    e = engine_for("mlp", opt)
    clients = list(range(e.num_clients))
    start = e.client_init()
    anchor = e.init_params()
    plain = vmapped(e, start["params"], start["opt"], clients, 1)
    prox = vmapped(e, start["params"], start["opt"], clients, 1, anchor=anchor,
                               coef=0.5)
    assert max(float((plain[0][k] - prox[0][k]).abs().max()) for k in plain[0]) > 1e-3


def test_shared_anchor_equals_stacked_anchor() -> None:
    e = engine_for("mlp", "momentum")
    clients = list(range(e.num_clients))
    start = e.client_init()
    anchor = e.init_params()
    shared = vmapped(e, start["params"], start["opt"], clients, 1, anchor=anchor,
                                 coef=0.3)
    stacked = vmapped(e, start["params"], start["opt"], clients, 1,
                                  anchor=stack(anchor, len(clients)), coef=0.3)
    for a, b in zip(shared[:2], stacked[:2], strict=True):
        for k in a:
            assert torch.equal(a[k], b[k])


@pytest.mark.parametrize("opt", ["sgd", "adam"])
def test_offset_equals_per_client_offset_in_the_loop(opt: str) -> None:
    """A per-client constant added to every gradient (SCAFFOLD's ``c - c_i``)."""
    e = engine_for("cnn", opt)
    clients = [3, 0, 4]
    start = e.client_init()
    params = {k: v[clients] for k, v in start["params"].items()}
    opt_state = {k: v[clients] for k, v in start["opt"].items()}
    gen = torch.Generator().manual_seed(5)
    offset = {k: 0.05 * torch.randn(v.shape, generator=gen) for k, v in params.items()}
    batched = vmapped(e, params, opt_state, clients, 2, offset=offset)
    looped = (clone(params), clone(opt_state), np.zeros(len(clients)))
    for i, k in enumerate(clients):
        p, o, looped[2][i] = e.train_client(take(params, i), take(opt_state, i), k, 2,
                                            terms=[Offset(take(offset, i))])
        put(looped[0], i, p)
        put(looped[1], i, o)
    assert_same(batched, looped)
    plain = vmapped(e, params, opt_state, clients, 2)
    assert max(float((plain[0][k] - batched[0][k]).abs().max()) for k in plain[0]) > 1e-3


@pytest.mark.parametrize("opt", sorted(OPTIMISERS))
def test_short_last_batch_and_explicit_steps(opt: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches of uneven length (a short last batch): the padded loss is the real mean."""
    e = engine_for("cnn", opt)
    original = e.context.minibatches

    def uneven(client: int, rnd: int, purpose: str, steps: int,
               pool: torch.Tensor | None = None, batch_size: int | None = None
               ) -> list[torch.Tensor]:
        out = original(client, rnd, purpose, steps, pool, batch_size)
        if out and len(out[-1]) > 1:
            out[-1] = out[-1][: len(out[-1]) - 1 - client % 2]
        return out

    monkeypatch.setattr(e.context, "minibatches", uneven)
    clients = [4, 2, 0, 3]
    steps = [1, 5, 3, 2]
    lens = [len(b) for b in e.minibatches(2, 1, "local", 5)]
    assert lens[-1] < lens[0]  # the pass really pads
    start = e.client_init()
    params = {k: v[clients] for k, v in start["params"].items()}
    opt_state = {k: v[clients] for k, v in start["opt"].items()}
    batched = vmapped(e, params, opt_state, clients, 1, steps=steps)
    looped = loop(e, params, opt_state, clients, 1, steps=steps)
    assert_same(batched, looped)


@pytest.mark.parametrize("opt", sorted(OPTIMISERS))
def test_masked_steps_leave_params_and_state_untouched(opt: str) -> None:
    """A client with 0 steps beside clients with 4 and 6 keeps everything bit for bit."""
    e = engine_for("mlp", opt)
    start = e.client_init()
    # give the state something to lose: one round of real training first
    params, opt_state, _ = vmapped(e, start["params"], start["opt"],
                                               list(range(e.num_clients)), 1)
    clients = [0, 1, 2]
    sub_p = {k: v[clients].clone() for k, v in params.items()}
    sub_o = {k: v[clients].clone() for k, v in opt_state.items()}
    new_p, new_o, loss = vmapped(e, sub_p, sub_o, clients, 2, steps=[4, 0, 6])
    for k in new_p:
        assert torch.equal(new_p[k][1], sub_p[k][1])
        assert not torch.equal(new_p[k][0], sub_p[k][0])
    for k in new_o:
        assert torch.equal(new_o[k][1], sub_o[k][1]), k
    assert float(loss[1]) == 0.0
    assert new_o["step"].tolist() == [float(sub_o["step"][0]) + 4, float(sub_o["step"][1]),
                                      float(sub_o["step"][2]) + 6]
    # client 0 ran 4 real steps and 2 masked ones: same as 4 steps alone in the loop
    looped = loop(e, sub_p, sub_o, clients, 2, steps=[4, 0, 6])
    assert_same((new_p, new_o, loss), looped)


def test_inputs_not_modified_and_deterministic() -> None:
    e = engine_for("cnn", "adam")
    start = e.client_init()
    before = clone(start)
    clients = list(range(e.num_clients))
    first = vmapped(e, start["params"], start["opt"], clients, 3)
    second = vmapped(e, start["params"], start["opt"], clients, 3)
    for a, b in zip(first[:2], second[:2], strict=True):
        for k in a:
            assert torch.equal(a[k], b[k])
    assert np.array_equal(first[2], second[2])
    for part in ("params", "opt"):
        for k in start[part]:
            assert torch.equal(start[part][k], before[part][k])
    other_round = vmapped(e, start["params"], start["opt"], clients, 4)
    assert not torch.equal(first[0]["features.0.weight"], other_round[0]["features.0.weight"])


def test_chunks_equal_one_pass() -> None:
    e = engine_for("cnn", "momentum")
    start = e.client_init()
    clients = list(range(e.num_clients))
    whole = vmapped(e, start["params"], start["opt"], clients, 1)
    chunked = vmapped(e, start["params"], start["opt"], clients, 1, chunk=2)
    assert_same(chunked, whole)


def test_auto_chunks_fit_the_device(monkeypatch: pytest.MonkeyPatch,
                                    caplog: pytest.LogCaptureFixture) -> None:
    """No ``chunk`` and a device reporting little free memory: passes that fit it.

    The CPU reports no limit (one pass); a device of room for two clients
    (``memory.SAFETY`` of the free bytes) gets passes of two, logged, and the same
    result as one pass.
    """
    from pflrepro.training import memory

    e = engine_for("cnn", "momentum")
    start = e.client_init()
    clients = list(range(e.num_clients))
    passes: list[int] = []
    original = LT._train_chunk

    def counted(engine: Engine, params: dict, *args: Any, **kwargs: Any) -> Any:
        passes.append(next(iter(params.values())).shape[0])
        return original(engine, params, *args, **kwargs)

    monkeypatch.setattr(LT, "_train_chunk", counted)
    whole = vmapped(e, start["params"], start["opt"], clients, 1)
    assert passes == [len(clients)]
    need = memory.client_memory(e.model, e.in_shape, e.cfg.batch_size, "sgd", 0.9)
    room = int(2.5 * need.per_client / memory.SAFETY)
    monkeypatch.setattr(memory, "device_free_bytes", lambda device: room)
    passes.clear()
    with caplog.at_level("INFO", logger=LT.__name__):
        chunked = vmapped(e, start["params"], start["opt"], clients, 1)
    assert passes == [2, 2, 1]
    assert "passes of 2 clients" in caplog.text
    assert_same(chunked, whole)
    passes.clear()
    vmapped(e, start["params"], start["opt"], clients, 1, chunk=4)  # a given chunk rules
    assert passes == [4, 1]


def test_padded_minibatches_layout() -> None:
    e = engine_for("mlp", "sgd")
    clients = [1, 2]
    index, mask, count, active = padded_minibatches(e.context, clients, 1, "local", [2, 6])
    assert index.shape == (2, 6, 4) and mask.shape == (2, 6, 4)
    assert active.tolist() == [[True, True] + [False] * 4, [True] * 6]
    for i, (k, n) in enumerate(zip(clients, [2, 6], strict=True)):
        for s, idx in enumerate(e.minibatches(k, 1, "local", n)):
            assert torch.equal(index[i, s, : len(idx)], idx)
            assert float(mask[i, s].sum()) == len(idx) == float(count[i, s])
    assert float(mask[0, 2:].sum()) == 0.0  # client 1 (3 samples): batch 3, then padding
    assert float(mask[0, :2, 3].sum()) == 0.0


def test_stream_batches_own_other_client_and_whole() -> None:
    """A stream naming a client is that client's own draw; whole: its rows in stored order."""
    e = engine_for("mlp", "sgd")
    pool = e.data.train[2][:5]
    same = [torch.equal(a, b) for a, b in zip(
        stream_batches(e.context, 0, 1, Stream("p", client=2), 3, pool),
        e.minibatches(2, 1, "p", 3), strict=True)]
    assert same == [True] * 3  # client 2's 12 rows (not the pool), seeded by client 2
    assert [len(b) for b in stream_batches(e.context, 0, 1, Stream("p", client=1), 2)] == [3, 3]
    own = stream_batches(e.context, 2, 1, Stream("p"), 3, pool)  # the trained client's pool
    assert all(torch.equal(a, b) for a, b in zip(own, e.minibatches(2, 1, "p", 3, pool),
                                                  strict=True))
    whole = stream_batches(e.context, 0, 1, Stream("w", client=3, whole=True), 2)
    assert len(whole) == 2 and all(torch.equal(b, e.data.train[3]) for b in whole)
    assert [b.tolist() for b in stream_batches(e.context, 2, 1, Stream("w", whole=True), 1, pool)] \
        == [pool.tolist()]


def test_argument_checks() -> None:
    e = engine_for("mlp", "sgd")
    start = e.client_init()
    with pytest.raises(ValueError, match="leading size"):
        vmapped(e, start["params"], start["opt"], [0, 1], 1)
    with pytest.raises(ValueError, match="entries"):
        vmapped(e, start["params"], start["opt"], list(range(5)), 1, steps=[1, 2])


# ------------------------------------------------------------ wiring into the algorithms
MULTI_CLIENT = [("fedavg", {}, "adam", "global"), ("fedprox", {"mu": 0.5}, "adam", "global"),
           ("local", {}, "adam", "params"), ("scaffold", {}, "sgd", "global"),
           ("fedamp", {}, "adam", "params"), ("heurfedamp", {}, "adam", "params"),
           ("clustered_fl", {"eps1": 10.0, "eps2": 0.0, "warmup_rounds": 0}, "adam",
            "models"), ("apfl", {"alpha_lr": 0.5}, "adam", "personal"),
           ("fedem", {"components": 2}, "adam", "components"),
           ("per_fedavg", {"alpha": 0.2}, "adam", "global"),
           ("federico", {"neighbors": 2}, "adam", "params"),
           ("federico", {"neighbors": 2, "mstep": "step"}, "sgd", "params"),
           ("federico", {"neighbors": 1, "mstep": "full", "table_start": "uniform"}, "adam",
            "params")]


@pytest.mark.parametrize("name,params,opt,key", MULTI_CLIENT)
def test_algorithms_train_all_clients_in_one_pass_when_asked(name, params, opt, key,
                                                             monkeypatch):
    """client_training='vmap' gives the loop's rounds (to rounding); 'auto' on CPU loops."""
    from pflrepro.algorithms import get_algorithm
    from pflrepro.algorithms.base import parse_hyper

    cls = get_algorithm(name)
    passes = []  # the method really trains through the vectorised path when asked
    real_vmap = LT.train_vmap

    def spy(*args, **kwargs):
        passes.append(len(args[3]))
        return real_vmap(*args, **kwargs)

    monkeypatch.setattr(LT, "train_vmap", spy)
    states = {}
    for mode in ("loop", "vmap", "auto"):
        passes.clear()
        e = make_engine(optimizer=opt, lr=0.05, client_training=mode)
        assert e.client_training == ("vmap" if mode == "vmap" else "loop")
        alg = cls(e, parse_hyper(cls, params))
        state = alg.init()
        losses = []
        for rnd in (1, 2):
            state, loss = alg.round(state, rnd)
            losses.append(loss)
        assert (len(passes) > 0) == (mode == "vmap")
        if mode == "vmap":  # all clients in one pass
            assert max(passes) == e.num_clients
        states[mode] = (state, np.stack(losses))
    for mode in ("vmap", "auto"):
        state, losses = states[mode]
        ref_state, ref_losses = states["loop"]
        for n in ref_state[key]:
            if mode == "auto":  # the loop itself
                assert torch.equal(state[key][n], ref_state[key][n])
            torch.testing.assert_close(state[key][n], ref_state[key][n], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(losses, ref_losses, rtol=1e-5, atol=1e-6)
        for extra in ("opt", "control", "client_control", "cluster", "xi", "personal_opt",
                      "alpha", "pi"):
            if extra not in ref_state:
                continue
            a, b = state[extra], ref_state[extra]
            if isinstance(a, dict):
                for n in b:
                    torch.testing.assert_close(a[n], b[n], rtol=1e-5, atol=1e-6,
                                               equal_nan=True)
            else:
                torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, equal_nan=True)
    moved = states["vmap"][0][key]
    start = cls(make_engine(optimizer=opt), parse_hyper(cls, params)).init()[key]
    assert any(not torch.allclose(moved[n], start[n]) for n in start)


def test_bad_client_training_settings_are_rejected():
    from pflrepro.training.settings import TrainingConfig

    with pytest.raises(ValueError, match="client_training"):
        TrainingConfig(rounds=1, client_training="gpu")
    with pytest.raises(ValueError, match="client_chunk"):
        TrainingConfig(rounds=1, client_chunk=-1)


@pytest.mark.parametrize("opt", ["sgd", "adam"])
def test_pools_replace_the_training_sets_on_both_paths(opt: str) -> None:
    """A client trained on a pool (FedFomo: all but its validation part) sees only it."""
    e = engine_for("mlp", opt)
    clients = [0, 2, 3]
    pools = [e.data.train[k][: max(1, len(e.data.train[k]) - 2)] for k in clients]
    start = e.client_init()
    params = {k: v[clients] for k, v in start["params"].items()}
    opt_state = {k: v[clients] for k, v in start["opt"].items()}
    looped = LT.train(e.context, params, opt_state, clients, 1, pools=pools, path=LT.LOOP)
    vectorised = LT.train(e.context, params, opt_state, clients, 1, pools=pools, path=LT.VMAP)
    assert_same(vectorised, looped)
    for i, k in enumerate(clients):
        steps = e.steps_per_round(k, samples=len(pools[i]))
        batches = e.minibatches(k, 1, "local", steps, pools[i])
        assert set(torch.cat(batches).tolist()) <= set(pools[i].tolist())
        ref = e.train_client(take(params, i), take(opt_state, i), k, 1, pool=pools[i])
        assert_params_close(take(looped[0], i), ref[0], atol=0, rtol=0)
    whole = LT.train(e.context, params, opt_state, clients, 1, path=LT.LOOP)
    assert not torch.equal(whole[0]["net.1.weight"], looped[0]["net.1.weight"])
