"""FedFomo: the weight formula (L1 / L2 distances), clipping and normalisation, the model
update from the previous model with the client's own trained model among the candidates
(and the legacy ``reference: current``), the shared start, the validation split,
ε-greedy downloads, the logged weights and determinism, on tiny linear-model engines."""

import math

import numpy as np
import pytest
import torch
from _alg_helpers import algorithm_factory
from _fl_helpers import B, W, assert_params_close, clone, make_data

from pflrepro.algorithms.base import parse_hyper
from pflrepro.algorithms.fedfomo import FedFomo, fomo_scores, fomo_update, normalise, param_distance
from pflrepro.store import results as R
from pflrepro.training.params import put, take

SIZES = dict(n_train=(5, 5, 5, 5), n_test=(1, 1, 1, 1))
#: the behaviour before issue 12: scores against the current model, Euclidean distance,
#: a model of its own per client
LEGACY = {"reference": "current", "distance": "l2", "init": "independent"}


_alg = algorithm_factory(FedFomo, sizes=SIZES)


def _p(w, b):
    return {W: torch.tensor(w, dtype=torch.float32), B: torch.tensor(b, dtype=torch.float32)}


def _val_loss(e, params, idx):
    logits = e.data.x[idx].flatten(1) @ params[W].T + params[B]
    return float(torch.nn.functional.cross_entropy(logits, e.data.y[idx]))


# ---------------------------------------------------------------------- formula


def test_param_distance_by_hand():
    a = _p([[1.0, -2.0], [0.0, 0.5]], [-3.0, 0.0])
    b = _p([[0.0, 0.0], [0.0, 0.0]], [0.0, 0.0])
    assert param_distance(a, b, "l1") == pytest.approx(1 + 2 + 0.5 + 3)  # 6.5
    assert param_distance(b, a) == pytest.approx(6.5)  # l1 by default, symmetric
    assert param_distance(a, b, "l2") == pytest.approx(math.sqrt(1 + 4 + 0.25 + 9))
    with pytest.raises(ValueError, match="unknown distance"):
        param_distance(a, b, "l3")


def test_scores_by_hand():
    own = _p([[0.0, 0.0], [0.0, 0.0]], [0.0, 0.0])
    models = {1: _p([[3.0, 0.0], [0.0, 0.0]], [0.0, 4.0]),  # L1 distance 7, L2 5
              2: _p([[0.0, 0.0], [0.0, 0.0]], [0.0, 2.0])}  # L1 and L2 distance 2
    scores = fomo_scores(1.0, own, {1: 0.5, 2: 1.6}, models)  # L1 by default
    assert scores[1] == pytest.approx((1.0 - 0.5) / 7)
    assert scores[2] == pytest.approx((1.0 - 1.6) / 2)
    scores = fomo_scores(1.0, own, {1: 0.5, 2: 1.6}, models, "l2")
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
            for idx in _batches(e, alg, k, rnd):
                assert set(idx.tolist()) <= fit
    # steps count epochs over the non-validation part: ceil(4 / 2) = 2
    assert [_steps(e, alg, k) for k in range(4)] == [2, 2, 2, 2]


def test_validation_split_seeded():
    _, a = _alg(data=make_data(n_train=(10, 10), n_test=(1, 1)), seed=0)
    _, b = _alg(data=make_data(n_train=(10, 10), n_test=(1, 1)), seed=0)
    _, c = _alg(data=make_data(n_train=(10, 10), n_test=(1, 1)), seed=1)
    assert all(torch.equal(x, y) for x, y in zip(a.val, b.val, strict=True))
    assert any(not torch.equal(x, y) for x, y in zip(a.val, c.val, strict=True))


# ---------------------------------------------------------------------- round


def _l1(a, b):
    return sum(float((a[k] - b[k]).abs().sum()) for k in (W, B))


def _l2(a, b):
    return math.sqrt(sum(float(((a[k] - b[k]) ** 2).sum()) for k in (W, B)))


def _steps(e, alg, k):
    return e.steps_per_round(k, samples=len(alg.fit[k]))


def _batches(e, alg, k, rnd):
    """Client k's local batches: the engine's stream over its non-validation part."""
    return e.minibatches(k, rnd, "local", _steps(e, alg, k), alg.fit[k])


