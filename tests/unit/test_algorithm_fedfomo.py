"""FedFomo: the weight formula, clipping and normalisation, the model update, the
validation split, ε-greedy downloads, the logged weights and determinism, on tiny
linear-model engines."""

import math

import numpy as np
import pytest
import torch
from _fl_helpers import B, W, assert_params_close, clone, make_data, make_engine

from pflrepro import results as R
from pflrepro.algorithms.base import parse_hyper
from pflrepro.algorithms.fedfomo import FedFomo, fomo_scores, fomo_update, normalise

SIZES = dict(n_train=(5, 5, 5, 5), n_test=(1, 1, 1, 1))


def _alg(params=None, data=None, seed=0, **training):
    e = make_engine(data if data is not None else make_data(**SIZES), seed=seed, **training)
    return e, FedFomo(e, parse_hyper(FedFomo, params or {}))


def _p(w, b):
    return {W: torch.tensor(w, dtype=torch.float32), B: torch.tensor(b, dtype=torch.float32)}


def _val_loss(e, params, idx):
    logits = e.data.x[idx].flatten(1) @ params[W].T + params[B]
    return float(torch.nn.functional.cross_entropy(logits, e.data.y[idx]))


# ---------------------------------------------------------------------- formula


def test_scores_by_hand():
    own = _p([[0.0, 0.0], [0.0, 0.0]], [0.0, 0.0])
    models = {1: _p([[3.0, 0.0], [0.0, 0.0]], [0.0, 4.0]),  # distance 5
              2: _p([[0.0, 0.0], [0.0, 0.0]], [0.0, 2.0])}  # distance 2
    scores = fomo_scores(1.0, own, {1: 0.5, 2: 1.6}, models)
    assert scores[1] == pytest.approx((1.0 - 0.5) / 5)
    assert scores[2] == pytest.approx((1.0 - 1.6) / 2)


def test_identical_model_scores_zero():
    own = _p([[1.0, 2.0], [3.0, 4.0]], [0.5, 0.5])
    assert fomo_scores(0.7, own, {3: 0.7}, {3: clone(own)}) == {3: 0.0}


def test_negative_scores_clipped_and_normalised():
    w = normalise({0: -2.0, 2: 1.0, 3: 3.0})
    assert w == pytest.approx({0: 0.0, 2: 0.25, 3: 0.75})


def test_all_zero_weights_keep_own_model():
    own = _p([[1.0, -1.0], [0.5, 2.0]], [0.1, -0.2])
    models = {1: _p([[9.0, 9.0], [9.0, 9.0]], [9.0, 9.0])}
    w = normalise({1: -0.3})
    assert w == {1: 0.0}
    assert_params_close(fomo_update(own, models, w), own, atol=0, rtol=0)


def test_update_with_normalised_weights():
    own = _p([[0.0, 0.0], [0.0, 0.0]], [1.0, 1.0])
    models = {1: _p([[4.0, 0.0], [0.0, 0.0]], [1.0, 1.0]),
              2: _p([[0.0, 8.0], [0.0, 0.0]], [1.0, 5.0])}
    out = fomo_update(own, models, {1: 0.25, 2: 0.75})
    assert_params_close(out, _p([[1.0, 6.0], [0.0, 0.0]], [1.0, 4.0]))


# ---------------------------------------------------------------------- split


def test_validation_split_disjoint_from_training_batches():
    e, alg = _alg()
    for k in range(4):
        train = set(e.data.train[k].tolist())
        val, fit = set(alg.val[k].tolist()), set(alg.fit[k].tolist())
        assert len(val) == 1 and len(fit) == 4  # round(0.2 * 5) = 1
        assert val.isdisjoint(fit) and val | fit == train
        for rnd in range(1, 8):
            for idx in alg.batches(k, rnd, alg.steps(k)):
                assert set(idx.tolist()) <= fit
    # steps count epochs over the non-validation part: ceil(4 / 2) = 2
    assert [alg.steps(k) for k in range(4)] == [2, 2, 2, 2]


def test_validation_split_seeded():
    _, a = _alg(data=make_data(n_train=(10, 10), n_test=(1, 1)), seed=0)
    _, b = _alg(data=make_data(n_train=(10, 10), n_test=(1, 1)), seed=0)
    _, c = _alg(data=make_data(n_train=(10, 10), n_test=(1, 1)), seed=1)
    assert all(torch.equal(x, y) for x, y in zip(a.val, b.val, strict=True))
    assert any(not torch.equal(x, y) for x, y in zip(a.val, c.val, strict=True))


