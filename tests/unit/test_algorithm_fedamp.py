"""FedAMP: attention weights ξ, cloud models u_i, the proximal client step (which must
act), prediction, logging and hyperparameters, on tiny linear-model engines."""

import io
import math

import numpy as np
import pytest
import torch
from _alg_helpers import algorithm_factory
from _fl_helpers import B, W, assert_params_close, clone, manual_loss_and_grad

from pflrepro.algorithms.base import parse_hyper
from pflrepro.algorithms.fedamp import (
    FedAMP,
    FedAMPHyper,
    capped_step,
    fedamp_attention,
    flatten,
    mix,
    squared_distances,
)
from pflrepro.store import results as R
from pflrepro.training.params import stack, take

_alg = algorithm_factory(FedAMP)


def _zero_data_grad(e):
    """Make the run's data loss flat: only the proximal term moves the model."""
    def loss_and_grad(params, idx, sample_weight=None):
        return 0.0, {k: torch.zeros_like(v) for k, v in params.items()}
    e.context.loss_and_grad = loss_and_grad


def _manual_prox_sgd(e, start, u, client, rnd, lr, coef):
    """SGD on mean CE + (coef/2)‖w − u‖² over the engine's batches, written out."""
    p = clone(start)
    for idx in e.minibatches(client, rnd, "local", e.steps_per_round(client)):
        _, g = manual_loss_and_grad(p, e.data.x[idx], e.data.y[idx])
        p = {n: p[n] - lr * (g[n] + coef * (p[n] - u[n])) for n in p}
    return p


def _manual_cloud(params, xi):
    k = xi.shape[0]
    return [{n: sum(float(xi[i, j]) * params[n][j] for j in range(k)) for n in (W, B)}
            for i in range(k)]


# ---------------------------------------------------------------------- attention


def test_squared_distances_are_each_rows_differences_bit_for_bit():
    # each pair computed once and mirrored: the same sums as every row's K differences
    flat = torch.randn(6, 3001, generator=torch.Generator().manual_seed(3),
                       dtype=torch.float64)
    before = flat.clone()
    d = squared_distances(flat)
    rows = torch.stack([((flat - flat[i]) ** 2).sum(dim=1) for i in range(6)])
    assert torch.equal(d, rows)
    assert torch.equal(d, d.T) and torch.equal(torch.diagonal(d), torch.zeros(6, dtype=d.dtype))
    assert torch.equal(flat, before)  # squared in a copy, the models untouched
    assert squared_distances(flat[:1]).tolist() == [[0.0]]


def test_flatten_is_each_clients_parameters_in_name_order_in_float64():
    stacked = {"b": torch.tensor([[1.5], [2.5]]),
               "a": torch.tensor([[[1.0, 2.0]], [[3.0, 4.0]]])}
    flat = flatten(stacked)
    assert flat.dtype == torch.float64
    assert flat.tolist() == [[1.0, 2.0, 1.5], [3.0, 4.0, 2.5]]


def test_attention_by_hand():
    # w0 = (0, 0), w1 = (1, 0), w2 = (0, 2): d² = 1 (0-1), 4 (0-2), 5 (1-2); σ = 2, α = 1
    flat = torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 2.0]], dtype=torch.float64)
    torch.testing.assert_close(squared_distances(flat), torch.tensor(
        [[0.0, 1.0, 4.0], [1.0, 0.0, 5.0], [4.0, 5.0, 0.0]], dtype=torch.float64))
    xi = fedamp_attention(flat, alpha=1.0, sigma=2.0)

    def a(d2):  # α · A′(d²) = α e^{−d²/σ}/σ
        return math.exp(-d2 / 2) / 2

    off = [[None, a(1), a(4)], [a(1), None, a(5)], [a(4), a(5), None]]
    for i in range(3):
        for j in range(3):
            if i != j:
                assert float(xi[i, j]) == pytest.approx(off[i][j], rel=1e-12)
        others = sum(v for v in off[i] if v is not None)
        assert float(xi[i, i]) == pytest.approx(1 - others, rel=1e-12)
    torch.testing.assert_close(xi.sum(1), torch.ones(3, dtype=torch.float64))
    torch.testing.assert_close(xi, xi.T)  # symmetric distances, symmetric weights
    # α scales the off-diagonal weights linearly
    xi2 = fedamp_attention(flat, alpha=0.5, sigma=2.0)
    off_mask = ~torch.eye(3, dtype=torch.bool)
    torch.testing.assert_close(xi2[off_mask], 0.5 * xi[off_mask])


