"""HeurFedAMP: the cosine-softmax attention (eq. 8) by hand, FedAMP's client step
reused unchanged, and hyperparameters, on tiny linear-model engines."""

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
    manual_loss_and_grad,
)

from pflrepro.algorithms.base import parse_hyper
from pflrepro.algorithms.fedamp import FedAMP, flatten, squared_distances
from pflrepro.algorithms.heurfedamp import HeurFedAMP, HeurFedAMPHyper, heuristic_attention
from pflrepro.algorithms.local import Local
from pflrepro.store import results as R
from pflrepro.training.params import take

_alg = algorithm_factory(HeurFedAMP)


def _by_hand(flat, self_attention, sigma):
    """eq. 8 with explicit loops and math.exp."""
    k = len(flat)

    def cos(a, b):
        return sum(x * y for x, y in zip(a, b, strict=True)) / (
            math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))

    out = [[0.0] * k for _ in range(k)]
    for i in range(k):
        z = sum(math.exp(sigma * cos(flat[i], flat[h])) for h in range(k) if h != i)
        for j in range(k):
            out[i][j] = self_attention if i == j else \
                (1 - self_attention) * math.exp(sigma * cos(flat[i], flat[j])) / z
    return torch.tensor(out, dtype=torch.float64)


def test_attention_by_hand_three_models():
    # w0 = (1, 0), w1 = (1, 1), w2 = (0, 3): cos01 = cos12 = 1/√2, cos02 = 0; σ = 2
    flat = torch.tensor([[1.0, 0.0], [1.0, 1.0], [0.0, 3.0]], dtype=torch.float64)
    xi = heuristic_attention(flat, self_attention=0.4, sigma=2.0)
    e = math.exp(2 / math.sqrt(2))
    expected = torch.tensor([
        [0.4, 0.6 * e / (e + 1), 0.6 * 1 / (e + 1)],
        [0.6 * 0.5, 0.4, 0.6 * 0.5],  # client 1 is equally similar to 0 and 2
        [0.6 * 1 / (e + 1), 0.6 * e / (e + 1), 0.4],
    ], dtype=torch.float64)
    torch.testing.assert_close(xi, expected)
    torch.testing.assert_close(xi.sum(1), torch.ones(3, dtype=torch.float64))
    torch.testing.assert_close(torch.diagonal(xi), torch.full((3,), 0.4, dtype=torch.float64))
    assert bool((xi >= 0).all())


def test_attention_on_engine_models_matches_loops():
    e, alg = _alg({"self_attention": 0.3, "sigma": 5.0})
    flat = flatten(alg.init()["params"])
    xi = alg.attention(flat, squared_distances(flat))
    torch.testing.assert_close(xi, _by_hand(flat.tolist(), 0.3, 5.0))


def test_attention_is_scale_invariant_unlike_fedamp():
    # cosine ignores the norm: scaling one model leaves ξ unchanged
    flat = torch.tensor([[1.0, 0.2], [0.5, 1.0], [-0.3, 1.0]], dtype=torch.float64)
    scaled = flat.clone()
    scaled[2] *= 7.0
    torch.testing.assert_close(heuristic_attention(flat, 0.5, 10.0),
                               heuristic_attention(scaled, 0.5, 10.0))


