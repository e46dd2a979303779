"""FedDF: FedAvg per architecture, then ensemble distillation on the public set, by hand."""

import math

import numpy as np
import pytest
import torch
from _fl_helpers import B, W, assert_params_close, make_data, make_engine

from pflrepro.algorithms.base import parse_hyper
from pflrepro.algorithms.fedavg import FedAvg
from pflrepro.algorithms.feddf import FedDF, ensemble_teacher
from pflrepro.params import weighted_mean
from pflrepro.seeding import NO_CLIENT

SIX = dict(n_train=(4, 2, 3, 5, 4, 3), n_test=(1,) * 6, public=8)
TWO_ARCHS = [{"model": "mlp", "model_options": {"hidden": []}},
             {"model": "mlp", "model_options": {"hidden": [3]}}]


def _alg(params=None, **training):
    e = make_engine(make_data(**SIX), **training)
    return e, FedDF(e, parse_hyper(FedDF, params or {}))


def test_no_server_steps_with_one_architecture_is_fedavg_bit_for_bit():
    e, alg = _alg({"server_steps": 0}, client_fraction=0.5, lr=0.3)
    e2 = make_engine(make_data(**SIX), client_fraction=0.5, lr=0.3)
    ref = FedAvg(e2, parse_hyper(FedAvg, {}))
    state, ref_state = alg.init(), ref.init()
    for rnd in (1, 2, 3):
        state, losses = alg.round(state, rnd)
        ref_state, ref_losses = ref.round(ref_state, rnd)
        np.testing.assert_array_equal(losses, ref_losses)
        assert_params_close(state["globals"][0], ref_state["global"], atol=0, rtol=0)
    np.testing.assert_array_equal(e.traffic.up, e2.traffic.up)
    np.testing.assert_array_equal(e.traffic.down, e2.traffic.down)


def test_teacher_is_the_softmax_of_the_mean_logits():
    logits = torch.tensor([[[2.0, 0.0]], [[0.0, 0.0]], [[1.0, 3.0]]])  # 3 models, 1 row
    mean = torch.tensor([1.0, 1.0])  # (2 + 0 + 1) / 3, (0 + 0 + 3) / 3
    torch.testing.assert_close(ensemble_teacher(logits)[0], mean.softmax(dim=0))
    assert ensemble_teacher(logits)[0].tolist() == pytest.approx([0.5, 0.5])


def test_one_server_step_is_adam_on_the_kl_to_the_ensemble():
    lr = 0.05
    e, alg = _alg({"server_steps": 1, "server_lr": lr, "public_batch": 3}, lr=0.2)
    e0, no_distill = _alg({"server_steps": 0}, lr=0.2)
    state = alg.init()
    locals_ = []
    for k in range(6):  # every client's local model, as the round trains it
        p, _, _ = e.train_client(state["globals"][0], e.init_opt(state["globals"][0]), k, 1)
        locals_.append(p)
    state, _ = alg.round(state, 1)
    average, _ = no_distill.round(no_distill.init(), 1)
    average = average["globals"][0]
    expect_avg = weighted_mean({n: torch.stack([p[n] for p in locals_]) for n in (W, B)},
                               e.train_sizes())
    assert_params_close(average, expect_avg)
    # teacher: softmax of the mean of the six local models' logits
    pub = e.data.public.flatten(1)
    teacher = torch.stack([pub @ p[W].T + p[B] for p in locals_]).mean(0).softmax(-1)
    rows = e.minibatches(NO_CLIENT, 1, "distill-0", 1, pool=torch.arange(8), batch_size=3)[0]
    x, t = pub[rows], teacher[rows]
    q = (x @ average[W].T + average[B]).softmax(-1)
    residual = (q - t) / len(rows)  # ∂ mean KL(t ‖ q) / ∂ logits
    grad = {W: residual.T @ x, B: residual.sum(0)}
    # Adam's first step: m̂ = g, v̂ = g², so w ← w − lr · g / (|g| + eps)
    expected = {n: average[n] - lr * grad[n] / (grad[n].abs() + 1e-8) for n in (W, B)}
    assert_params_close(state["globals"][0], expected, atol=1e-6, rtol=1e-5)


def test_heterogeneous_groups_average_within_and_distill_from_all():
    e, alg = _alg({"server_steps": 2}, architectures=TWO_ARCHS,
                  architecture_assignment="uniform", lr=0.2)
    assert set(e.arch_of) == {0, 1}
    state = alg.init()
    assert [e.arch_index(p) for p in state["globals"]] == [0, 1]
    state, losses = alg.round(state, 1)
    assert np.isfinite(losses).all()
    assert [e.arch_index(p) for p in state["globals"]] == [0, 1]
    # traffic: each client down- and uploads one model of its own architecture
    sizes = [e.model_sizes[a] for a in e.arch_of]
    assert e.model_sizes[0] == 2 * 2 + 2 and e.model_sizes[1] == 2 * 3 + 3 + 3 * 2 + 2
    assert e.traffic.up.tolist() == sizes and e.traffic.down.tolist() == sizes
    x = e.data.x[e.data.test[0]]
    for k in range(6):
        torch.testing.assert_close(alg.predict(state, k, x, 1),
                                   e.probs(state["globals"][e.arch_of[k]], x))


def test_absent_group_keeps_its_model_and_checks():
    e, alg = _alg({"server_steps": 1}, architectures=TWO_ARCHS,
                  architecture_assignment="uniform", client_fraction=1 / 6)
    state = alg.init()
    before = [{n: v.clone() for n, v in g.items()} for g in state["globals"]]
    chosen = e.participants(1)
    state, losses = alg.round(state, 1)
    absent = 1 - e.arch_of[chosen[0]]
    assert_params_close(state["globals"][absent], before[absent], atol=0, rtol=0)
    assert math.isnan(losses[[k for k in range(6) if k not in chosen]][0])
    no_public = make_engine(make_data(n_train=(2, 2), n_test=(1, 1)))
    with pytest.raises(ValueError, match="public set"):
        FedDF(no_public, parse_hyper(FedDF, {})).init()
    with pytest.raises(ValueError, match="server_steps"):
        parse_hyper(FedDF, {"server_steps": -1})


@pytest.mark.parametrize("path", ["loop", "vmap"])
def test_paper_architectures_cnn_vgg11_vgg13_train_and_distill(path):
    # PerFed-CKT's Table 2 models on 32x32 RGB inputs: one round, both training paths
    data = make_data(n_train=(2, 6, 4, 8), n_test=(1,) * 4, shape=(3, 32, 32), public=4)
    archs = [{"model": "cnn", "model_options": {"channels": [4, 8], "hidden": 8}},
             {"model": "vgg11"}, {"model": "vgg13"}]
    e = make_engine(data, architectures=archs, client_training=path, batch_size=2,
                    local_steps=1)
    alg = FedDF(e, parse_hyper(FedDF, {"server_steps": 1}))
    state, losses = alg.round(alg.init(), 1)
    assert np.isfinite(losses).all()
    assert [e.arch_index(g) for g in state["globals"]] == [0, 1, 2]
    for k in range(4):
        p = alg.predict(state, k, data.x[data.test[k]], 1)
        assert p.shape == (1, 2) and torch.isfinite(p).all()