# ---------------------------------------------------------------------- round


def test_round_by_hand():
    e, alg = _alg(lr=0.2)
    state = alg.init()
    old = clone(state["params"])
    new, losses = alg.round(clone(state), 1)
    for i in range(4):
        own = e.take(old, i)
        own_loss = _val_loss(e, own, alg.val[i])
        raw = {}
        for j in range(4):
            if j != i:
                theta = e.take(old, j)
                dist = math.sqrt(sum(float(((theta[k] - own[k]) ** 2).sum()) for k in (W, B)))
                raw[j] = max(0.0, (own_loss - _val_loss(e, theta, alg.val[i])) / dist)
        total = sum(raw.values())
        w = {j: (v / total if total > 0 else 0.0) for j, v in raw.items()}
        for j in range(4):
            assert float(new["weights"][i, j]) == pytest.approx(w.get(j, 0.0), rel=1e-5)
        mixed = {k: own[k] + sum(w[j] * (e.take(old, j)[k] - own[k]) for j in w)
                 for k in (W, B)}
        # local SGD over the non-validation batches
        p, ref = clone(mixed), 0.0
        batches = alg.batches(i, 1, alg.steps(i))
        for idx in batches:
            loss, g = e.loss_and_grad(p, idx)
            p = {k: p[k] - 0.2 * g[k] for k in p}
            ref += loss
        assert_params_close(e.take(new["params"], i), p, atol=1e-5)
        assert losses[i] == pytest.approx(ref / len(batches), rel=1e-5)
    assert torch.equal(new["affinity"], new["weights"])  # first round: P = w


def test_identical_models_are_not_mixed():
    e, alg = _alg(lr=0.2)
    state = alg.init()
    for name in state["params"]:
        state["params"][name][:] = state["params"][name][0]
    start = clone(state["params"])
    state, _ = alg.round(state, 1)
    assert torch.count_nonzero(state["weights"]) == 0
    for i in range(4):
        p = e.take(start, i)
        for idx in alg.batches(i, 1, alg.steps(i)):
            _, g = e.loss_and_grad(p, idx)
            p = {k: p[k] - 0.2 * g[k] for k in p}
        assert_params_close(e.take(state["params"], i), p, atol=1e-6)


def test_weights_rows_and_record():
    e, alg = _alg()
    state = alg.init()
    log = R.MetricLog()
    alg.record(state, 0, log)
    assert len(log) == 16 and set(log.values) == {0.0}
    for rnd in (1, 2, 3):
        state, _ = alg.round(state, rnd)
        w = state["weights"]
        assert torch.all(torch.diagonal(w) == 0) and torch.all(w >= 0)
        for s in w.sum(dim=1).tolist():
            assert s == pytest.approx(1.0) or s == 0.0
        log = R.MetricLog()
        alg.record(state, rnd, log)
        assert set(log.metrics) == {R.WEIGHT}
        got = np.zeros((4, 4))
        for i, j, v in zip(log.clients, log.peers, log.values, strict=True):
            got[i, j] = v
        np.testing.assert_allclose(got, w.numpy())


def test_affinity_accumulates():
    _, alg = _alg()
    state = alg.init()
    total = torch.zeros(4, 4, dtype=torch.float64)
    for rnd in (1, 2, 3):
        state, _ = alg.round(state, rnd)
        total += state["weights"]
    torch.testing.assert_close(state["affinity"], total)


def test_signed_affinity_can_go_negative():
    e, alg = _alg({"affinity": "signed"})
    state = alg.init()
    state, _ = alg.round(state, 1)
    assert torch.all(torch.diagonal(state["affinity"]) == 0)
    assert float(state["affinity"].abs().sum(dim=1).max()) > 0
    # each row of signed scores sums to +1 or -1 (normalised by |sum|) or is all zero
    for s in state["affinity"].sum(dim=1).tolist():
        assert abs(s) == pytest.approx(1.0) or s == 0.0


# ---------------------------------------------------------------------- downloads


def _six(**params):
    return _alg(params, data=make_data(n_train=(5,) * 6, n_test=(1,) * 6))


def test_all_others_by_default():
    _, alg = _six()
    chosen = alg.downloads(torch.zeros(6, 6, dtype=torch.float64), 1)
    assert chosen == [[j for j in range(6) if j != i] for i in range(6)]


