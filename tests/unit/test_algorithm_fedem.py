"""FedEM: E-step posteriors and π update by hand, weighted M-step, size-weighted server
average, mixture prediction, logged π, FedAvg equivalence with one component."""

import io
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
from pflrepro.algorithms.fedavg import FedAvg
from pflrepro.algorithms.fedem import FedEM, FedEMHyper, SampleWeighted
from pflrepro.store import results as R
from pflrepro.training import local_training as LT
from pflrepro.training.objective import loss_and_grad
from pflrepro.training.params import put, take

# default tiny data: train sizes (4, 2, 3); labels row % 2, so the training labels are
# client 0: [0, 1, 0, 1], client 1: [0, 1], client 2: [1, 0, 1]
LABELS = {0: [0, 1, 0, 1], 1: [0, 1], 2: [1, 0, 1]}


_alg = algorithm_factory(FedEM)


def _hand_state(alg):
    """Two components with zero weights: h_0 gives p(y=0) = 3/4, h_1 gives 1/2."""
    state = alg.init()
    state["components"][W].zero_()
    state["components"][B].copy_(torch.tensor([[math.log(3.0), 0.0], [0.0, 0.0]]))
    state["pi"][0] = torch.tensor([0.25, 0.75], dtype=torch.float64)
    return state


# q_s by hand: client 0 (π = [1/4, 3/4]):  y=0: [1/4·3/4, 3/4·1/2] ∝ [1, 2] -> [1/3, 2/3]
#                                          y=1: [1/4·1/4, 3/4·1/2] ∝ [1, 6] -> [1/7, 6/7]
#              clients 1, 2 (π uniform):   y=0: [3/4, 1/2] -> [3/5, 2/5]
#                                          y=1: [1/4, 1/2] -> [1/3, 2/3]
Q_HAND = {0: {0: [1 / 3, 2 / 3], 1: [1 / 7, 6 / 7]},
          1: {0: [3 / 5, 2 / 5], 1: [1 / 3, 2 / 3]},
          2: {0: [3 / 5, 2 / 5], 1: [1 / 3, 2 / 3]}}
# π ← mean_s q_s: client 0: [(1/3 + 1/7)/2, (2/3 + 6/7)/2] = [5/21, 16/21]
#                 client 1: [(3/5 + 1/3)/2, (2/5 + 2/3)/2] = [7/15, 8/15]
#                 client 2: [(1/3 + 3/5 + 1/3)/3, ...]   = [19/45, 26/45]
PI_HAND = [[5 / 21, 16 / 21], [7 / 15, 8 / 15], [19 / 45, 26 / 45]]


def _q_hand(k):
    return torch.tensor([Q_HAND[k][y] for y in LABELS[k]], dtype=torch.float64)


# ---------------------------------------------------------------------- init


def test_init_components_from_distinct_seeds():
    e, alg = _alg({"components": 3})
    state = alg.init()
    for m in range(3):
        assert_params_close(take(state["components"], m), e.init_params(m), atol=0, rtol=0)
    assert not torch.equal(state["components"][W][0], state["components"][W][1])
    torch.testing.assert_close(state["pi"], torch.full((3, 3), 1 / 3, dtype=torch.float64))
    assert state["opt"]["step"].shape == (3, 3)  # (client, component)


# ---------------------------------------------------------------------- E-step


def test_posteriors_by_hand():
    _, alg = _alg({"components": 2})
    state = _hand_state(alg)
    for k in range(3):
        q = alg.posteriors(state, k)
        assert q.dtype == torch.float64
        torch.testing.assert_close(q, _q_hand(k), atol=1e-6, rtol=0)


def test_round_updates_pi_by_hand_and_rows_sum_to_one():
    _, alg = _alg({"components": 2}, lr=0.5)
    state, _ = alg.round(_hand_state(alg), 1)
    torch.testing.assert_close(state["pi"], torch.tensor(PI_HAND, dtype=torch.float64),
                               atol=1e-6, rtol=0)
    for rnd in (2, 3):
        state, _ = alg.round(state, rnd)
        torch.testing.assert_close(state["pi"].sum(1), torch.ones(3, dtype=torch.float64))
        assert bool((state["pi"] >= 0).all())


