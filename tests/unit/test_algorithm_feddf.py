"""FedDF: FedAvg per architecture, then ensemble distillation on the public set, by hand."""

import math

import numpy as np
import pytest
import torch
from _alg_helpers import algorithm_factory
from _fl_helpers import B, W, assert_params_close, make_data, make_engine

from pflrepro.algorithms import feddf
from pflrepro.algorithms.base import parse_hyper
from pflrepro.algorithms.fedavg import FedAvg
from pflrepro.algorithms.feddf import (
    EarlyStopping,
    FedDF,
    clip_global_norm_,
    cosine_lr,
    ensemble_teacher,
)
from pflrepro.seeding import NO_CLIENT, SETUP_ROUND, torch_generator
from pflrepro.training.optim import Optimizer
from pflrepro.training.params import weighted_mean

SIX = dict(n_train=(4, 2, 3, 5, 4, 3), n_test=(1,) * 6, public=8)
TWO_ARCHS = [{"model": "mlp", "model_options": {"hidden": []}},
             {"model": "mlp", "model_options": {"hidden": [3]}}]


_alg = algorithm_factory(FedDF, sizes=SIX)


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
    # no hold-out, no clipping: the plain step (cosine's first lr is server_lr itself)
    e, alg = _alg({"server_steps": 1, "server_lr": lr, "public_batch": 3,
                   "early_stopping": "none", "clip_norm": 0}, lr=0.2)
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


# ---------------------------------------------------------------- the reference's schedule
def _student_and_teacher(e):
    """A start model and a teacher on the 8 public rows (soft labels, rows sum to 1)."""
    student = e.init_params()
    gen = torch.Generator().manual_seed(1)
    teacher = torch.rand(len(e.data.public), 2, generator=gen).softmax(-1)
    return student, teacher


def _record(monkeypatch, e):
    """Record every server Adam step (its lr and gradient norm) and every gradient call."""
    seen = {"lr": [], "norm": [], "rows": []}
    step_ = Optimizer.step_

    def spy_step(self, params, grads, state, active=None):
        if self.name == "adam":
            seen["lr"].append(self.lr)
            seen["norm"].append(float(torch.sqrt(sum((g**2).sum() for g in grads.values()))))
        return step_(self, params, grads, state, active)

    grad = feddf.distill_loss_and_grad

    def spy_grad(engine, params, x, target):
        seen["rows"].append(x.clone())
        return grad(engine, params, x, target)

    monkeypatch.setattr(Optimizer, "step_", spy_step)
    monkeypatch.setattr(feddf, "distill_loss_and_grad", spy_grad)
    return seen


def test_cosine_lr_by_hand():
    assert cosine_lr(1e-3, 0, 10000) == pytest.approx(1e-3)
    assert cosine_lr(1e-3, 5000, 10000) == pytest.approx(5e-4)
    assert cosine_lr(1e-3, 10000, 10000) == pytest.approx(0.0, abs=1e-18)
    assert cosine_lr(2.0, 1, 3) == pytest.approx(1.5)  # (1 + cos(π/3)) / 2 · 2 = 1.5


def test_server_adam_lr_follows_the_cosine_schedule_over_the_step_budget(monkeypatch):
    # 4 steps of lr 0.1 annealed over the budget of 4: 0.1 · (1 + cos(π s / 4)) / 2
    e, alg = _alg({"server_steps": 4, "server_lr": 0.1})
    seen = _record(monkeypatch, e)
    alg.distill(*_student_and_teacher(e), rnd=1, arch=0)
    assert seen["lr"] == pytest.approx([0.1, 0.0853553, 0.05, 0.0146447], rel=1e-5)
    _, const = _alg({"server_steps": 4, "server_lr": 0.1, "early_stopping": "none",
                     "lr_schedule": "constant"})
    seen["lr"].clear()
    const.distill(*_student_and_teacher(const.engine), rnd=1, arch=0)
    assert seen["lr"] == [0.1] * 4


def test_gradient_norm_is_clipped_at_clip_norm(monkeypatch):
    # a gradient of norm 50 reaches the server's Adam with norm 5 (the reference's clip)
    e, alg = _alg({"server_steps": 2})
    seen = _record(monkeypatch, e)
    student, teacher = _student_and_teacher(e)
    monkeypatch.setattr(feddf, "distill_loss_and_grad", lambda engine, p, x, t: (
        0.0, {n: torch.full_like(v, 50.0 / math.sqrt(sum(u.numel() for u in p.values())))
              for n, v in p.items()}))
    alg.distill(student, teacher, rnd=1, arch=0)
    assert seen["norm"] == pytest.approx([5.0, 5.0], rel=1e-5)
    grads = {"a": torch.tensor([3.0, 0.0]), "b": torch.tensor([4.0])}  # norm 5
    assert clip_global_norm_(grads, 1.0) == pytest.approx(5.0)
    torch.testing.assert_close(grads["a"], torch.tensor([3.0, 0.0]) / (5 + 1e-6))
    torch.testing.assert_close(grads["b"], torch.tensor([4.0]) / (5 + 1e-6))
    small = {"a": torch.tensor([0.3, 0.4])}
    clip_global_norm_(small, 1.0)
    torch.testing.assert_close(small["a"], torch.tensor([0.3, 0.4]))  # norm 0.5: kept