def test_per_parameter_distance_by_hand():
    # distance 'mean': x = ‖w_i − w_j‖² / P. w0 = (0, 0), w1 = (2, 0): ‖·‖² = 4, P = 2, x = 2
    flat = torch.tensor([[0.0, 0.0], [2.0, 0.0]], dtype=torch.float64)
    xi = fedamp_attention(flat, alpha=0.5, sigma=2.0, per_parameter=True)
    a = 0.5 * math.exp(-2 / 2) / 2
    torch.testing.assert_close(xi, torch.tensor([[1 - a, a], [a, 1 - a]], dtype=torch.float64))


def test_per_parameter_sigma_does_not_change_with_model_size():
    # the same models written twice over (P -> 2P, ‖·‖² doubles): equal ξ per parameter,
    # different ξ with the paper's total distance
    gen = torch.Generator().manual_seed(0)
    flat = torch.randn(4, 5, generator=gen, dtype=torch.float64) * 0.1
    twice = torch.cat([flat, flat], dim=1)
    mean = [fedamp_attention(f, 0.01, 0.05, per_parameter=True) for f in (flat, twice)]
    torch.testing.assert_close(mean[0], mean[1])
    total = [fedamp_attention(f, 0.01, 0.5) for f in (flat, twice)]
    assert not torch.allclose(total[0], total[1])


def test_distance_is_over_all_parameters():
    e, _ = _alg()
    params = e.client_init()["params"]
    flat = flatten(params)
    assert flat.shape == (3, 2 * 2 + 2) and flat.dtype == torch.float64
    d = squared_distances(flat)
    for i in range(3):
        for j in range(3):
            by_hand = sum(float(((params[n][i] - params[n][j]) ** 2).sum()) for n in (W, B))
            assert float(d[i, j]) == pytest.approx(by_hand, rel=1e-6, abs=1e-12)


def test_negative_self_weight_raises():
    same = torch.zeros(4, 3, dtype=torch.float64)  # identical models: ξ_ij = α/σ each
    with pytest.raises(ValueError, match=r"alpha .* too large .* sigma/\(K − 1\) = 0.6667"):
        fedamp_attention(same, alpha=1.0, sigma=2.0)  # Σ_j ξ_ij = 3/2 > 1
    xi = fedamp_attention(same, alpha=2.0 / 3.0, sigma=2.0)  # α = σ/(K − 1): ξ_ii = 0
    torch.testing.assert_close(torch.diagonal(xi), torch.zeros(4, dtype=torch.float64),
                               atol=1e-12, rtol=0)
    torch.testing.assert_close(xi.sum(1), torch.ones(4, dtype=torch.float64))


def test_fixed_step_round_raises_instead_of_clipping():
    # tiny linear models are close (d² < 1): α/σ · (K − 1) = 1.5 makes ξ_ii < 0
    _, alg = _alg({"sigma": 10.0, "alpha": 7.5, "step": "fixed"})
    with pytest.raises(ValueError, match="ξ_ii"):
        alg.round(alg.init(), 1)


def test_capped_step_by_hand():
    # two groups of two, 1 parameter: w = (0, 0, 10, 10), σ = 1: A′ = 1 within (d² = 0),
    # e^{−100} across. Σ_{j≠i} A′ = 1 + 2e^{−100}: the cap is 1/(1 + 2e^{−100})
    flat = torch.tensor([[0.0], [0.0], [10.0], [10.0]], dtype=torch.float64)
    cap = 1.0 / (1.0 + 2.0 * math.exp(-100.0))
    assert capped_step(flat, alpha=5.0, sigma=1.0) == pytest.approx(cap, rel=1e-15)
    assert capped_step(flat, alpha=0.3, sigma=1.0) == 0.3   # below the cap: α itself
    xi = fedamp_attention(flat, capped_step(flat, 5.0, 1.0), 1.0)
    assert float(xi[0, 1]) == pytest.approx(1.0) and float(xi[0, 0]) == pytest.approx(0.0)
    # identical models: the cap is σ/(K − 1), ξ_ii = 0 and u_i = w_i for any weights
    same = torch.zeros(4, 3, dtype=torch.float64)
    assert capped_step(same, alpha=1.0, sigma=2.0) == pytest.approx(2.0 / 3.0)


