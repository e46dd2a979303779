"""FedAvg+: FedAvg's training; each client predicts after local fine-tuning."""

import pytest
import torch
from _alg_helpers import algorithm_factory
from _fl_helpers import assert_params_close, clone, manual_sgd

from pflrepro.algorithms.base import parse_hyper
from pflrepro.algorithms.fedavg import FedAvg
from pflrepro.algorithms.fedavg_plus import FedAvgPlus, FedAvgPlusHyper

_alg = algorithm_factory(FedAvgPlus)


def test_training_identical_to_fedavg():
    e, plus = _alg(lr=0.2)
    avg = FedAvg(e, parse_hyper(FedAvg, {}))
    a, b = plus.init(), avg.init()
    for rnd in (1, 2):
        a, la = plus.round(a, rnd)
        plus.predict(a, 0, e.data.x, rnd)  # prediction must not feed back into training
        b, lb = avg.round(b, rnd)
        assert_params_close(a["global"], b["global"], atol=0, rtol=0)
        assert la.tolist() == lb.tolist()


def test_predict_is_finetuned_global_and_differs_per_client():
    # finetune_epochs 2, batch 2: client k tunes for 2 * ceil(n_k / 2) SGD steps
    e, alg = _alg({"finetune_epochs": 2}, lr=0.2)
    state, _ = alg.round(alg.init(), 1)
    x = e.data.x
    preds = []
    for k in range(3):
        steps = 2 * [2, 1, 2][k]
        tuned, _ = manual_sgd(state["global"], e, k, 1, "finetune", steps, lr=0.2)
        p = alg.predict(state, k, x, 1)
        torch.testing.assert_close(p, e.probs(tuned, x), atol=1e-6, rtol=1e-5)
        preds.append(p)
    assert not torch.allclose(preds[0], preds[1])
    assert not torch.allclose(preds[0], preds[2])
    assert not torch.allclose(preds[0], e.probs(state["global"], x))


def test_predict_ignores_local_steps_and_uses_fresh_optimizer():
    # local_steps = 7 drives training, not tuning (1 epoch); momentum state is fresh
    e, alg = _alg(lr=0.1, momentum=0.9, local_steps=7)
    state, _ = alg.round(alg.init(), 1)
    g = state["global"]
    tuned, _, _ = e.train_client(g, e.init_opt(g), 0, 1, purpose="finetune",
                                steps=e.steps_per_round(0, epochs=1))
    torch.testing.assert_close(alg.predict(state, 0, e.data.x, 1), e.probs(tuned, e.data.x))


def test_predict_does_not_change_state():
    e, alg = _alg(optimizer="adam", lr=0.05)
    state, _ = alg.round(alg.init(), 1)
    before = clone(state)
    for k in range(3):
        alg.predict(state, k, e.data.x, 1)
    for name in before["global"]:
        assert torch.equal(state["global"][name], before["global"][name])
    for name in before["opt"]:
        assert torch.equal(state["opt"][name], before["opt"][name])


def test_predict_deterministic():
    e, alg = _alg()
    state, _ = alg.round(alg.init(), 1)
    assert torch.equal(alg.predict(state, 1, e.data.x, 1), alg.predict(state, 1, e.data.x, 1))


def test_parse_hyper():
    assert parse_hyper(FedAvgPlus, {}) == FedAvgPlusHyper(finetune_epochs=1)
    assert parse_hyper(FedAvgPlus, {"finetune_epochs": 3}).finetune_epochs == 3
    for bad in ({"epochs": 1}, {"finetune_epochs": 1.5}, {"finetune_epochs": "2"},
                {"finetune_epochs": True}):
        with pytest.raises(ValueError):
            parse_hyper(FedAvgPlus, bad)


def test_parse_hyper_rejects_negative_finetune_epochs():
    with pytest.raises(ValueError):
        parse_hyper(FedAvgPlus, {"finetune_epochs": -1})


def test_zero_finetune_epochs_is_rejected():
    # FedAvg+ without fine-tuning is FedAvg: 0 is refused (the minimum is 1), naming the key
    with pytest.raises(ValueError, match="finetune_epochs"):
        parse_hyper(FedAvgPlus, {"finetune_epochs": 0})
