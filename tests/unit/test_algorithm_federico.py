"""FedeRiCo: ε-greedy neighbours, EMA/accumulative loss tracking, weighted M-step,
mixture prediction and the logged weights, on tiny linear-model engines."""

import math

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
    assert_same,
    both_paths,
    engine_for,
    rows_of,
    train,
)

from pflrepro.algorithms.base import parse_hyper
from pflrepro.algorithms.federico import FedeRiCo, FedeRiCoHyper, PeerWeighted
from pflrepro.algorithms.local import Local
from pflrepro.data.federated import FederatedData
from pflrepro.store import results as R
from pflrepro.training import local_training as LT
from pflrepro.training.objective import Stream
from pflrepro.training.params import take

SIZES4 = dict(n_train=(4, 2, 3, 3), n_test=(1, 1, 1, 1))
#: Per-sample mean losses and an epoch of M-steps (the defaults), spelt out.
FORMER = {"estep_loss": "mean", "mstep": "epoch"}
#: The former defaults (eq. 3's summed loss, one mini-batch M-step per round).
LITERAL = {"estep_loss": "sum", "mstep": "step"}


# Engine and FedeRiCo; without warm-up unless ``params`` set one (the table then
# starts before round 1, the setting most tests below check by hand).
_alg = algorithm_factory(FedeRiCo, sizes=SIZES4, defaults={"warmup_rounds": 0})