def test_capped_round_keeps_xi_convex_and_pulls_with_lambda_over_the_step():
    # the fixed step raises here (above); the capped one (default) mixes convexly
    e, alg = _alg({"sigma": 10.0, "alpha": 7.5, "lam": 7.5})
    assert alg.hp.step == "capped"
    state = alg.init()
    flat = flatten(state["params"])
    step = alg.server_step(flat, squared_distances(flat))
    assert step < 7.5
    new, _ = alg.round(state, 1)
    xi = new["xi"]
    assert float(torch.diagonal(xi).min()) == pytest.approx(0.0, abs=1e-12)
    assert bool((xi >= -1e-12).all())
    torch.testing.assert_close(xi.sum(1), torch.ones(3, dtype=torch.float64))
    # eq. 6's coefficient is λ/α_k, the round's step, not λ/α
    (term,) = alg.terms(mix(state["params"], xi), step)
    assert term.coef == pytest.approx(7.5 / step)


def test_untied_alpha_expresses_a_block_the_tied_reading_cannot():
    # 8 clients, two groups of 4 at distance 0 within and 100 across (σ = 1): the block
    # ξ (1/4 on every group member, itself included) is α/σ = 1/4; α = σ/K caps every
    # peer at 1/K = 1/8
    from pflrepro.tuning import tied_params

    flat = torch.tensor([[0.0]] * 4 + [[10.0]] * 4, dtype=torch.float64)
    block = torch.block_diag(*[torch.full((4, 4), 0.25, dtype=torch.float64)] * 2)
    untied = tied_params("fedamp", {"sigma": 1.0, "alpha_ratio": 0.25}, 8, {})
    assert untied == {"sigma": 1.0, "alpha": 0.25, "lam": 0.25}
    torch.testing.assert_close(fedamp_attention(flat, untied["alpha"], 1.0), block)
    tied = tied_params("fedamp", {"sigma": 1.0}, 8, {})
    assert tied["alpha"] == 1.0 / 8
    xi = fedamp_attention(flat, tied["alpha"], 1.0)
    off = ~torch.eye(8, dtype=torch.bool)
    assert float(xi[off].max()) == pytest.approx(1.0 / 8)
    assert float((xi - block).abs().max()) == pytest.approx(0.625 - 0.25)


# ---------------------------------------------------------------------- client step


@pytest.mark.parametrize("steps", [1, 3])
def test_proximal_step_moves_towards_u_exactly(steps):
    # flat data loss: w_t − u = (1 − lr λ/α)^t (w_0 − u); detaching or dropping the
    # proximal term would leave w unchanged
    lr, lam, alpha = 0.1, 1.0, 0.5
    e, alg = _alg({"lam": lam, "alpha": alpha}, lr=lr, local_steps=steps)
    _zero_data_grad(e)
    params = e.client_init()["params"]
    w, u = take(params, 0), take(params, 1)
    new, _, _ = e.train_client(w, e.init_opt(w), 0, 1,
                               terms=[t.row(0) for t in alg.terms(stack(u, 1))])
    factor = (1 - lr * lam / alpha) ** steps
    expected = {n: u[n] + factor * (w[n] - u[n]) for n in (W, B)}
    assert_params_close(new, expected)
    if steps == 1:  # one step moves by exactly lr·(λ/α)(w − u)
        assert_params_close({n: w[n] - new[n] for n in (W, B)},
                            {n: lr * lam / alpha * (w[n] - u[n]) for n in (W, B)})
    assert not torch.allclose(new[W], w[W])