def test_self_attention_extremes():
    flat = torch.randn(4, 5, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    torch.testing.assert_close(heuristic_attention(flat, 1.0, 10.0),
                               torch.eye(4, dtype=torch.float64))
    xi = heuristic_attention(flat, 0.0, 10.0)
    torch.testing.assert_close(torch.diagonal(xi), torch.zeros(4, dtype=torch.float64))
    torch.testing.assert_close(xi.sum(1), torch.ones(4, dtype=torch.float64))


# ---------------------------------------------------------------------- client step


def test_client_step_is_fedamps():
    assert issubclass(HeurFedAMP, FedAMP)
    for method in ("terms", "round", "predict", "record"):
        assert getattr(HeurFedAMP, method) is getattr(FedAMP, method)


def test_server_step_is_alpha_uncapped():
    # ξ of eq. 8 is convex for any α: FedAMP's cap (here far below α) does not apply,
    # and the client's coefficient stays λ/α
    e, alg = _alg({"alpha": 100.0, "lam": 50.0, "sigma": 3.0})
    flat = flatten(e.client_init()["params"])
    assert alg.server_step(flat, squared_distances(flat)) == 100.0
    fed = FedAMP(e, parse_hyper(FedAMP, {"alpha": 100.0, "sigma": 3.0}))
    assert fed.server_step(flat, squared_distances(flat)) < 100.0


def test_round_is_proximal_sgd_from_cloud_model():
    lr, lam, alpha = 0.5, 1.0, 0.5
    e, alg = _alg({"lam": lam, "alpha": alpha, "self_attention": 0.6, "sigma": 3.0},
                  lr=lr, local_steps=3)
    state = alg.init()
    start = clone(state["params"])
    xi = _by_hand(flatten(start).tolist(), 0.6, 3.0)
    state, _ = alg.round(state, 1)
    torch.testing.assert_close(state["xi"], xi)
    for k in range(3):
        u = {n: sum(float(xi[k, j]) * start[n][j] for j in range(3)) for n in (W, B)}
        p = clone(u)
        for idx in e.minibatches(k, 1, "local", 3):
            _, g = manual_loss_and_grad(p, e.data.x[idx], e.data.y[idx])
            p = {n: p[n] - lr * (g[n] + lam / alpha * (p[n] - u[n])) for n in p}
        assert_params_close(take(state["params"], k), p)


def test_full_self_attention_without_pull_is_local_training():
    # Local draws a model per client, so start HeurFedAMP that way too
    e, alg = _alg({"self_attention": 1.0, "lam": 0.0, "init": "independent"}, lr=0.3)
    local = Local(e, parse_hyper(Local, {}))
    sa, sl = alg.init(), local.init()
    for rnd in (1, 2):
        sa, la = alg.round(sa, rnd)
        sl, ll = local.round(sl, rnd)
        assert la.tolist() == ll.tolist()
    assert_params_close(sa["params"], sl["params"], atol=0, rtol=0)


def test_record_logs_rows_summing_to_one():
    _, alg = _alg(lr=0.5)
    state, _ = alg.round(alg.init(), 1)
    log = R.MetricLog()
    alg.record(state, 1, log)
    assert set(log.metrics) == {R.WEIGHT, R.MODEL_DISTANCE}
    matrix = np.array(log.values)[np.array(log.metrics) == R.WEIGHT].reshape(3, 3)
    np.testing.assert_allclose(np.diag(matrix), 0.5)
    np.testing.assert_allclose(matrix.sum(1), 1.0, atol=1e-12)


def test_deterministic():
    _, a = _alg(seed=5, lr=0.5)
    _, b = _alg(seed=5, lr=0.5)
    sa, sb = a.init(), b.init()
    for rnd in (1, 2):
        sa, la = a.round(sa, rnd)
        sb, lb = b.round(sb, rnd)
        assert la.tolist() == lb.tolist()
    assert torch.equal(sa["params"][W], sb["params"][W]) and torch.equal(sa["xi"], sb["xi"])


def test_one_client_raises():
    _, alg = _alg(data=make_data(n_train=(4,), n_test=(2,)))
    with pytest.raises(ValueError, match="at least 2 clients"):
        alg.init()


# ---------------------------------------------------------------------- hyperparameters


def test_parse_hyper_defaults_and_coercion():
    assert parse_hyper(HeurFedAMP, {}) == HeurFedAMPHyper(lam=1.0, alpha=1.0, sigma=50.0,
                                                          self_attention=0.5)
    hp = parse_hyper(HeurFedAMP, {"self_attention": 1, "sigma": 2})
    assert hp.self_attention == 1.0 and isinstance(hp.self_attention, float)


@pytest.mark.parametrize("bad", [
    {"self_attention": 1.1}, {"self_attention": -0.1}, {"sigma": 0.0}, {"alpha": 0.0},
    {"lam": -1.0}, {"self_attention": "0.5"}, {"sigma": False}, {"xi_ii": 0.5},
])
def test_parse_hyper_rejects(bad):
    with pytest.raises(ValueError):
        parse_hyper(HeurFedAMP, bad)