def _distinct_weights(k, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return torch.softmax(torch.randn(k, k, generator=gen, dtype=torch.float64), dim=1)


def _mean_losses(e, params, pairs):
    """ℓ_ij = engine.mean_loss(φ_j, client i) for the (i, j) in pairs."""
    return {(i, j): e.mean_loss(take(params, j), i, "train") for i, j in pairs}


def _six():
    return make_data(n_train=(2,) * 6, n_test=(1,) * 6)


# ---------------------------------------------------------------------- neighbours


@pytest.mark.parametrize("m", [0, 1, 3, 5, 9])
@pytest.mark.parametrize("eps", [0.0, 0.3, 1.0])
def test_neighbours_shape(m, eps):
    _, alg = _alg({"neighbors": m, "epsilon": eps}, data=_six())
    weights = _distinct_weights(6)
    for rnd in range(1, 11):
        chosen = alg.neighbours(weights, rnd)
        assert len(chosen) == 6
        for i, js in enumerate(chosen):
            assert i not in js
            assert len(js) == min(m, 5) == len(set(js))
            assert js == sorted(js) and all(0 <= j < 6 for j in js)


@pytest.mark.parametrize("m", [1, 2, 4])
def test_greedy_picks_top_weights(m):
    _, alg = _alg({"neighbors": m, "epsilon": 0.0}, data=_six())
    weights = _distinct_weights(6, seed=3)
    weights[2, 2] = 10.0  # a large self weight must not be chosen
    for rnd in (1, 2, 7):
        for i, js in enumerate(alg.neighbours(weights, rnd)):
            others = [j for j in range(6) if j != i]
            top = sorted(others, key=lambda j: -float(weights[i, j]))[:m]
            assert js == sorted(top)


def test_greedy_by_hand():
    # row 0: others 1, 2 with weights 0.5 > 0.3 -> M = 1 picks 1; row 1: 0.6 (j=2) > 0.1
    _, alg = _alg({"neighbors": 1, "epsilon": 0.0}, data=make_data((2, 2, 2), (1, 1, 1)))
    weights = torch.tensor([[0.2, 0.5, 0.3], [0.1, 0.3, 0.6], [0.45, 0.35, 0.2]],
                           dtype=torch.float64)
    assert alg.neighbours(weights, 1) == [[1], [2], [0]]


def test_uniform_sampling_reaches_everyone():
    # ε = 1, M = 1: over 200 rounds every client picks every other client at least once,
    # even though the weights would make greedy always pick the same one
    _, alg = _alg({"neighbors": 1, "epsilon": 1.0}, data=_six())
    weights = _distinct_weights(6)
    picked = [set() for _ in range(6)]
    for rnd in range(1, 201):
        for i, js in enumerate(alg.neighbours(weights, rnd)):
            picked[i].update(js)
    assert all(picked[i] == set(range(6)) - {i} for i in range(6))
    _, greedy = _alg({"neighbors": 1, "epsilon": 0.0}, data=_six())
    first = greedy.neighbours(weights, 1)
    assert all(greedy.neighbours(weights, r) == first for r in range(2, 30))


def test_greedy_breaks_ties_at_random():
    _, alg = _alg({"neighbors": 1, "epsilon": 0.0}, data=_six())
    uniform = torch.full((6, 6), 1 / 6, dtype=torch.float64)
    picked = set()
    for rnd in range(1, 101):
        picked.update(alg.neighbours(uniform, rnd)[0])
    assert picked == {1, 2, 3, 4, 5}


def test_neighbours_deterministic_per_seed_and_round():
    data = _six()
    weights = _distinct_weights(6)
    hp = {"neighbors": 2, "epsilon": 0.5}
    _, a = _alg(hp, data=data, seed=1)
    _, b = _alg(hp, data=data, seed=1)
    _, c = _alg(hp, data=data, seed=2)
    np.random.seed(0)
    runs_a = [a.neighbours(weights, r) for r in range(1, 31)]
    np.random.seed(1)  # the global NumPy state plays no part
    assert runs_a == [b.neighbours(weights, r) for r in range(1, 31)]
    assert runs_a != [c.neighbours(weights, r) for r in range(1, 31)]
    assert len({str(x) for x in runs_a}) > 1  # varies with the round


# ---------------------------------------------------------------------- init / E-step


def test_init_table_is_all_to_all_summed_losses():
    # eq. 3: ℓ_ij = Σ_{s ∈ D_i} ℓ(φ_j; x_s, y_s) = n_i · mean loss
    e, alg = _alg({"estep_loss": "sum"})
    state = alg.init()
    expected = _mean_losses(e, state["params"], [(i, j) for i in range(4) for j in range(4)])
    for (i, j), value in expected.items():
        n_i = SIZES4["n_train"][i]
        assert float(state["table"][i, j]) == pytest.approx(n_i * value, rel=1e-6)
    torch.testing.assert_close(state["weights"], torch.softmax(-state["table"], dim=1))


def test_summed_loss_sharpens_the_weights():
    # the same models give far sharper weights with the summed loss than with the mean
    _, summed = _alg({"estep_loss": "sum"})
    _, mean = _alg(FORMER)
    ws, wm = summed.init()["weights"], mean.init()["weights"]
    assert float(ws.max(1).values.mean()) > float(wm.max(1).values.mean())


def test_init_table_is_all_to_all_losses():
    e, alg = _alg(FORMER)
    state = alg.init()
    for k in range(4):
        assert_params_close(take(state["params"], k), e.init_params(k), atol=0, rtol=0)
    expected = _mean_losses(e, state["params"], [(i, j) for i in range(4) for j in range(4)])
    for (i, j), value in expected.items():
        assert float(state["table"][i, j]) == pytest.approx(value, rel=1e-6)
    assert torch.equal(state["last"], state["table"])
    torch.testing.assert_close(state["weights"], torch.softmax(-state["table"], dim=1))
    torch.testing.assert_close(state["weights"].sum(1), torch.ones(4, dtype=torch.float64))


def test_weights_softmax_by_hand():
    # β = 0 keeps the table: row [0, ln 2, ln 4] -> softmax(-row) = [1, 1/2, 1/4] / 1.75
    #                                            = [4/7, 2/7, 1/7]
    _, alg = _alg({"beta": 0.0, "neighbors": 2}, data=make_data((2, 2, 2), (1, 1, 1)))
    state = alg.init()
    ln2, ln4 = math.log(2), math.log(4)
    state["table"] = torch.tensor([[0.0, ln2, ln4], [ln4, 0.0, ln4], [1.0, 1.0, 1.0]],
                                  dtype=torch.float64)
    state, _ = alg.round(state, 1)
    expected = torch.tensor([[4 / 7, 2 / 7, 1 / 7], [1 / 6, 4 / 6, 1 / 6], [1 / 3] * 3],
                            dtype=torch.float64)
    torch.testing.assert_close(state["weights"], expected)


def test_ema_updates_refreshed_entries_only():
    # K = 4, M = 1: each row refreshes 2 entries (itself and one neighbour), keeps 2
    beta = 0.6
    e, alg = _alg({"neighbors": 1, "beta": beta, "epsilon": 0.3, **FORMER}, lr=0.5)
    state, _ = alg.round(alg.init(), 1)
    params1, table1, last1 = clone(state["params"]), state["table"].clone(), state["last"]
    last1 = last1.clone()
    nbrs = alg.neighbours(state["weights"], 2)
    used = [sorted([i, *nbrs[i]]) for i in range(4)]
    state, _ = alg.round(state, 2)
    fresh = _mean_losses(e, params1, [(i, j) for i in range(4) for j in used[i]])
    expected, last = table1.clone(), last1.clone()
    for (i, j), loss in fresh.items():
        # L <- (1 - β) L + β ℓ = 0.4 L + 0.6 ℓ
        expected[i, j] = (1 - beta) * table1[i, j] + beta * loss
        last[i, j] = loss
    torch.testing.assert_close(state["table"], expected)
    torch.testing.assert_close(state["last"], last)
    torch.testing.assert_close(state["weights"], torch.softmax(-expected, dim=1))
    for i in range(4):
        for j in range(4):
            if j in used[i]:
                assert float(state["table"][i, j]) != float(table1[i, j])  # really moved
            else:
                assert float(state["table"][i, j]) == float(table1[i, j])


def test_first_round_refresh_keeps_values():
    # before any M-step the refreshed losses equal the initial all-to-all ones
    _, alg = _alg({"neighbors": 2})
    state = alg.init()
    table0 = state["table"].clone()
    state, _ = alg.round(state, 1)
    torch.testing.assert_close(state["table"], table0)


def test_beta_one_replaces_refreshed_entries():
    # M = K - 1: every entry refreshed
    e, alg = _alg({"neighbors": 3, "beta": 1.0, **FORMER}, lr=0.5)
    state, _ = alg.round(alg.init(), 1)
    params1 = clone(state["params"])
    state, _ = alg.round(state, 2)
    fresh = _mean_losses(e, params1, [(i, j) for i in range(4) for j in range(4)])
    for (i, j), loss in fresh.items():
        assert float(state["table"][i, j]) == pytest.approx(loss, rel=1e-6)


def test_accumulative_adds_latest_known_losses():
    e, alg = _alg({"neighbors": 1, "loss_tracking": "accumulative", **FORMER}, lr=0.5)
    state = alg.init()
    table0 = state["table"].clone()
    state, _ = alg.round(state, 1)
    # round 1 refreshes with unchanged models: last = table0, table = 2 table0
    torch.testing.assert_close(state["table"], 2 * table0)
    params1, table1, last1 = clone(state["params"]), state["table"].clone(), state["last"].clone()
    nbrs = alg.neighbours(state["weights"], 2)
    state, _ = alg.round(state, 2)
    last = last1.clone()
    for i in range(4):
        for j in [i, *nbrs[i]]:
            last[i, j] = e.mean_loss(take(params1, j), i, "train")
    torch.testing.assert_close(state["last"], last)
    torch.testing.assert_close(state["table"], table1 + last)
    torch.testing.assert_close(state["weights"], torch.softmax(-(table1 + last), dim=1))


# ---------------------------------------------------------------------- M-step


@pytest.mark.parametrize("variant", [{}, LITERAL, {"mstep": "full"}, {"table_start": "uniform"}])
@pytest.mark.parametrize("tracking", ["ema", "accumulative"])
def test_no_neighbours_is_local_training(variant, tracking):
    # M = 0 (Fig. 6b): no model ever travels, so each client's weights are one-hot on
    # itself from the start, and it predicts with its own model alone
    e, alg = _alg({"neighbors": 0, "loss_tracking": tracking, **variant}, lr=0.5)
    state = alg.init()
    eye = torch.eye(4, dtype=torch.float64)
    torch.testing.assert_close(state["weights"], eye, atol=0, rtol=0)
    for rnd in (1, 2, 3):
        state, _ = alg.round(state, rnd)
        torch.testing.assert_close(state["weights"], eye, atol=0, rtol=0)
    x = e.data.x[e.data.test[0]]
    torch.testing.assert_close(alg.predict(state, 0, x, 3),
                               e.probs(take(state["params"], 0), x))


def test_mstep_without_neighbours_one_step_by_hand():
    # former variant, M = 0, one local step: φ_k <- φ_k - lr · w_kk · ∇ mean ℓ(batch of D_k)
    # with w_kk = 1 (no other model is ever seen)
    lr = 0.5
    e, alg = _alg({"neighbors": 0, **FORMER}, lr=lr, local_steps=1)
    state = alg.init()
    params0 = clone(state["params"])
    state, losses = alg.round(state, 1)
    for k in range(4):
        (batch,) = e.minibatches(k, 1, "local", 1)  # the owner's stream is Local's
        assert float(state["weights"][k, k]) == 1.0
        p0 = take(params0, k)
        loss, g = manual_loss_and_grad(p0, e.data.x[batch], e.data.y[batch])
        expected = {n: p0[n] - lr * g[n] for n in (W, B)}
        assert_params_close(take(state["params"], k), expected)
        assert losses[k] == pytest.approx(loss, rel=1e-5)


def _check_one_step_mstep(mstep, batch_of):
    """Round 2 of a one-step M-step, by hand: φ_k moves by
    -lr Σ_{i uses k} w_ik (n_i / n) ∇ mean ℓ(φ_k; batch_of(e, i, k)) (eq. 4 with its 1/n)."""
    lr = 0.3
    e, alg = _alg({"neighbors": 2, "epsilon": 0.3, "mstep": mstep}, lr=lr, local_epochs=3)
    state, _ = alg.round(alg.init(), 1)
    params1 = clone(state["params"])
    nbrs = alg.neighbours(state["weights"], 2)
    used = [sorted([i, *nbrs[i]]) for i in range(4)]
    state, _ = alg.round(state, 2)
    w = state["weights"].to(torch.float32)
    n = SIZES4["n_train"]
    for k in range(4):
        p = clone(take(params1, k))
        g = {name: torch.zeros_like(v) for name, v in p.items()}
        for i in [i for i in range(4) if k in used[i]]:
            idx = batch_of(e, i, k)
            _, gi = manual_loss_and_grad(p, e.data.x[idx], e.data.y[idx])
            g = {name: g[name] + float(w[i, k]) * n[i] / sum(n) * gi[name] for name in g}
        assert_params_close(take(state["params"], k), {m: p[m] - lr * g[m] for m in p})


def test_paper_mstep_is_one_step_on_eq4_by_hand():
    # mstep 'step': one step per round, whatever the local epochs, each user's term
    # from one mini-batch (the owner's from Local's stream)
    def batch(e, i, k):
        (idx,) = e.minibatches(i, 2, "local" if i == k else f"federico_mstep_{k}", 1)
        return idx

    _check_one_step_mstep("step", batch)


def _manual_mstep(e, params0, w, used, rnd, lr):
    out = []
    for k in range(e.num_clients):
        users = [i for i in range(e.num_clients) if k in used[i]]
        steps = e.steps_per_round(k)
        streams = {i: e.minibatches(i, rnd, "local" if i == k else f"federico_mstep_{k}",
                                    steps) for i in users}
        p = clone(take(params0, k))
        for s in range(steps):
            g = {n: torch.zeros_like(v) for n, v in p.items()}
            for i in users:
                idx = streams[i][s]
                _, gi = manual_loss_and_grad(p, e.data.x[idx], e.data.y[idx])
                g = {n: g[n] + float(w[i, k]) * gi[n] for n in g}
            p = {n: p[n] - lr * g[n] for n in p}
        out.append(p)
    return out


@pytest.mark.parametrize("m", [1, 3])
def test_mstep_weighs_by_how_much_others_use_the_model(m):
    # model k moves along Σ_{i uses k} w_ik ∇ mean ℓ(φ_k; batch of D_i)  (w_ik, not w_ki)
    lr = 0.3
    e, alg = _alg({"neighbors": m, "epsilon": 0.3, **FORMER}, lr=lr, local_epochs=1)
    state, _ = alg.round(alg.init(), 1)
    params1 = clone(state["params"])
    nbrs = alg.neighbours(state["weights"], 2)
    used = [sorted([i, *nbrs[i]]) for i in range(4)]
    state, _ = alg.round(state, 2)
    w = state["weights"]
    assert not torch.allclose(w, w.T)
    expected = _manual_mstep(e, params1, w, used, 2, lr)
    for k in range(4):
        assert_params_close(take(state["params"], k), expected[k])
    # the transposed weighting gives different models
    wrong = _manual_mstep(e, params1, w.T, used, 2, lr)
    assert any(not torch.allclose(wrong[k][W], expected[k][W], atol=1e-6) for k in range(4))


def test_round_is_deterministic():
    a_e, a = _alg({"neighbors": 1}, seed=4)
    b_e, b = _alg({"neighbors": 1}, seed=4)
    sa, sb = a.init(), b.init()
    for rnd in (1, 2):
        sa, la = a.round(sa, rnd)
        sb, lb = b.round(sb, rnd)
    assert torch.equal(sa["params"][W], sb["params"][W])
    assert torch.equal(sa["weights"], sb["weights"])
    assert la.tolist() == lb.tolist()


# ---------------------------------------------------------------------- readings


def test_defaults_are_mean_epoch_all_to_all_one_warmup_round():
    hp = parse_hyper(FedeRiCo, {})
    assert (hp.estep_loss, hp.mstep, hp.table_start) == ("mean", "epoch", "all_to_all")
    assert hp.warmup_rounds == 1 and hp.ema_start == "first"


def _near_equal_at_init():
    # 4 clients of 200 samples: random linear models differ by a fraction of a nat in
    # mean loss, i.e. by tens of nats summed over 200 samples
    return make_data(n_train=(200,) * 4, n_test=(2,) * 4, seed=5)


def test_default_weights_are_not_one_hot_at_init():
    # Sec. 3.3: a model slightly better at the start is *likely* sampled more often, not
    # surely. With the mean loss no row of the first table is one-hot; with the summed
    # loss (eq. 3 literally) at least one is.
    _, alg = _alg(data=_near_equal_at_init())
    state = alg.init()
    gaps = state["table"].max(1).values - state["table"].min(1).values
    assert float(gaps.max()) < 1.0  # near-equal models: under a nat apart
    assert float(state["weights"].max()) < 0.5
    _, summed = _alg({"estep_loss": "sum"}, data=_near_equal_at_init())
    assert float(summed.init()["weights"].max()) > 0.99


@pytest.mark.parametrize("optimizer,lr", [("sgd", 0.5), ("adam", 0.05)])
@pytest.mark.parametrize("tracking", ["ema", "accumulative"])
def test_no_neighbours_default_is_local_bit_for_bit(optimizer, lr, tracking):
    # Fig. 6b: "M = 0 is similar to Local Training". With the default M-step (an epoch
    # of the owner's steps) and w_kk = 1, model k takes Local's steps on Local's batches
    # (purpose 'local'): the same parameters, optimiser states, losses and predictions.
    training = dict(optimizer=optimizer, lr=lr, local_epochs=2, rounds=3)
    ea, eb = make_engine(make_data(**SIZES4), **training), make_engine(make_data(**SIZES4),
                                                                         **training)
    loc = Local(ea, parse_hyper(Local, {}))
    fed = FedeRiCo(eb, parse_hyper(FedeRiCo, {"neighbors": 0, "loss_tracking": tracking}))
    sa, sb = loc.init(), fed.init()
    x = ea.data.x
    for rnd in (1, 2, 3):
        sa, la = loc.round(sa, rnd)
        sb, lb = fed.round(sb, rnd)
        for name in sa["params"]:
            assert torch.equal(sa["params"][name], sb["params"][name])
        for name in sa["opt"]:
            assert torch.equal(sa["opt"][name], sb["opt"][name])
        assert np.array_equal(la, lb)
        for k in range(4):
            assert torch.equal(fed.predict(sb, k, x, rnd), loc.predict(sa, k, x, rnd))
    # and a whole run logs the same accuracies and losses
    ea, eb = make_engine(make_data(**SIZES4), **training), make_engine(make_data(**SIZES4),
                                                                         **training)
    la = ea.run(Local(ea, parse_hyper(Local, {})))
    lb = eb.run(FedeRiCo(eb, parse_hyper(FedeRiCo, {"neighbors": 0})))

    def rows(log, metrics):
        return [(r, c, m, v) for r, c, m, v in zip(log.rounds, log.clients, log.metrics,
                                                    log.values, strict=True) if m in metrics]
    same = (R.TEST_ACCURACY, R.TEST_LOSS, R.TRAIN_LOSS)
    assert rows(la, same) == rows(lb, same)
    assert len(rows(la, same)) == 4 * (2 * 4 + 3)  # rounds 0-3 evaluated, 3 trained


@pytest.mark.parametrize("mstep,steps", [("full", 1), ("step", 1), ("epoch", 2 * 2)])
def test_mstep_step_counts(monkeypatch, mstep, steps):
    # local_epochs 2, batch 2, 4 training samples per client: an epoch is 2 steps, so
    # 'epoch' takes 4 steps per round; 'step' one on one mini-batch (2 samples) per
    # user; 'full' one on all of every user's data (4 samples)
    data = make_data(n_train=(4, 4, 4), n_test=(1, 1, 1))
    e, alg = _alg({"neighbors": 1, "mstep": mstep}, data=data, local_epochs=2)
    state = alg.init()
    batch_sizes = []
    real_loss = PeerWeighted.loss

    def sizes(self, model, params, batch, extra, obj_state):
        batch_sizes.extend(len(b.idx) for b in extra)  # the users' batches of one step
        return real_loss(self, model, params, batch, extra, obj_state)

    monkeypatch.setattr(PeerWeighted, "loss", sizes)
    nbrs = alg.neighbours(state["weights"], 1)
    users = sum(1 + sum(k in nbrs[i] for i in range(3)) for k in range(3))
    state, _ = alg.round(state, 1)
    assert state["opt"]["step"].tolist() == [steps] * 3  # the optimiser's step counts
    assert batch_sizes == [4 if mstep == "full" else 2] * (users * steps)


def test_full_mstep_is_one_step_on_eq6_by_hand():
    # 'full': φ_k <- φ_k - lr (1/n) Σ_i w_ik Σ_{s∈D_i} ∇ℓ  (eq. 6 with eq. 4's 1/n):
    # each user's term from all of its training data
    _check_one_step_mstep("full", lambda e, i, k: e.data.train[i])


def test_posterior_fills_unknown_entries_with_the_row_mean():
    # row [1, ?, 3]: the unknown entry counts as 2 -> softmax(-[1, 2, 3]); row [?, 5, ?]
    # -> uniform
    nan = float("nan")
    table = torch.tensor([[1.0, nan, 3.0], [nan, 5.0, nan]], dtype=torch.float64)
    got = FedeRiCo.posterior(table)
    e = [math.exp(-1), math.exp(-2), math.exp(-3)]
    torch.testing.assert_close(got, torch.tensor([[v / sum(e) for v in e], [1 / 3] * 3],
                                                 dtype=torch.float64))


@pytest.mark.parametrize("tracking", ["ema", "accumulative"])
def test_uniform_start(tracking):
    # only the own loss is known before round 1 (no model travels): weights exactly
    # uniform; a model sampled for the first time enters at its loss (EMA) or (rnd + 1)
    # times it (accumulative), and the rest stay unknown (their row's known mean)
    e, alg = _alg({"neighbors": 1, "table_start": "uniform", "loss_tracking": tracking,
                   "beta": 0.6}, lr=0.5)
    state = alg.init()
    assert e.traffic.up.tolist() == [0] * 4 and e.traffic.down.tolist() == [0] * 4
    own = _mean_losses(e, state["params"], [(i, i) for i in range(4)])
    for i in range(4):
        for j in range(4):
            v = float(state["table"][i, j])
            assert v == pytest.approx(own[i, i], rel=1e-6) if i == j else math.isnan(v)
    torch.testing.assert_close(state["weights"], torch.full((4, 4), 0.25, dtype=torch.float64))
    params0 = clone(state["params"])
    nbrs = alg.neighbours(state["weights"], 1)
    state, _ = alg.round(state, 1)
    fresh = _mean_losses(e, params0, [(i, j) for i in range(4) for j in [i, *nbrs[i]]])
    expected = torch.full((4, 4), float("nan"), dtype=torch.float64)
    for (i, j), loss in fresh.items():
        if i == j:  # known before: EMA of the unchanged model's loss / sum of two
            expected[i, j] = loss if tracking == "ema" else 2 * loss
        else:  # first seen in round 1
            expected[i, j] = loss if tracking == "ema" else 2 * loss
    torch.testing.assert_close(state["table"], expected, equal_nan=True)
    torch.testing.assert_close(state["weights"], FedeRiCo.posterior(expected))
    assert int(torch.isnan(state["table"]).sum()) == 4 * 2  # two unknown entries a row


# ---------------------------------------------------------------------- EMA start


@pytest.mark.parametrize("start", ["all_to_all", "uniform"])
def test_zero_start_table_is_beta_times_the_first_losses(start):
    # ema_start zero: L̂ = 0 before any observation, so the start's losses enter as
    # (1 - β) 0 + β ℓ = 0.3 ℓ and an unknown entry (uniform start) is 0, not NaN
    e, alg = _alg({"neighbors": 1, "beta": 0.3, "table_start": start, "ema_start": "zero"})
    state = alg.init()
    pairs = ([(i, j) for i in range(4) for j in range(4)] if start == "all_to_all"
             else [(i, i) for i in range(4)])
    expected = torch.zeros(4, 4, dtype=torch.float64)
    for (i, j), loss in _mean_losses(e, state["params"], pairs).items():
        expected[i, j] = 0.3 * loss
    torch.testing.assert_close(state["table"], expected)
    torch.testing.assert_close(state["weights"], torch.softmax(-expected, dim=1))


def test_zero_start_then_ema_by_hand():
    # round 2 refreshes the entries of the used models: 0.7 L̂ + 0.3 ℓ (β = 0.3) from
    # the table after round 1, which itself started at 0.3 ℓ⁰ (all_to_all start)
    e, alg = _alg({"neighbors": 1, "beta": 0.3, "ema_start": "zero"}, lr=0.5)
    state = alg.init()
    table0 = state["table"].clone()
    state, _ = alg.round(state, 1)
    params1, table1 = clone(state["params"]), state["table"].clone()
    assert not torch.equal(table1, table0)  # round 1's refresh moved the used entries
    nbrs = alg.neighbours(state["weights"], 2)
    used = [sorted([i, *nbrs[i]]) for i in range(4)]
    state, _ = alg.round(state, 2)
    expected = table1.clone()
    pairs = [(i, j) for i in range(4) for j in used[i]]
    for (i, j), loss in _mean_losses(e, params1, pairs).items():
        expected[i, j] = 0.7 * table1[i, j] + 0.3 * loss
    torch.testing.assert_close(state["table"], expected)


@pytest.mark.parametrize("tracking", ["ema", "accumulative"])
def test_first_start_table_ignores_beta(tracking):
    # ema_start first (and accumulative tracking, where ema_start does not enter): the
    # table starts at the losses themselves, whatever β
    tables = []
    for beta, ema_start in ((0.1, "first"), (0.9, "first"), (0.1, "zero")):
        _, alg = _alg({"neighbors": 1, "beta": beta, "loss_tracking": tracking,
                       "ema_start": ema_start})
        tables.append(alg.init()["table"])
    torch.testing.assert_close(tables[0], tables[1])
    if tracking == "accumulative":
        torch.testing.assert_close(tables[0], tables[2])
    else:
        torch.testing.assert_close(tables[2], 0.1 * tables[0])


# ---------------------------------------------------------------------- warm-up


@pytest.mark.parametrize("optimizer,lr", [("sgd", 0.5), ("adam", 0.05)])
def test_warmup_rounds_are_local_then_the_table_starts(optimizer, lr):
    # W = 2: rounds 1-2 are Local's rounds bit for bit (weights one-hot on the client,
    # nothing travels); the end of round 2 holds the all-to-all table of the warmed
    # models; round 3 is the algorithm's usual round from that state
    training = dict(optimizer=optimizer, lr=lr, rounds=3)
    ea, eb = make_engine(make_data(**SIZES4), **training), make_engine(make_data(**SIZES4),
                                                                         **training)
    loc = Local(ea, parse_hyper(Local, {}))
    fed = FedeRiCo(eb, parse_hyper(FedeRiCo, {"neighbors": 1, "warmup_rounds": 2}))
    sa, sb = loc.init(), fed.init()
    eye = torch.eye(4, dtype=torch.float64)
    assert torch.equal(sb["weights"], eye)
    for rnd in (1, 2):
        sa, la = loc.round(sa, rnd)
        sb, lb = fed.round(sb, rnd)
        for name in sa["params"]:
            assert torch.equal(sa["params"][name], sb["params"][name])
        for name in sa["opt"]:
            assert torch.equal(sa["opt"][name], sb["opt"][name])
        assert np.array_equal(la, lb)
        if rnd == 1:
            assert torch.equal(sb["weights"], eye)
            assert eb.traffic.up.tolist() == [0] * 4 == eb.traffic.down.tolist()
    # the table's start: every model on every client, one model download per pair
    p = eb.model_size
    assert eb.traffic.down.tolist() == [3 * p] * 4 == eb.traffic.up.tolist()
    fresh = _mean_losses(eb, sb["params"], [(i, j) for i in range(4) for j in range(4)])
    expected = torch.tensor([[fresh[i, j] for j in range(4)] for i in range(4)],
                            dtype=torch.float64)
    torch.testing.assert_close(sb["table"], expected)
    torch.testing.assert_close(sb["weights"], torch.softmax(-expected, dim=1))
    # round 3: the same as an algorithm without warm-up would do from that state
    plain = FedeRiCo(eb, parse_hyper(FedeRiCo, {"neighbors": 1, "warmup_rounds": 0}))
    sc, lc = plain.round(clone(sb), 3)
    sb, lb = fed.round(sb, 3)
    for name in sb["params"]:
        assert torch.equal(sb["params"][name], sc["params"][name])
    assert torch.equal(sb["weights"], sc["weights"])
    assert np.array_equal(lb, lc)


def test_warmup_with_uniform_start_and_accumulative_tracking():
    # W = 1 and table_start uniform: the end of round 1 knows only the own losses (the
    # others NaN, weights uniform); an entry first seen in round 2 enters at
    # (2 - 1 + 1) ℓ, the scale of the row's own sum (its start and one more loss)
    e, alg = _alg({"neighbors": 1, "warmup_rounds": 1, "table_start": "uniform",
                   "loss_tracking": "accumulative"}, lr=0.5)
    state, _ = alg.round(alg.init(), 1)
    assert int(torch.isnan(state["table"]).sum()) == 4 * 3
    torch.testing.assert_close(state["weights"], torch.full((4, 4), 0.25, dtype=torch.float64))
    own = torch.diagonal(state["table"]).clone()
    params1 = clone(state["params"])
    nbrs = alg.neighbours(state["weights"], 2)
    state, _ = alg.round(state, 2)
    fresh = _mean_losses(e, params1, [(i, j) for i in range(4) for j in [i, *nbrs[i]]])
    for i in range(4):
        assert float(state["table"][i, i]) == pytest.approx(float(own[i]) + fresh[i, i])
        (j,) = nbrs[i]
        assert float(state["table"][i, j]) == pytest.approx(2 * fresh[i, j])


def _three_and_one(seed):
    """Clients 0-2 label 2-D points by x_0 > 0, client 3 (alone) by x_0 < 0; 16 each."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(4 * 18, 1, 1, 2, generator=gen)
    sign = torch.tensor([1.0] * 54 + [-1.0] * 18)
    rows = [torch.arange(18 * k, 18 * k + 18) for k in range(4)]
    return FederatedData(x=x, y=(sign * x[:, 0, 0, 0] > 0).long(),
                         train=tuple(r[:16] for r in rows), test=tuple(r[16:] for r in rows),
                         groups=(0, 0, 0, 1), num_classes=2)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_warmup_weights_follow_the_groups(seed):
    # Fig. 3: group-mates mix, a lone client uses only itself. Three clients share a
    # labelling, the fourth has its opposite. After one warm-up round each model is
    # its owner's, so the lone client's loss on the others' models is nats above its
    # own: one round after the table starts it keeps >= 0.8 on itself (0.82-0.99 over
    # these seeds), and the three put >= 0.95 on their group. Without warm-up every
    # model's first M-step mixes the clients that happened to sample it, and the lone
    # client keeps < 0.5 on itself.
    def weights_at_round(warmup, rnd):
        e = make_engine(_three_and_one(seed), seed=seed, lr=5.0, batch_size=8,
                        local_epochs=5, rounds=rnd)
        alg = FedeRiCo(e, parse_hyper(FedeRiCo, {"neighbors": 1, "warmup_rounds": warmup}))
        state = alg.init()
        for r in range(1, rnd + 1):
            state, _ = alg.round(state, r)
        return state["weights"]

    w = weights_at_round(1, 2)
    assert float(w[3, 3]) >= 0.8
    assert float(w[:3, :3].sum(1).min()) >= 0.95
    assert float(weights_at_round(0, 2)[3, 3]) < 0.5


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_beta_moves_the_default_weights_after_the_table_starts(seed):
    # Fig. 7: a bigger β changes the weights more in early training. Under the defaults
    # (one warm-up round, all-to-all table, EMA from the first loss) the table at the
    # end of round 1 holds the warmed models' losses whatever β; round 2 re-reads the
    # same models (no change); from round 3 each refresh moves L̂ by β (ℓ - L̂), so the
    # weights' total variation over rounds 2-4 is several times larger with β = 0.9
    # (6-10 times over these seeds) than with β = 0.1, and nonzero with both.
    def weights(beta):
        e = make_engine(_three_and_one(seed), seed=seed, lr=5.0, batch_size=8,
                        local_epochs=5, rounds=4)
        alg = FedeRiCo(e, parse_hyper(FedeRiCo, {"neighbors": 1, "beta": beta}))
        state, out = alg.init(), []
        for r in range(1, 5):
            state, _ = alg.round(state, r)
            out.append(state["weights"].clone())
        return out

    def change(ws):
        return sum(float(0.5 * (b - a).abs().sum(1).mean()) for a, b in zip(ws[1:], ws[2:],
                                                                            strict=False))

    small, big = weights(0.1), weights(0.9)
    torch.testing.assert_close(small[0], big[0], rtol=0, atol=0)  # the start ignores β
    assert 0 < 3 * change(small) < change(big)


# ---------------------------------------------------------------------- predict / record


def test_predict_is_weighted_mixture():
    e, alg = _alg({"neighbors": 2}, lr=0.5)
    state, _ = alg.round(alg.init(), 1)
    x = e.data.x
    probs = [e.probs(take(state["params"], j), x) for j in range(4)]
    for i in range(4):
        expected = sum(float(state["weights"][i, j]) * probs[j] for j in range(4))
        got = alg.predict(state, i, x, 1)
        torch.testing.assert_close(got, expected)
        torch.testing.assert_close(got.sum(1), torch.ones(len(x)))


def test_record_logs_weight_matrix():
    _, alg = _alg({"neighbors": 2})
    state, _ = alg.round(alg.init(), 1)
    log = R.MetricLog()
    alg.record(state, 1, log)
    assert len(log) == 16
    assert set(log.metrics) == {R.WEIGHT} and set(log.rounds) == {1}
    assert [(c, p) for c, p in zip(log.clients, log.peers, strict=True)] == \
        [(i, j) for i in range(4) for j in range(4)]
    matrix = np.array(log.values).reshape(4, 4)
    np.testing.assert_allclose(matrix.sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_allclose(matrix, state["weights"].numpy())


# ---------------------------------------------------------------------- hyperparameters


def test_parse_hyper_defaults_and_coercion():
    assert parse_hyper(FedeRiCo, {}) == FedeRiCoHyper(neighbors=3, epsilon=0.3, beta=0.6,
                                                      loss_tracking="ema")
    hp = parse_hyper(FedeRiCo, {"epsilon": 1, "beta": 0, "neighbors": 0,
                                "loss_tracking": "accumulative"})
    assert hp.epsilon == 1.0 and isinstance(hp.epsilon, float) and hp.beta == 0.0


@pytest.mark.parametrize("bad", [
    {"epsilon": 1.5}, {"epsilon": -0.1}, {"beta": 1.2}, {"beta": -0.5},
    {"loss_tracking": "foo"}, {"neighbors": -1}, {"neighbors": 1.5}, {"neighbors": True},
    {"epsilon": "0.3"}, {"M": 3},
])
def test_parse_hyper_rejects(bad):
    with pytest.raises(ValueError):
        parse_hyper(FedeRiCo, bad)


# ------------------------------------------------------------ the objective: PeerWeighted
#: Per trained client (5), the users whose streams train its model: 0..4 streams, so
#: the vectorised pass pads both the streams and (users' sizes 7, 3, 12, 5, 1) batches.
PEER_USERS = ((0, 1, 2), (1,), (4, 0, 2, 3), (3, 4), ())


def _peer_objective(whole=False, seed=0):
    """Client c's model on the streams of PEER_USERS[c] (purpose ``peer_<c>``)."""
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
def test_peer_weighted_vmap_equals_loop(model, opt, whole):
    e = engine_for(model, opt)
    start = e.client_init()
    looped = both_paths(e, start["params"], start["opt"], _peer_objective(whole))
    # client 4 has no stream: zero gradients, its model stays (SGD, momentum, Adam from 0)
    assert_params_close(take(looped[0], 4), take(start["params"], 4), atol=0, rtol=0)
    assert looped[2][4] == 0.0
    # other coefficients move the models of several streams elsewhere (one stream's
    # coefficient is a scale, which Adam does not see)
    moved = train(e, start["params"], start["opt"], list(range(e.num_clients)), LT.LOOP,
                  _peer_objective(whole, seed=1))
    for c in (0, 2, 3):
        a, b = take(moved[0], c), take(looped[0], c)
        assert any(not torch.allclose(a[n], b[n]) for n in a)


def test_peer_weighted_one_sgd_step_by_hand():
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
        p1, _, loss = train(e, rows_of(start["params"], [k]), rows_of(start["opt"], [k]),
                            [k], path, objective, steps=1)
        assert_params_close(take(p1, 0), expected, atol=1e-6, rtol=1e-5)
        assert loss[0] == pytest.approx(float(0.25 * loss_a.detach() + 0.75 * loss_2.detach()),
                                        rel=1e-5)


def test_peer_weighted_shared_equals_stacked_and_checks():
    e = engine_for("mlp", "adam")
    start = e.client_init()
    clients = list(range(e.num_clients))
    streams = (Stream("x", client=3), Stream("y", client=1))
    coef = torch.tensor([0.6, 0.4], dtype=torch.float64)
    shared = PeerWeighted(streams, coef, per_client=False)
    assert shared.streams == streams and shared.client_streams(4) == streams
    stacked = PeerWeighted((streams,) * len(clients), coef.expand(len(clients), -1))
    for path in LT.PATHS:
        assert_same(train(e, start["params"], start["opt"], clients, path, shared),
                    train(e, start["params"], start["opt"], clients, path, stacked))
    with pytest.raises(TypeError, match="client_streams"):
        _ = stacked.streams
    with pytest.raises(ValueError, match="coef must be"):
        PeerWeighted((streams,), torch.zeros(2))
    with pytest.raises(ValueError, match="1 columns for 2 streams"):
        PeerWeighted((streams,), torch.zeros(1, 1))
    with pytest.raises(ValueError, match="coef must be"):
        PeerWeighted(streams, torch.zeros(2, 2), per_client=False)