def test_round_is_proximal_sgd_from_cloud_model():
    # full round: u_i = Σ_j ξ_ij w_j, then SGD on CE + λ/(2α)‖w − u_i‖² from u_i
    lr, lam, alpha = 0.5, 2.0, 1.0
    e, alg = _alg({"lam": lam, "alpha": alpha, "sigma": 4.0}, lr=lr, local_steps=4)
    state = alg.init()
    start = clone(state["params"])
    xi = fedamp_attention(flatten(start), alpha, 4.0)
    state, losses = alg.round(state, 1)
    torch.testing.assert_close(state["xi"], xi)
    clouds = _manual_cloud(start, xi)
    for k in range(3):
        expected = _manual_prox_sgd(e, clouds[k], clouds[k], k, 1, lr, lam / alpha)
        assert_params_close(take(state["params"], k), expected)
        # without the proximal term the result differs: the term really acts
        plain = _manual_prox_sgd(e, clouds[k], clouds[k], k, 1, lr, 0.0)
        assert not torch.allclose(plain[W], expected[W], atol=1e-5)
    assert np.all(np.isfinite(losses))


def test_lam_zero_is_local_training_from_cloud_model():
    lr = 0.3
    e, alg = _alg({"lam": 0.0, "sigma": 4.0, "alpha": 1.0}, lr=lr)
    state = alg.init()
    start = clone(state["params"])
    state, losses = alg.round(state, 1)
    clouds = mix(start, fedamp_attention(flatten(start), 1.0, 4.0))
    for k in range(3):
        u = take(clouds, k)
        assert_params_close(take(state["params"], k), _manual_prox_sgd(e, u, u, k, 1, lr, 0.0))
        ref, _, loss = e.train_client(u, e.init_opt(u), k, 1)
        assert_params_close(take(state["params"], k), ref, atol=0, rtol=0)
        assert losses[k] == pytest.approx(loss)


def test_cloud_models_are_attention_mixtures():
    e, _ = _alg()
    params = e.client_init()["params"]
    xi = torch.tensor([[0.5, 0.3, 0.2], [0.1, 0.8, 0.1], [0.0, 0.25, 0.75]],
                      dtype=torch.float64)
    got = mix(params, xi)
    for k, expected in enumerate(_manual_cloud(params, xi)):
        assert_params_close(take(got, k), expected)
        assert got[W].dtype == torch.float32


# ---------------------------------------------------------------------- state / predict / record


def test_init_one_shared_model():
    # default (reference implementations): every client starts from the same seeded model
    e, alg = _alg()
    state = alg.init()
    for k in range(3):
        assert_params_close(take(state["params"], k), e.init_params(), atol=0, rtol=0)
    assert torch.isnan(state["xi"]).all()
    # so the first round's ξ is the zero-distance one: every peer α/σ
    hp = alg.hp
    flat = flatten(state["params"])
    xi = alg.attention(flat, squared_distances(flat))
    off = ~torch.eye(3, dtype=torch.bool)
    torch.testing.assert_close(xi[off], torch.full((6,), hp.alpha / hp.sigma,
                                                     dtype=torch.float64))


def test_init_clients_own_models():
    e, alg = _alg({"init": "independent"})
    state = alg.init()
    for k in range(3):
        assert_params_close(take(state["params"], k), e.init_params(k), atol=0, rtol=0)
    assert torch.isnan(state["xi"]).all()
    log = R.MetricLog()
    alg.record(state, 0, log)
    assert len(log) == 0


def test_predict_is_own_model():
    e, alg = _alg(lr=0.5)
    state, _ = alg.round(alg.init(), 1)
    x = e.data.x
    for k in range(3):
        torch.testing.assert_close(alg.predict(state, k, x, 1),
                                   e.probs(take(state["params"], k), x))