def test_posteriors_stable_for_huge_losses():
    # losses ~1e4: exp(-loss) underflows, the log-space softmax does not
    _, alg = _alg({"components": 2})
    state = _hand_state(alg)
    state["components"][B].copy_(torch.tensor([[1e4, 0.0], [0.0, 1e4]]))
    q = alg.posteriors(state, 0)  # labels 0, 1, 0, 1
    assert torch.isfinite(q).all()
    torch.testing.assert_close(q, torch.tensor([[1.0, 0.0], [0.0, 1.0]] * 2,
                                               dtype=torch.float64))


# ---------------------------------------------------------------------- M-step / server


def test_one_round_mstep_and_size_weighted_average_by_hand():
    # one SGD step per component: θ_m^(k) = θ_m − lr ∇ Σ_{s∈batch} q_s(m) ℓ_s / |batch|,
    # then θ_m ← (4 θ_m^(0) + 2 θ_m^(1) + 3 θ_m^(2)) / 9
    lr = 0.5
    e, alg = _alg({"components": 2}, lr=lr, local_steps=1)
    state = _hand_state(alg)
    start = clone(state["components"])
    state, losses = alg.round(state, 1)
    expected_loss = np.zeros(3)
    for m in range(2):
        locals_ = []
        for k in range(3):
            (batch,) = e.minibatches(k, 1, f"fedem_{m}", 1)
            rows = (batch.unsqueeze(1) == e.data.train[k]).int().argmax(1)
            sw = _q_hand(k)[rows, m].float() / len(batch)
            loss, g = manual_loss_and_grad(take(start, m), e.data.x[batch],
                                           e.data.y[batch], sample_weight=sw)
            locals_.append({n: start[n][m] - lr * g[n] for n in (W, B)})
            expected_loss[k] += loss
        for n in (W, B):
            avg = (4 * locals_[0][n] + 2 * locals_[1][n] + 3 * locals_[2][n]) / 9
            torch.testing.assert_close(state["components"][n][m], avg, atol=1e-6, rtol=1e-5)
    np.testing.assert_allclose(losses, expected_loss, rtol=1e-5)


def test_optimiser_state_kept_per_client_and_component():
    e, alg = _alg({"components": 2}, optimizer="adam", lr=0.05, local_steps=2)
    state = alg.init()
    for rnd in (1, 2):
        state, _ = alg.round(state, rnd)
    assert state["opt"]["step"].tolist() == [[4.0, 4.0]] * 3
    # the Adam moments differ between clients and between components
    m_w = state["opt"][f"m.{W}"]
    assert not torch.allclose(m_w[0, 0], m_w[1, 0]) and not torch.allclose(m_w[0, 0], m_w[0, 1])


def _shared_purpose(e):
    """Make the run's batches ignore the purpose (so FedAvg and FedEM see the same)."""
    original = e.context.minibatches
    e.context.minibatches = lambda client, rnd, purpose, steps, pool=None, batch_size=None: (
        original(client, rnd, "shared", steps, pool, batch_size))


@pytest.mark.parametrize("optimizer,lr", [("sgd", 0.3), ("adam", 0.05)])
def test_one_component_is_fedavg(optimizer, lr):
    # M = 1: q_s = 1, the weighted mean loss is the plain mean, π = [1]; from the same
    # start model and the same batches, FedEM's component is FedAvg's global model.
    # FedAvg draws batches with purpose 'local', FedEM with 'fedem_0', so both engines
    # are made to ignore the purpose; FedEM's component 0 gets FedAvg's start model.
    training = dict(optimizer=optimizer, lr=lr, local_epochs=2)
    ea, eb = make_engine(**training), make_engine(**training)
    _shared_purpose(ea)
    _shared_purpose(eb)
    avg, em = FedAvg(ea, parse_hyper(FedAvg, {})), FedEM(eb, parse_hyper(FedEM,
                                                                         {"components": 1}))
    sa, sb = avg.init(), em.init()
    put(sb["components"], 0, sa["global"])
    for rnd in (1, 2, 3):
        assert torch.equal(em.posteriors(sb, 0), torch.ones(4, 1, dtype=torch.float64))
        sa, la = avg.round(sa, rnd)
        sb, lb = em.round(sb, rnd)
        assert_params_close(take(sb["components"], 0), sa["global"])
        np.testing.assert_allclose(lb, la, rtol=1e-5)
        assert sb["pi"].tolist() == [[1.0]] * 3
        x = ea.data.x
        for k in range(3):
            torch.testing.assert_close(em.predict(sb, k, x, rnd), avg.predict(sa, k, x, rnd))