def test_early_stopping_is_strict_and_counts_steps_since_the_best():
    stop = EarlyStopping(patience=4)
    assert stop.update(2, 0.5) == (True, False)
    assert stop.update(4, 0.6) == (True, False)
    assert stop.update(6, 0.6) == (False, False)   # a tie is no improvement
    assert stop.update(8, 0.6) == (False, True)    # 8 - 4 >= 4
    assert stop.best == 0.6 and stop.best_step == 4


def test_distillation_stops_early_and_returns_the_best_scored_student(monkeypatch):
    # the reference's cadence (defaults): scored every 100 steps, patience 1000
    e, alg = _alg({"server_steps": 3000, "server_lr": 0.05})
    seen = _record(monkeypatch, e)
    scores = iter([0.5, 0.6] + [0.6] * 10 + [0.9] * 20)
    snapshots = []

    def scripted(student, x, teacher):
        snapshots.append({k: v.clone() for k, v in student.items()})
        return next(scores)

    monkeypatch.setattr(alg, "score", scripted, raising=False)
    out = alg.distill(*_student_and_teacher(e), rnd=1, arch=0)
    # scored after 100, 200, ..., 1200 steps; best at 200 (later ties do not count);
    # 1200 - 200 >= 1000: stop after 1200 of the 3000 steps
    assert len(seen["rows"]) == 1200 and len(seen["lr"]) == 1200 and len(snapshots) == 12
    assert_params_close(out, snapshots[1], atol=0, rtol=0)
    assert not torch.equal(out[W], snapshots[-1][W])
    # the schedule still spans the budget of 3000 steps
    assert seen["lr"][1000] == pytest.approx(0.05 * (1 + math.cos(math.pi / 3)) / 2)


def test_step_budget_is_honoured(monkeypatch):
    e, alg = _alg({"server_steps": 7, "early_stopping": "none"})
    seen = _record(monkeypatch, e)
    alg.distill(*_student_and_teacher(e), rnd=1, arch=0)
    assert len(seen["rows"]) == 7 and len(seen["lr"]) == 7
    # with early stopping and an ever-improving score: all 7 steps, the student scored
    # last (after step 6) returned, since step 7 is never scored
    e, alg = _alg({"server_steps": 7, "eval_every": 2, "patience": 100})
    seen = _record(monkeypatch, e)
    scores = iter([0.1, 0.2, 0.3])
    snapshots = []

    def scripted(student, x, teacher):
        snapshots.append({k: v.clone() for k, v in student.items()})
        return next(scores)

    monkeypatch.setattr(alg, "score", scripted)
    out = alg.distill(*_student_and_teacher(e), rnd=1, arch=0)
    assert len(seen["rows"]) == 7 and len(snapshots) == 3
    assert_params_close(out, snapshots[-1], atol=0, rtol=0)


def test_held_out_public_rows_score_and_never_distil(monkeypatch):
    e, alg = _alg({"server_steps": 12, "public_batch": 2})
    # 8 public rows, val_fraction 0.2: round(1.6) = 2 held out, drawn once per run
    gen = torch_generator(0, SETUP_ROUND, NO_CLIENT, "distill-val")
    held = torch.randperm(8, generator=gen)[:2].sort().values.tolist()
    seen = _record(monkeypatch, e)
    alg.distill(*_student_and_teacher(e), rnd=1, arch=0)
    public = e.data.public
    used = {h for x in seen["rows"] for r in x for h in range(8) if torch.equal(r, public[h])}
    assert used and not used & set(held)
    rows, held_rows = alg.public_split()
    assert held_rows.tolist() == held and sorted(rows.tolist() + held) == list(range(8))
    _, none = _alg({"early_stopping": "none"})
    assert len(none.public_split()[0]) == 8 and len(none.public_split()[1]) == 0


def test_scores_agreement_and_kl_by_hand():
    e, alg = _alg({"early_stopping": "agreement"})
    x = e.data.public[:4]
    student = {W: torch.zeros(2, 2), B: torch.tensor([1.0, 0.0])}  # logits (1, 0) everywhere
    teacher = torch.tensor([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.5, 0.5]])
    # argmax: student 0 everywhere; teacher 0, 1, 0, 0 (a tie goes to the first class)
    assert alg.score(student, x, teacher) == pytest.approx(0.75)
    _, kl = _alg({"early_stopping": "kl"})
    q = torch.tensor([1.0, 0.0]).softmax(0)
    expect = -float(sum((t * (t.log() - q.log())).sum() for t in teacher) / 4)
    assert kl.score(student, x, teacher) == pytest.approx(expect, rel=1e-6)


def test_defaults_follow_the_reference_and_are_deterministic():
    hp = parse_hyper(FedDF, {})
    assert (hp.server_steps, hp.server_lr, hp.lr_schedule, hp.clip_norm, hp.eval_every,
            hp.patience, hp.early_stopping) == (10000, 1e-3, "cosine", 5.0, 100, 1000, "agreement")
    with pytest.raises(ValueError, match="val_fraction"):
        parse_hyper(FedDF, {"val_fraction": 0.0})
    parse_hyper(FedDF, {"val_fraction": 0.0, "early_stopping": "none"})
    outs = []
    for _ in range(2):
        _, alg = _alg({"server_steps": 30, "eval_every": 5, "patience": 10}, lr=0.2)
        state, _ = alg.round(alg.init(), 1)
        state, _ = alg.round(state, 2)
        outs.append(state["globals"][0])
    assert_params_close(outs[0], outs[1], atol=0, rtol=0)