def test_record_logs_xi_used_in_round():
    e, alg = _alg({"sigma": 4.0, "alpha": 1.0, "distance": "sum", "init": "independent"},
                  lr=0.5)
    state = alg.init()
    xi1 = fedamp_attention(flatten(state["params"]), 1.0, 4.0)
    state, _ = alg.round(state, 1)
    flat = flatten(state["params"])
    xi2 = fedamp_attention(flat, 1.0, 4.0)
    state, _ = alg.round(state, 2)
    log = R.MetricLog()
    alg.record(state, 2, log)
    assert set(log.metrics) == {R.WEIGHT, R.MODEL_DISTANCE} and set(log.rounds) == {2}
    metrics = np.array(log.metrics)
    pairs = list(zip(log.clients, log.peers, strict=True))
    assert [p for p, m in zip(pairs, metrics, strict=True) if m == R.WEIGHT] == \
        [(i, j) for i in range(3) for j in range(3)]
    # the distances ξ came from, per parameter (whatever `distance` is)
    dist = np.array(log.values)[metrics == R.MODEL_DISTANCE].reshape(3, 3)
    np.testing.assert_allclose(dist, (squared_distances(flat) / flat.shape[1]).numpy())
    matrix = np.array(log.values)[metrics == R.WEIGHT].reshape(3, 3)
    np.testing.assert_allclose(matrix, xi2.numpy())
    np.testing.assert_allclose(matrix.sum(1), 1.0, atol=1e-12)
    assert not np.allclose(matrix, xi1.numpy())


def test_deterministic_and_checkpointable():
    hp = {"sigma": 4.0, "alpha": 1.0}
    _, a = _alg(hp, seed=3, lr=0.5)
    _, b = _alg(hp, seed=3, lr=0.5)
    sa, la = a.round(a.init(), 1)
    buf = io.BytesIO()
    torch.save(sa, buf)
    buf.seek(0)
    sa2 = torch.load(buf, weights_only=True)
    sa, la2 = a.round(sa, 2)
    sb, lb = b.round(b.init(), 1)
    sb, lb2 = b.round(sb, 2)
    sa2, _ = a.round(sa2, 2)
    assert la.tolist() == lb.tolist() and la2.tolist() == lb2.tolist()
    for s in (sb, sa2):
        assert torch.equal(sa["params"][W], s["params"][W])
        assert torch.equal(sa["xi"], s["xi"])
    _, c = _alg(hp, seed=4, lr=0.5)
    sc, _ = c.round(c.init(), 1)
    assert not torch.equal(sc["params"][W], sb["params"][W])


# ---------------------------------------------------------------------- hyperparameters


def test_parse_hyper_defaults_and_coercion():
    assert parse_hyper(FedAMP, {}) == FedAMPHyper(lam=1e-7, sigma=1e-5, alpha=1e-7,
                                                  distance="mean", init="shared",
                                                  step="capped")
    hp = parse_hyper(FedAMP, {"lam": 0, "sigma": 3, "alpha": 2})
    assert hp.sigma == 3.0 and isinstance(hp.sigma, float) and hp.lam == 0.0


@pytest.mark.parametrize("bad", [
    {"lam": -0.1}, {"sigma": 0.0}, {"sigma": -1.0}, {"alpha": 0}, {"alpha": -2.0},
    {"sigma": "1"}, {"lam": True}, {"alpha": None}, {"lambda": 1.0}, {"self_attention": 0.5},
    {"step": "clip"},
])
def test_parse_hyper_rejects(bad):
    with pytest.raises(ValueError):
        parse_hyper(FedAMP, bad)


def test_attention_from_given_distances_has_the_bits_of_its_own():
    # round() computes the distances once, for ξ and for the record
    flat = torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 2.0]], dtype=torch.float64)
    own = fedamp_attention(flat, 0.5, 2.0, per_parameter=True)
    given = fedamp_attention(flat, 0.5, 2.0, per_parameter=True,
                             squared=squared_distances(flat))
    assert torch.equal(own, given)
    # the given matrix is the one used: doubled distances give the doubled-distance ξ
    doubled = fedamp_attention(flat, 0.5, 2.0, per_parameter=True,
                               squared=2 * squared_distances(flat))
    torch.testing.assert_close(doubled, fedamp_attention(flat * 2 ** 0.5, 0.5, 2.0,
                                                         per_parameter=True))
    assert not torch.equal(doubled, own)