def test_batch_purposes_differ_per_component():
    e, _ = _alg()
    assert not torch.equal(torch.cat(e.minibatches(0, 1, "fedem_0", 3)),
                           torch.cat(e.minibatches(0, 1, "fedem_1", 3)))


# ---------------------------------------------------------------------- predict / record


def test_predict_is_pi_weighted_mixture():
    e, alg = _alg({"components": 3}, lr=0.5)
    state, _ = alg.round(alg.init(), 1)
    x = e.data.x
    probs = [e.probs(take(state["components"], m), x) for m in range(3)]
    for k in range(3):
        expected = sum(float(state["pi"][k, m]) * probs[m] for m in range(3))
        got = alg.predict(state, k, x, 1)
        torch.testing.assert_close(got, expected)
        torch.testing.assert_close(got.sum(1), torch.ones(len(x)))


def test_record_logs_pi_per_component():
    _, alg = _alg({"components": 2}, lr=0.5)
    state, _ = alg.round(_hand_state(alg), 1)
    log = R.MetricLog()
    alg.record(state, 1, log)
    assert len(log) == 6
    assert set(log.metrics) == {R.WEIGHT} and set(log.rounds) == {1}
    assert list(zip(log.clients, log.peers, strict=True)) == \
        [(k, m) for k in range(3) for m in range(2)]
    np.testing.assert_allclose(np.array(log.values).reshape(3, 2), PI_HAND, atol=1e-6)


# ---------------------------------------------------------------------- determinism / io


def test_round_is_deterministic():
    runs = []
    for seed in (4, 4, 5):
        _, alg = _alg({"components": 2}, seed=seed, optimizer="adam", lr=0.05)
        state = alg.init()
        for rnd in (1, 2):
            state, losses = alg.round(state, rnd)
        runs.append((state, losses))
    (a, la), (b, lb), (c, _) = runs
    assert torch.equal(a["components"][W], b["components"][W])
    assert torch.equal(a["pi"], b["pi"]) and la.tolist() == lb.tolist()
    assert not torch.equal(a["components"][W], c["components"][W])


def test_state_checkpoints_and_resumes():
    _, alg = _alg({"components": 2}, optimizer="adam", lr=0.05)
    state, _ = alg.round(alg.init(), 1)
    buf = io.BytesIO()
    torch.save(state, buf)
    buf.seek(0)
    loaded = torch.load(buf, weights_only=True)
    a, _ = alg.round(clone(state), 2)
    b, _ = alg.round(loaded, 2)
    assert torch.equal(a["components"][W], b["components"][W])
    assert torch.equal(a["pi"], b["pi"])


def test_uneven_data_runs():
    e = make_engine(make_data(n_train=(5, 1, 7), n_test=(1, 1, 1), num_classes=3,
                              shape=(1, 2, 2)), batch_size=3)
    alg = FedEM(e, parse_hyper(FedEM, {"components": 2}))
    state, losses = alg.round(alg.init(), 1)
    assert np.isfinite(losses).all()
    torch.testing.assert_close(state["pi"].sum(1), torch.ones(3, dtype=torch.float64))


# ---------------------------------------------------------------------- hyperparameters


def test_parse_hyper_defaults():
    assert parse_hyper(FedEM, {}) == FedEMHyper(components=4)
    assert parse_hyper(FedEM, {"components": 1}).components == 1


@pytest.mark.parametrize("bad", [
    {"components": 0}, {"components": -2}, {"components": 1.5}, {"components": True},
    {"components": "4"}, {"M": 4}, {"n_components": 4},
])
def test_parse_hyper_rejects(bad):
    with pytest.raises(ValueError):
        parse_hyper(FedEM, bad)


def test_hyper_validates_direct_construction():
    with pytest.raises(ValueError, match="components"):
        FedEMHyper(components=0)