def _sgd(e, alg, p, i, rnd, lr):
    """Plain SGD over client i's batches of round rnd; the parameters and mean loss."""
    p, ref = clone(p), 0.0
    batches = _batches(e, alg, i, rnd)
    for idx in batches:
        loss, g = e.loss_and_grad(p, idx)
        p = {k: p[k] - lr * g[k] for k in p}
        ref += loss
    return p, ref / len(batches)


@pytest.mark.parametrize("hyper, dist", [({"init": "independent"}, _l1), (LEGACY, _l2)])
def test_round_by_hand(hyper, dist):
    # round 1 from independent starts: φ_i = θ_i, so the client's own score is 0/0 = 0 and
    # both references give the same formula, with their own distance
    e, alg = _alg(hyper, lr=0.2)
    state = alg.init()
    old = clone(state["params"])
    new, losses = alg.round(clone(state), 1)
    mixing = 0
    for i in range(4):
        own = take(old, i)
        own_loss = _val_loss(e, own, alg.val[i])
        raw = {}
        for j in range(4):
            if j != i:
                theta = take(old, j)
                raw[j] = max(0.0, (own_loss - _val_loss(e, theta, alg.val[i])) / dist(theta, own))
        total = sum(raw.values())
        mixing += total > 0
        w = {j: (v / total if total > 0 else 0.0) for j, v in raw.items()}
        for j in range(4):
            assert float(new["weights"][i, j]) == pytest.approx(w.get(j, 0.0), rel=1e-5)
        mixed = {k: own[k] + sum(w[j] * (take(old, j)[k] - own[k]) for j in w)
                 for k in (W, B)}
        p, ref = _sgd(e, alg, mixed, i, 1, 0.2)
        assert_params_close(take(new["params"], i), p, atol=1e-5)
        assert losses[i] == pytest.approx(ref, rel=1e-5)
        if "previous" in new:
            assert_params_close(take(new["previous"], i), mixed, atol=1e-6)
    assert mixing > 0  # the case mixes something
    assert ("previous" in new) == (hyper.get("reference", "previous") == "previous")
    assert torch.equal(new["affinity"], new["weights"])  # first round: P = w


def test_round_two_by_hand():
    # defaults: shared start, so round 1 is local training; in round 2 every client scores
    # all trained models, its own included, against its pre-training model φ_i (L1)
    e, alg = _alg(lr=0.2)
    state, _ = alg.round(alg.init(), 1)
    assert torch.count_nonzero(state["weights"]) == 0
    prev, old = clone(state["previous"]), clone(state["params"])
    new, losses = alg.round(clone(state), 2)
    mixed_any_self = False
    for i in range(4):
        ref = take(prev, i)
        ref_loss = _val_loss(e, ref, alg.val[i])
        raw = {}
        for c in range(4):
            theta = take(old, c)
            raw[c] = max(0.0, (ref_loss - _val_loss(e, theta, alg.val[i])) / _l1(theta, ref))
        total = sum(raw.values())
        w = {c: (v / total if total > 0 else 0.0) for c, v in raw.items()}
        mixed_any_self |= 0 < w[i] < 1
        for c in range(4):
            assert float(new["weights"][i, c]) == pytest.approx(w[c], rel=1e-5)
        mixed = {k: ref[k] + sum(w[c] * (take(old, c)[k] - ref[k]) for c in w)
                 for k in (W, B)}
        assert_params_close(take(new["previous"], i), mixed, atol=1e-6)
        p, ref_train = _sgd(e, alg, mixed, i, 2, 0.2)
        assert_params_close(take(new["params"], i), p, atol=1e-5)
        assert losses[i] == pytest.approx(ref_train, rel=1e-5)
    assert mixed_any_self  # some client mixes its own trained model with others


# ------------------------------------------------------- reference model, hand-made losses
# Three clients; val loss L(θ) = 2 − Σθ (every entry of W and b), the same for all.
# φ_i = 0 (L = 2) for all; current models: client 0 (Σ = 1, L = 1, L1 distance from 0: 1),
# client 1 (Σ = 3, L = −1, L1 distance 3), client 2 (Σ = −2, L = 4, L1 distance 2).
THETA = [_p([[1.0, 0.0], [0.0, 0.0]], [0.0, 0.0]),
         _p([[0.0, 0.0], [0.0, 0.0]], [0.0, 3.0]),
         _p([[0.0, -2.0], [0.0, 0.0]], [0.0, 0.0])]


