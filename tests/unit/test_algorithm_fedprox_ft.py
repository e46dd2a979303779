"""FedProx-FT: FedProx's training; each client predicts after local fine-tuning."""

import pytest
import torch
from _alg_helpers import algorithm_factory
from _fl_helpers import assert_params_close, clone, manual_sgd

from pflrepro.algorithms import ALGORITHMS
from pflrepro.algorithms.base import parse_hyper
from pflrepro.algorithms.fedavg_plus import FedAvgPlus
from pflrepro.algorithms.fedprox import FedProx, FedProxBase
from pflrepro.algorithms.fedprox_ft import FedProxFT, FedProxFTHyper

_alg = algorithm_factory(FedProxFT)


def test_registered_and_composed_from_fedprox_and_fedavg_plus():
    assert ALGORITHMS["fedprox_ft"] is FedProxFT
    assert FedProxFT.round is FedProxBase.round
    assert FedProxFT.predict is FedAvgPlus.predict


def test_training_identical_to_fedprox():
    e, ft = _alg({"mu": 0.5}, lr=0.2, local_steps=3)
    prox = FedProx(e, parse_hyper(FedProx, {"mu": 0.5}))
    a, b = ft.init(), prox.init()
    for rnd in (1, 2):
        a, la = ft.round(a, rnd)
        ft.predict(a, 0, e.data.x, rnd)  # prediction must not feed back into training
        b, lb = prox.round(b, rnd)
        assert_params_close(a["global"], b["global"], atol=0, rtol=0)
        assert la.tolist() == lb.tolist()


def test_mu_zero_is_fedavg_ft():
    e, ft = _alg({"mu": 0.0, "finetune_epochs": 2}, lr=0.2)
    plus = FedAvgPlus(e, parse_hyper(FedAvgPlus, {"finetune_epochs": 2}))
    a, b = ft.init(), plus.init()
    for rnd in (1, 2):
        a, _ = ft.round(a, rnd)
        b, _ = plus.round(b, rnd)
        for k in range(3):
            assert torch.equal(ft.predict(a, k, e.data.x, rnd), plus.predict(b, k, e.data.x, rnd))


def test_predict_is_plainly_finetuned_global_per_client():
    # finetune_epochs 2, batch 2: client k tunes 2 * ceil(n_k / 2) plain SGD steps, without
    # the proximal pull (μ is large, so a pull would change the result)
    e, alg = _alg({"mu": 5.0, "finetune_epochs": 2}, lr=0.2)
    state, _ = alg.round(alg.init(), 1)
    x = e.data.x
    preds = []
    for k in range(3):
        tuned, _ = manual_sgd(state["global"], e, k, 1, "finetune", 2 * [2, 1, 2][k], lr=0.2)
        p = alg.predict(state, k, x, 1)
        torch.testing.assert_close(p, e.probs(tuned, x), atol=1e-6, rtol=1e-5)
        preds.append(p)
    assert not torch.allclose(preds[0], preds[1])
    assert not torch.allclose(preds[0], e.probs(state["global"], x))


def test_predict_does_not_change_state_and_is_deterministic():
    e, alg = _alg(optimizer="adam", lr=0.05)
    state, _ = alg.round(alg.init(), 1)
    before = clone(state)
    p = [alg.predict(state, k, e.data.x, 1) for k in range(3)]
    for group in ("global", "opt"):
        for name in before[group]:
            assert torch.equal(state[group][name], before[group][name])
    assert all(torch.equal(a, alg.predict(state, k, e.data.x, 1)) for k, a in enumerate(p))


def test_seeded():
    def final(seed):
        e, alg = _alg({"mu": 0.1}, seed=seed)
        state, _ = alg.round(alg.init(), 1)
        return alg.predict(state, 0, e.data.x, 1)

    assert torch.equal(final(0), final(0))
    assert not torch.equal(final(0), final(1))


def test_parse_hyper():
    assert parse_hyper(FedProxFT, {}) == FedProxFTHyper(mu=0.01, finetune_epochs=1)
    hp = parse_hyper(FedProxFT, {"mu": 1, "finetune_epochs": 3})
    assert (hp.mu, hp.finetune_epochs) == (1.0, 3)
    for bad in ({"epochs": 1}, {"finetune_epochs": 0}, {"finetune_epochs": -1},
                {"finetune_epochs": 1.5}, {"finetune_epochs": True}, {"mu": -1.0},
                {"mu": "0.1"}):
        with pytest.raises(ValueError):
            parse_hyper(FedProxFT, bad)