def test_trains_through_the_one_path_and_vmap_equals_loop(monkeypatch):
    """Each component's M-step is one ``local_training.train`` call; vmap ≈ loop."""
    from pflrepro.training import local_training as LT

    calls = []
    real = LT.train

    def spy(engine, params, opt_state, clients, rnd, purpose, *args, **kwargs):
        calls.append((purpose, kwargs["path"]))
        return real(engine, params, opt_state, clients, rnd, purpose, *args, **kwargs)

    monkeypatch.setattr(LT, "train", spy)
    out = {}
    for mode in ("loop", "vmap"):
        e, alg = _alg({"components": 2}, optimizer="adam", lr=0.05, client_training=mode)
        state = alg.init()
        state, losses = alg.round(state, 1)
        out[mode] = (state, losses)
    assert calls == [("fedem_0", "loop"), ("fedem_1", "loop"), ("fedem_0", "vmap"),
                     ("fedem_1", "vmap")]
    (sv, lv), (sl, ll) = out["vmap"], out["loop"]
    np.testing.assert_allclose(lv, ll, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(sv["pi"], sl["pi"])
    for n in sl["components"]:
        torch.testing.assert_close(sv["components"][n], sl["components"][n], rtol=1e-5,
                                   atol=1e-6)


# ------------------------------------------------------------ the objective: SampleWeighted
def _row_weights(e, seed=0):
    """Per client, a weight in [0, 1) for every data row (others' rows get weights too)."""
    gen = torch.Generator().manual_seed(seed)
    return torch.rand(e.num_clients, len(e.data.x), generator=gen)


@pytest.mark.parametrize("model", sorted(MODELS))
@pytest.mark.parametrize("opt", sorted(OPTIMISERS))
def test_sample_weighted_vmap_equals_loop(model, opt):
    e = engine_for(model, opt)
    start = e.client_init()
    looped = both_paths(e, start["params"], start["opt"],
                        SampleWeighted(_row_weights(e), per_client=True))
    # the weights matter: the plain mean loss moves the models elsewhere
    plain = train(e, start["params"], start["opt"], list(range(e.num_clients)), LT.LOOP, None)
    assert any(not torch.allclose(plain[0][n], looped[0][n]) for n in plain[0])


def test_sample_weighted_loss_by_hand_and_zero_weights_freeze_sgd():
    e = engine_for("mlp", "sgd")
    start = e.client_init()
    k = 2
    w = _row_weights(e)[k]
    (idx,) = e.minibatches(k, 1, "local", 1)
    # the loss: Σ_s w_s ℓ_s / |batch|, from per-sample losses computed apart
    p = take(start["params"], k)
    each = torch.stack([e.loss_and_grad(p, idx[j:j + 1])[0] * torch.ones(())
                        for j in range(len(idx))])
    batch = LT.client_batch(e.context, idx)
    loss, _ = loss_and_grad(SampleWeighted(w), e.model, p, batch, [], {})
    assert float(loss) == pytest.approx(float((w[idx] * each).sum() / len(idx)), rel=1e-5)
    # all-ones weights: the mean loss and gradient
    mean_loss, mean_grad = e.loss_and_grad(p, idx)
    ones_loss, ones_grad = loss_and_grad(SampleWeighted(torch.ones(len(e.data.x))), e.model,
                                         p, batch, [], {})
    assert float(ones_loss) == pytest.approx(mean_loss, rel=1e-6)
    assert_params_close(ones_grad, mean_grad, atol=1e-7, rtol=1e-5)
    # zero weights for client 1 (SGD): no gradient, its model stays where it was
    weights = _row_weights(e)
    weights[1] = 0.0
    for path in LT.PATHS:
        out = train(e, rows_of(start["params"], [0, 1]), rows_of(start["opt"], [0, 1]),
                    [0, 1], path, SampleWeighted(weights[:2], per_client=True))
        assert_params_close(take(out[0], 1), take(start["params"], 1), atol=0, rtol=0)
        assert out[2][1] == 0.0
        assert any(not torch.equal(take(out[0], 0)[n], take(start["params"], 0)[n])
                   for n in start["params"])


def test_shared_weights_equal_stacked_weights():
    e = engine_for("mlp", "adam")
    start = e.client_init()
    w = _row_weights(e)[0]
    clients = list(range(e.num_clients))
    shared = both_paths(e, start["params"], start["opt"], SampleWeighted(w))
    stacked = train(e, start["params"], start["opt"], clients, LT.VMAP,
                    SampleWeighted(w.unsqueeze(0).repeat(e.num_clients, 1), per_client=True))
    assert_same(shared, stacked)