def _hand_case(hyper, loss=lambda p: 2.0 - sum(float(v.sum()) for v in p.values())):
    e, alg = _alg(hyper, data=make_data(n_train=(5, 5, 5), n_test=(1, 1, 1)), lr=0.2)
    alg.val_loss = lambda params, client: loss(params)
    state = alg.init()
    for i, theta in enumerate(THETA):
        put(state["params"], i, theta)
    if "previous" in state:
        for i in range(3):
            put(state["previous"], i, _p([[0.0, 0.0], [0.0, 0.0]], [0.0, 0.0]))
    return e, alg, alg.round(state, 2)


def test_own_trained_model_keeps_weight():
    # scores against φ = 0: own/client 0: (2 − 1)/1 = 1, client 1: (2 + 1)/3 = 1,
    # client 2: (2 − 4)/2 = −1, for every client i; so w_i0 = w_i1 = 1/2, w_i2 = 0, and
    # every client moves to 0 + (θ_0 + θ_1)/2. Client 0's own training keeps weight 1/2
    # (before issue 12 a positive download replaced it: w_00 = 0, θ_0 → θ_1).
    e, alg, (state, _) = _hand_case({})
    expected = torch.tensor([[0.5, 0.5, 0.0]] * 3, dtype=torch.float64)
    torch.testing.assert_close(state["weights"], expected)
    mixed = _p([[0.5, 0.0], [0.0, 0.0]], [0.0, 1.5])
    for i in range(3):
        assert_params_close(take(state["previous"], i), mixed, atol=0, rtol=0)
        assert_params_close(take(state["params"], i), _sgd(e, alg, mixed, i, 2, 0.2)[0])
    torch.testing.assert_close(state["affinity"], expected)


def test_signed_affinity_counts_own_score():
    # signed: scores (1, 1, −1) for candidates (0, 1, 2) in every row, |Σ| = 1
    _, _, (state, _) = _hand_case({"affinity": "signed"})
    torch.testing.assert_close(state["affinity"],
                               torch.tensor([[1.0, 1.0, -1.0]] * 3, dtype=torch.float64))


def test_no_positive_score_goes_back_to_previous():
    # L(θ) = 2 + Σθ²: every candidate, the client's own trained model included, is worse
    # than φ = 0 (L = 2), so all weights are 0 and every client restarts from φ = 0
    e, alg, (state, _) = _hand_case({}, loss=lambda p: 2.0 + sum(float((v ** 2).sum())
                                                                   for v in p.values()))
    assert torch.count_nonzero(state["weights"]) == 0
    zero = _p([[0.0, 0.0], [0.0, 0.0]], [0.0, 0.0])
    for i in range(3):
        assert_params_close(take(state["previous"], i), zero, atol=0, rtol=0)
        assert_params_close(take(state["params"], i), _sgd(e, alg, zero, i, 2, 0.2)[0])


def test_legacy_reference_current_by_hand():
    # reference current, L2 (the former behaviour): client 0 (L = 1) scores client 1
    # (2/√10 > 0) and client 2 ((1 − 4)/√5 < 0): θ_0 → θ_1, its training is discarded;
    # client 1 (L = −1) sees only worse models and keeps θ_1; client 2 (L = 4) scores
    # 3/√5 and 5/√13.
    e, alg, (state, _) = _hand_case(LEGACY)
    assert "previous" not in state
    a, b = 3 / math.sqrt(5), 5 / math.sqrt(13)
    expected = torch.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 0.0], [a / (a + b), b / (a + b), 0.0]],
                            dtype=torch.float64)
    torch.testing.assert_close(state["weights"], expected)
    t0, t1, t2 = THETA
    mixed = [t1, t1, {k: t2[k] + (a * (t0[k] - t2[k]) + b * (t1[k] - t2[k])) / (a + b)
                      for k in (W, B)}]
    for i in range(3):
        assert_params_close(take(state["params"], i), _sgd(e, alg, mixed[i], i, 2, 0.2)[0])


def _assert_round_one_is_local_training(e, alg, state, lr):
    """Round 1 mixes nothing (all weights 0) and each client takes its own SGD steps."""
    start = clone(state["params"])
    state, _ = alg.round(state, 1)
    assert torch.count_nonzero(state["weights"]) == 0
    for i in range(4):
        p, _ = _sgd(e, alg, take(start, i), i, 1, lr)
        assert_params_close(take(state["params"], i), p, atol=1e-6)