@pytest.mark.parametrize("m", [1, 2, 4])
def test_greedy_downloads_top_affinity(m):
    _, alg = _six(downloads=m, epsilon=0.0)
    gen = torch.Generator().manual_seed(3)
    aff = torch.rand(6, 6, generator=gen, dtype=torch.float64)
    aff[1, 1] = 100.0  # own affinity never chosen
    for rnd in (1, 4):
        for i, js in enumerate(alg.downloads(aff, rnd)):
            others = [j for j in range(6) if j != i]
            assert js == sorted(sorted(others, key=lambda j: -float(aff[i, j]))[:m])


@pytest.mark.parametrize("eps", [0.3, 1.0])
def test_epsilon_downloads_distinct(eps):
    _, alg = _six(downloads=3, epsilon=eps, epsilon_decay=0.0)
    aff = torch.rand(6, 6, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    seen = set()
    for rnd in range(1, 30):
        for i, js in enumerate(alg.downloads(aff, rnd)):
            assert len(js) == len(set(js)) == 3 and i not in js and js == sorted(js)
            seen.add((i, tuple(js)))
    assert len(seen) > 6  # exploration varies the choice


def test_epsilon_decays_to_greedy():
    # ε_t = 0.3 - (t - 1) * 0.1 is 0 from round 4 on
    _, greedy = _six(downloads=2, epsilon=0.0)
    _, decaying = _six(downloads=2, epsilon=0.3, epsilon_decay=0.1)
    aff = torch.rand(6, 6, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    for rnd in (4, 5, 9):
        assert decaying.downloads(aff, rnd) == greedy.downloads(aff, rnd)


def test_not_received_weights_are_zero():
    _, alg = _six(downloads=2)
    state = alg.init()
    received = alg.downloads(state["affinity"], 1)
    state, _ = alg.round(state, 1)
    for i in range(6):
        for j in range(6):
            if j not in received[i]:
                assert float(state["weights"][i, j]) == 0.0


# ---------------------------------------------------------------------- predict, seeds


def test_predict_own_model():
    e, alg = _alg()
    state, _ = alg.round(alg.init(), 1)
    x = e.data.x
    for k in range(4):
        torch.testing.assert_close(alg.predict(state, k, x, 1),
                                   e.probs(e.take(state["params"], k), x))


def _run(seed, **params):
    _, alg = _six(**params) if params else _alg(seed=seed)
    state = alg.init()
    for rnd in (1, 2, 3):
        state, losses = alg.round(state, rnd)
    return state, losses


def test_determinism():
    a, la = _run(0)
    b, lb = _run(0)
    c, _ = _run(1)
    for k in a["params"]:
        assert torch.equal(a["params"][k], b["params"][k])
    assert torch.equal(a["weights"], b["weights"]) and np.array_equal(la, lb)
    assert not torch.equal(a["params"][W], c["params"][W])


def test_state_checkpointable(tmp_path):
    _, alg = _alg()
    state, _ = alg.round(alg.init(), 1)
    torch.save(state, tmp_path / "s.pt")
    back = torch.load(tmp_path / "s.pt", weights_only=True)
    assert torch.equal(back["affinity"], state["affinity"])


# ---------------------------------------------------------------------- hyper


def test_parse_hyper_defaults():
    hp = parse_hyper(FedFomo, {})
    assert (hp.val_fraction, hp.downloads, hp.epsilon, hp.epsilon_decay, hp.affinity) == \
        (0.2, -1, 0.3, 0.05, "clipped")


@pytest.mark.parametrize("params, match", [
    ({"neighbors": 3}, "unknown hyperparameter"),
    ({"downloads": 2.0}, "must be int"),
    ({"downloads": True}, "must be int"),
    ({"epsilon": "0.3"}, "must be float"),
    ({"epsilon": 1.5}, "<= 1"),
    ({"epsilon_decay": -0.1}, ">= 0"),
    ({"downloads": -2}, ">= -1"),
    ({"downloads": 0}, "downloads must be"),
    ({"val_fraction": 0.0}, "strictly between"),
    ({"val_fraction": 1}, "strictly between"),
    ({"affinity": "raw"}, "must be one of"),
])
def test_parse_hyper_rejects(params, match):
    with pytest.raises(ValueError, match=match):
        parse_hyper(FedFomo, params)


def test_invalid_for_engine():
    with pytest.raises(ValueError, match="exceeds"):
        _alg({"downloads": 4})
    with pytest.raises(ValueError, match="empty validation"):
        _alg(data=make_data(n_train=(5, 1), n_test=(1, 1)))
    with pytest.raises(ValueError, match="empty validation"):
        _alg({"val_fraction": 0.95})