def test_shared_start_round_one_is_local_training():
    e, alg = _alg(lr=0.2)
    state = alg.init()
    for name in state["params"]:
        assert torch.equal(state["params"][name], state["params"][name][:1].expand_as(
            state["params"][name]))
        assert torch.equal(state["previous"][name], state["params"][name])
    _, independent = _alg({"init": "independent"})
    assert not torch.equal(independent.init()["params"][W][0], independent.init()["params"][W][1])
    _assert_round_one_is_local_training(e, alg, state, lr=0.2)


@pytest.mark.parametrize("hyper", [{"init": "independent"}, LEGACY])
def test_identical_models_are_not_mixed(hyper):
    e, alg = _alg(hyper, lr=0.2)
    state = alg.init()
    for key in ("params", "previous"):
        for name in state.get(key, {}):
            state[key][name][:] = state["params"][name][0]
    _assert_round_one_is_local_training(e, alg, state, lr=0.2)


@pytest.mark.parametrize("hyper", [{}, LEGACY])
def test_weights_rows_and_record(hyper):
    e, alg = _alg(hyper)
    state = alg.init()
    self_weight = 0.0
    log = R.MetricLog()
    alg.record(state, 0, log)
    assert len(log) == 16 and set(log.values) == {0.0}
    for rnd in (1, 2, 3):
        state, _ = alg.round(state, rnd)
        w = state["weights"]
        assert torch.all(w >= 0)
        self_weight += float(torch.diagonal(w).sum())
        for s in w.sum(dim=1).tolist():
            assert s == pytest.approx(1.0) or s == 0.0
        log = R.MetricLog()
        alg.record(state, rnd, log)
        assert set(log.metrics) == {R.WEIGHT}
        got = np.zeros((4, 4))
        for i, j, v in zip(log.clients, log.peers, log.values, strict=True):
            got[i, j] = v
        np.testing.assert_allclose(got, w.numpy())
    # the client's own model is a candidate only with reference: previous
    assert (self_weight > 0) == (hyper.get("reference", "previous") == "previous")


def test_affinity_accumulates():
    _, alg = _alg()
    state = alg.init()
    total = torch.zeros(4, 4, dtype=torch.float64)
    for rnd in (1, 2, 3):
        state, _ = alg.round(state, rnd)
        total += state["weights"]
    torch.testing.assert_close(state["affinity"], total)


def test_signed_affinity_can_go_negative():
    e, alg = _alg({"affinity": "signed", "init": "independent"})
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
                                   e.probs(take(state["params"], k), x))


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
    assert all(torch.equal(back["previous"][k], state["previous"][k]) for k in (W, B))


# ---------------------------------------------------------------------- hyper


def test_parse_hyper_defaults():
    hp = parse_hyper(FedFomo, {})
    assert (hp.val_fraction, hp.downloads, hp.epsilon, hp.epsilon_decay, hp.affinity,
            hp.reference, hp.distance, hp.init) == \
        (0.2, -1, 0.3, 0.05, "clipped", "previous", "l1", "shared")


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
    ({"reference": "last"}, "must be one of"),
    ({"distance": "l2_root"}, "must be one of"),
    ({"init": "global"}, "must be one of"),
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


def test_client_sampling_only_the_sampled_mix_train_and_talk():
    e, alg = _alg(client_fraction=0.5, lr=0.3)
    state, _ = alg.round(alg.init(), 1)
    before = {k: clone(state[k]) for k in ("params", "opt", "previous", "affinity")}
    e.traffic.up[:] = 0
    e.traffic.down[:] = 0
    chosen = e.participants(2)
    others = [k for k in range(4) if k not in chosen]
    assert len(chosen) == 2
    state, losses = alg.round(state, 2)
    assert np.isnan(losses[others]).all() and np.isfinite(losses[chosen]).all()
    for k in others:  # untouched: model, optimiser, φ, affinities, weights row
        assert_params_close(take(state["params"], k), take(before["params"], k),
                            atol=0, rtol=0)
        assert_params_close(take(state["previous"], k), take(before["previous"], k),
                            atol=0, rtol=0)
        assert state["opt"]["step"][k] == before["opt"]["step"][k]
        assert torch.equal(state["affinity"][k], before["affinity"][k])
        assert not state["weights"][k].any()
    for k in chosen:  # trained this round, from a mix of all three others' models
        assert state["opt"]["step"][k] > before["opt"]["step"][k]
    assert (e.traffic.up[others] == 0).all() and (e.traffic.down[others] == 0).all()
    assert e.traffic.up[chosen].tolist() == [e.model_size] * 2
    assert e.traffic.down[chosen].tolist() == [3 * e.model_size] * 2
