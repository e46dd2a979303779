"""pflrepro.training.engine: mini-batches, initialisation, gradients, local training, evaluation,
the round loop and divergence, on tiny hand-made data sets (CPU only)."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from _fl_helpers import (
    B,
    W,
    assert_params_close,
    make_data,
    make_engine,
    manual_loss_and_grad,
    manual_sgd,
)

from pflrepro.algorithms.base import Algorithm
from pflrepro.data.federated import FederatedData
from pflrepro.models.surgery import to_channels_last
from pflrepro.store import results as R
from pflrepro.store.progress import RoundProgress
from pflrepro.training.engine import Engine
from pflrepro.training.params import take
from pflrepro.training.settings import TrainingConfig
from pflrepro.training.terms import Proximal

# ---------------------------------------------------------------------- batches


def test_batches_cover_each_sample_once_per_epoch():
    # client 0: 4 train rows (0..3); batch size 2 -> 2 steps per epoch
    e = make_engine(make_data(n_train=(4, 8), n_test=(1, 1)), batch_size=2)
    batches = e.minibatches(0, 1, "local", 4)  # two epochs
    assert [len(b) for b in batches] == [2, 2, 2, 2]
    flat = torch.cat(batches)
    assert sorted(flat[:4].tolist()) == [0, 1, 2, 3]
    assert sorted(flat[4:].tolist()) == [0, 1, 2, 3]
    # client 1: rows 5..12, batch 3 -> ceil(8/3) = 3 steps = 9 draws: one full
    # permutation of the 8 rows, then the first row of the next epoch
    e3 = make_engine(make_data(n_train=(4, 8), n_test=(1, 1)), batch_size=3)
    steps = e3.steps_per_round(1)
    assert steps == 3
    flat = torch.cat(e3.minibatches(1, 1, "local", steps))
    assert len(flat) == 9
    assert sorted(flat[:8].tolist()) == list(range(5, 13))


def test_batch_size_capped_by_client_size():
    # 2 train samples, batch size 10 -> batches of 2
    e = make_engine(make_data(n_train=(2,), n_test=(1,)), batch_size=10)
    assert e.steps_per_round(0) == 1
    batches = e.minibatches(0, 3, "local", 3)
    assert [len(b) for b in batches] == [2, 2, 2]
    assert all(sorted(b.tolist()) == [0, 1] for b in batches)


def test_batches_depend_only_on_seed_round_client_purpose():
    data = make_data(n_train=(8, 8), n_test=(1, 1))
    e = make_engine(data, seed=3)
    torch.manual_seed(0)
    a = e.minibatches(0, 2, "local", 4)
    torch.manual_seed(99)  # global RNG must not matter
    torch.rand(10)
    e.minibatches(1, 2, "local", 4)  # nor other calls in between
    b = make_engine(data, seed=3).minibatches(0, 2, "local", 4)
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
    # prefix property: fewer steps give a prefix of the same stream
    assert all(torch.equal(x, y) for x, y in zip(e.minibatches(0, 2, "local", 2), a[:2],
                                                  strict=False))
    flat = torch.cat(a)
    for other in (make_engine(data, seed=4).minibatches(0, 2, "local", 4),
                  e.minibatches(0, 3, "local", 4), e.minibatches(0, 2, "finetune", 4)):
        assert not torch.equal(torch.cat(other), flat)
    # client 1 (same size, rows 9..16): its order is not client 0's order shifted
    assert not torch.equal(torch.cat(e.minibatches(1, 2, "local", 4)) - 9, flat)


def test_steps_per_round():
    data = make_data(n_train=(3, 4), n_test=(1, 1))
    # epochs: 2 * ceil(3/2) = 4; 2 * ceil(4/2) = 4
    e = make_engine(data, batch_size=2, local_epochs=2)
    assert [e.steps_per_round(k) for k in range(2)] == [4, 4]
    assert e.steps_per_round(0, epochs=1) == 2
    e = make_engine(data, batch_size=3, local_epochs=1)
    assert [e.steps_per_round(k) for k in range(2)] == [1, 2]  # ceil(3/3), ceil(4/3)
    # local_steps overrides epochs, unless epochs are given explicitly
    e = make_engine(data, batch_size=2, local_steps=5)
    assert [e.steps_per_round(k) for k in range(2)] == [5, 5]
    assert e.steps_per_round(0, epochs=3) == 3 * 2


# ---------------------------------------------------------------------- init


def test_init_params_deterministic_per_seed_and_client():
    data = make_data()
    e = make_engine(data, seed=5)
    a = e.init_params(0)
    assert_params_close(a, make_engine(data, seed=5).init_params(0), atol=0, rtol=0)
    assert not torch.equal(a[W], e.init_params(1)[W])
    assert not torch.equal(a[W], e.init_params()[W])  # global (NO_CLIENT) model
    assert not torch.equal(a[W], make_engine(data, seed=6).init_params(0)[W])
    assert {k: tuple(v.shape) for k, v in a.items()} == {W: (2, 2), B: (2,)}


def test_init_params_leaves_global_rng_alone():
    e = make_engine()
    torch.manual_seed(11)
    expected = torch.rand(4)
    torch.manual_seed(11)
    e.init_params(0)
    assert torch.equal(torch.rand(4), expected)


def test_client_init():
    e = make_engine(optimizer="adam", lr=0.01)
    state = e.client_init()
    assert set(state) == {"params", "opt"}
    for k in range(3):
        assert_params_close(take(state["params"], k), e.init_params(k), atol=0, rtol=0)
    assert state["opt"]["step"].shape == (3,)
    assert state["opt"][f"m.{W}"].shape == (3, 2, 2)
    assert all(float(v.abs().sum()) == 0 for v in state["opt"].values())


# ---------------------------------------------------------------------- gradients


def test_loss_and_grad_at_zero_by_hand():
    # zero params: logits 0, p = [0.5, 0.5], loss ln 2 per sample.
    # one sample x = [1, 2], y = 0: dL/db = p - onehot = [-0.5, 0.5],
    # dL/dW = (p - onehot) x^T = [[-0.5, -1.0], [0.5, 1.0]]
    data = FederatedData(x=torch.tensor([[[[1.0, 2.0]]], [[[3.0, -1.0]]]]),
                         y=torch.tensor([0, 1]), train=(torch.tensor([0, 1]),),
                         test=(torch.tensor([1]),), groups=(-1,), num_classes=2)
    e = make_engine(data)
    zero = {W: torch.zeros(2, 2), B: torch.zeros(2)}
    loss, g = e.loss_and_grad(zero, torch.tensor([0]))
    assert loss == pytest.approx(math.log(2))
    torch.testing.assert_close(g[B], torch.tensor([-0.5, 0.5]))
    torch.testing.assert_close(g[W], torch.tensor([[-0.5, -1.0], [0.5, 1.0]]))
    # weighted: weights [1, 3] -> loss = 4 ln 2;
    # dL/db = 1*[-0.5, 0.5] + 3*[0.5, -0.5] = [1, -1]
    loss, g = e.loss_and_grad(zero, torch.tensor([0, 1]), sample_weight=torch.tensor([1., 3.]))
    assert loss == pytest.approx(4 * math.log(2))
    torch.testing.assert_close(g[B], torch.tensor([1.0, -1.0]))
    # one SGD step with lr 0.1 on sample 0: b = [0.05, -0.05], W = [[.05, .1], [-.05, -.1]]
    new, _ = e.optimizer.step(zero, e.loss_and_grad(zero, torch.tensor([0]))[1],
                              e.init_opt(zero))
    torch.testing.assert_close(new[B], torch.tensor([0.05, -0.05]))
    torch.testing.assert_close(new[W], torch.tensor([[0.05, 0.1], [-0.05, -0.1]]))


def test_loss_and_grad_matches_manual():
    e = make_engine()
    params = e.init_params(0)
    idx = torch.tensor([0, 2, 3, 7])
    x, y = e.data.x[idx], e.data.y[idx]
    loss, g = e.loss_and_grad(params, idx)
    ref_loss, ref_g = manual_loss_and_grad(params, x, y)
    assert loss == pytest.approx(ref_loss, rel=1e-6)
    assert_params_close(g, ref_g)
    sw = torch.tensor([0.1, 0.2, 0.3, 0.4])
    loss, g = e.loss_and_grad(params, idx, sample_weight=sw)
    ref_loss, ref_g = manual_loss_and_grad(params, x, y, sample_weight=sw)
    assert loss == pytest.approx(ref_loss, rel=1e-6)
    assert_params_close(g, ref_g)
    # weights 1/n reproduce the mean loss
    mean_loss, mean_g = e.loss_and_grad(params, idx)
    loss, g = e.loss_and_grad(params, idx, sample_weight=torch.full((4,), 0.25))
    assert loss == pytest.approx(mean_loss, rel=1e-6)
    assert_params_close(g, mean_g)


def test_loss_and_grad_does_not_touch_params():
    e = make_engine()
    params = e.init_params(0)
    before = {k: v.clone() for k, v in params.items()}
    e.loss_and_grad(params, torch.tensor([0, 1]))
    assert_params_close(params, before, atol=0, rtol=0)
    assert not any(v.requires_grad for v in params.values())


def test_mean_loss_and_probs():
    e = make_engine()
    params = e.init_params(1)
    idx = e.data.train[1]
    ref, _ = manual_loss_and_grad(params, e.data.x[idx], e.data.y[idx])
    assert e.mean_loss(params, 1, "train") == pytest.approx(ref, rel=1e-6)
    idx = e.data.test[0]
    ref, _ = manual_loss_and_grad(params, e.data.x[idx], e.data.y[idx])
    assert e.mean_loss(params, 0, "test") == pytest.approx(ref, rel=1e-6)
    p = e.probs(params, e.data.x)
    torch.testing.assert_close(p.sum(dim=1), torch.ones(len(e.data.x)))
    logits = e.data.x.flatten(1) @ params[W].T + params[B]
    torch.testing.assert_close(p, logits.softmax(dim=1))


@pytest.mark.parametrize("client", [0, 1, 2])
def test_local_train_matches_manual_sgd(client):
    e = make_engine(lr=0.3, local_epochs=2)
    params = e.init_params(client)
    steps = e.steps_per_round(client)  # 2 * ceil(n / 2): 4, 2, 4
    assert steps == [4, 2, 4][client]
    new, opt, loss = e.train_client(params, e.init_opt(params), client, rnd=1)
    ref, ref_loss = manual_sgd(params, e, client, 1, "local", steps, lr=0.3)
    assert_params_close(new, ref)
    assert loss == pytest.approx(ref_loss, rel=1e-5)
    assert float(opt["step"]) == steps
    # explicit steps and purpose
    new, _, _ = e.train_client(params, e.init_opt(params), client, 2, purpose="x", steps=3)
    ref, _ = manual_sgd(params, e, client, 2, "x", 3, lr=0.3)
    assert_params_close(new, ref)


def test_train_client_adds_gradient_terms():
    # proximal term: g + mu (p - anchor), mu = 0.5; the reported loss is the data loss only
    e = make_engine(lr=0.2)
    params = e.init_params(0)
    anchor = {k: torch.zeros_like(v) for k, v in params.items()}
    seen = []

    class Counted(Proximal):
        def add(self, p, g):
            seen.append(1)
            return super().add(p, g)

    new, _, loss = e.train_client(params, e.init_opt(params), 0, 1,
                                  terms=[Counted(anchor, 0.5)])
    steps = e.steps_per_round(0)
    assert len(seen) == steps == 2
    p, total = {k: v.clone() for k, v in params.items()}, 0.0
    for idx in e.minibatches(0, 1, "local", steps):
        batch_loss, g = manual_loss_and_grad(p, e.data.x[idx], e.data.y[idx])
        p = {k: p[k] - 0.2 * (g[k] + 0.5 * p[k]) for k in p}
        total += batch_loss
    assert_params_close(new, p)
    assert loss == pytest.approx(total / steps, rel=1e-5)


def test_local_train_with_zero_steps_is_a_no_op():
    e = make_engine()
    params = e.init_params(0)
    assert e.minibatches(0, 1, "local", 0) == []
    new, opt, loss = e.train_client(params, e.init_opt(params), 0, 1, steps=0)
    assert_params_close(new, params, atol=0, rtol=0)
    assert loss == 0.0


# ---------------------------------------------------------------------- evaluate / run


class FixedPrediction(Algorithm):
    """Predicts fixed probabilities; round() returns fixed losses."""

    name = "fixed_for_tests"
    summary = "test double"

    def __init__(self, engine, probs, losses=None):
        super().__init__(engine, None)
        self.probs_by_client = probs
        self.losses = losses
        self.rounds_seen = []

    def init(self):
        return {"n": 0}

    def round(self, state, rnd):
        self.rounds_seen.append(rnd)
        return {"n": state["n"] + 1}, np.asarray(self.losses)

    def predict(self, state, client, x, rnd):
        return self.probs_by_client[client]

    def record(self, state, rnd, log):
        log.add(rnd, -1, "calls", state["n"])


def _eval_data():
    # client 0 test labels [0, 1]; client 1 test label [0]
    return FederatedData(x=torch.zeros(5, 1, 1, 2), y=torch.tensor([1, 0, 1, 1, 0]),
                         train=(torch.tensor([0]), torch.tensor([3])),
                         test=(torch.tensor([1, 2]), torch.tensor([4])),
                         groups=(0, 1), num_classes=2)


PROBS = [torch.tensor([[0.8, 0.2], [0.6, 0.4]]), torch.tensor([[0.3, 0.7]])]


def test_evaluate_by_hand():
    # client 0: argmax [0, 0] vs labels [0, 1] -> accuracy 0.5;
    #           loss -(ln 0.8 + ln 0.4)/2 = (0.223144 + 0.916291)/2 = 0.569717
    # client 1: argmax 1 vs label 0 -> accuracy 0; loss -ln 0.3 = 1.203973
    e = make_engine(_eval_data())
    log = R.MetricLog()
    e.evaluate(FixedPrediction(e, PROBS), {"n": 7}, 4, log)
    frame = log.to_frame({c: "x" if "seed" not in c else 0 for c in R.CONFIG_COLUMNS})
    got = {(r.client, r.metric): r.value for r in frame.itertuples()}
    assert got[(0, R.TEST_ACCURACY)] == pytest.approx(0.5)
    assert got[(0, R.TEST_LOSS)] == pytest.approx(0.569717, abs=1e-6)
    assert got[(1, R.TEST_ACCURACY)] == pytest.approx(0.0)
    assert got[(1, R.TEST_LOSS)] == pytest.approx(1.203973, abs=1e-6)
    assert set(frame["round"]) == {4}
    assert set(frame["metric"]) == {R.TEST_ACCURACY, R.TEST_LOSS}


def test_run_rows_and_eval_schedule():
    e = make_engine(_eval_data(), rounds=3, eval_every=2)
    alg = FixedPrediction(e, PROBS, losses=[1.5, np.nan])
    frame = e.run(alg).to_frame({c: "x" if "seed" not in c else 0 for c in R.CONFIG_COLUMNS})
    assert alg.rounds_seen == [1, 2, 3]
    r0 = frame[frame["round"] == 0].set_index(["client", "metric"])["value"]
    assert r0[(0, R.N_TRAIN)] == 1 and r0[(0, R.N_TEST)] == 2 and r0[(0, R.GROUP)] == 0
    assert r0[(1, R.N_TRAIN)] == 1 and r0[(1, R.N_TEST)] == 1 and r0[(1, R.GROUP)] == 1
    # evaluated at 0, every 2nd round, and the last round
    acc = frame[frame["metric"] == R.TEST_ACCURACY]
    assert sorted(set(acc["round"])) == [0, 2, 3]
    # record() runs after init (round 0) and after every round, evaluated or not;
    # the state it sees has gone through 0, 1, 2, 3 rounds
    calls = frame[frame["metric"] == "calls"]
    assert calls["round"].tolist() == [0, 1, 2, 3]
    assert calls["value"].tolist() == [0, 1, 2, 3]
    # NaN losses (client 1 did not train) are not logged
    tl = frame[frame["metric"] == R.TRAIN_LOSS]
    assert tl["round"].tolist() == [1, 2, 3] and set(tl["client"]) == {0}
    assert (tl["value"] == 1.5).all()


def test_run_reports_to_the_progress_reporter_given_and_refuses_other_values():
    """``Engine.run``'s ``progress`` is a typed reporter (issue 26, item 4): the one given
    sees every evaluated round (0 is before the loop: rounds 2 and 3 here); a bool, as
    the old ``progress: object = False`` took, is refused before anything runs."""
    e = make_engine(_eval_data(), rounds=3, eval_every=2)
    alg = FixedPrediction(e, PROBS, losses=[1.5, np.nan])
    reporter = RoundProgress(3, "fixed", clock=lambda: 0.0)
    e.run(alg, progress=reporter)
    assert [s.round for s in reporter.summaries] == [2, 3]
    # client 0 right on 1 of 2 test samples, client 1 on 0 of 1 (test_evaluate_by_hand)
    assert reporter.summaries[-1].mean_accuracy == pytest.approx(0.25)
    assert reporter.summaries[-1].weighted_accuracy == pytest.approx(1 / 3)
    fresh = FixedPrediction(make_engine(_eval_data(), rounds=3, eval_every=2), PROBS)
    with pytest.raises(TypeError, match="RoundProgress or None"):
        fresh.engine.run(fresh, progress=True)
    assert fresh.rounds_seen == []


def test_engine_builds_model_without_grad():
    e = make_engine()
    assert not any(p.requires_grad for p in e.model.parameters())
    assert isinstance(e.cfg, TrainingConfig) and e.optimizer.name == "sgd"
    # logits of an empty input have shape (0, classes)
    out = e.logits(e.init_params(0), e.data.x[:0])
    assert out.shape[0] == 0
    assert F.softmax(e.logits(e.init_params(0), e.data.x), dim=1).shape == (len(e.data.x), 2)


# ---------------------------------------------------------------------- speed mechanics


def test_local_train_leaves_inputs_untouched():
    e = make_engine(lr=0.3, optimizer="sgd", momentum=0.9)
    params = e.init_params(0)
    opt = e.init_opt(params)
    before_p = {k: v.clone() for k, v in params.items()}
    before_o = {k: v.clone() for k, v in opt.items()}
    new, new_opt, _ = e.train_client(params, opt, 0, 1)
    assert_params_close(params, before_p, atol=0, rtol=0)
    assert_params_close(opt, before_o, atol=0, rtol=0)
    assert not any(v.requires_grad for v in new.values())
    assert float(new_opt["step"]) == e.steps_per_round(0)


def test_images_are_channels_last_and_batches_keep_it():
    data = make_data(shape=(3, 4, 4))
    x = FederatedData(x=to_channels_last(data.x), y=data.y, train=data.train, test=data.test,
                      groups=data.groups, num_classes=data.num_classes).x
    assert x.is_contiguous(memory_format=torch.channels_last)
    assert torch.equal(x, data.x)
    assert x[data.train[0]].is_contiguous(memory_format=torch.channels_last)
    flat = torch.randn(3, 5)
    assert to_channels_last(flat) is flat


def test_cnn_engine_relus_in_place_and_after_pooling_same_numbers():
    data = make_data(n_train=(6, 6), n_test=(2, 2), shape=(3, 8, 8), num_classes=3)
    e = make_engine(data, model="cnn", model_options={"channels": [4, 8], "hidden": 16},
                    batch_size=3)
    assert all(m.inplace for m in e.model.modules() if isinstance(m, torch.nn.ReLU))
    kinds = [type(m).__name__ for m in e.model.modules()
             if isinstance(m, (torch.nn.ReLU, torch.nn.MaxPool2d))]
    assert kinds[:4] == ["PairMaxPool2d", "ReLU", "PairMaxPool2d", "ReLU"]  # pooled first
    params = e.init_params(0)
    from pflrepro.models import build_model

    plain = build_model("cnn", (3, 8, 8), 3, channels=[4, 8], hidden=16)
    plain.load_state_dict(params)
    with torch.no_grad():
        expected = plain(data.x)
    torch.testing.assert_close(e.logits(params, to_channels_last(data.x)), expected,
                               atol=1e-6, rtol=1e-5)
    loss, grads = e.loss_and_grad(params, data.train[0])
    plain.requires_grad_(True)
    ref = F.cross_entropy(plain(data.x[data.train[0]]), data.y[data.train[0]])
    ref.backward()
    assert loss == pytest.approx(float(ref.detach()), rel=1e-6)
    for k, p in plain.named_parameters():
        torch.testing.assert_close(grads[k], p.grad, atol=1e-6, rtol=1e-5)


def test_cpu_eval_chunk_caps_eval_batch_size():
    e = make_engine(eval_batch_size=1024)
    assert e.eval_chunk == min(1024, Engine.cpu_eval_chunk)
    assert make_engine(eval_batch_size=2).eval_chunk == 2


# ---------------------------------------------------------------------- divergence


def test_divergence_stops_the_run_and_is_recorded(caplog):
    from pflrepro.algorithms.base import parse_hyper
    from pflrepro.algorithms.fedavg import FedAvg

    # an MLP at lr 1e20: its parameters overflow, its outputs turn NaN
    e = make_engine(optimizer="sgd", lr=1e20, rounds=30, eval_every=5, model="mlp",
                    model_options={"hidden": [8]})
    with caplog.at_level("WARNING", logger="pflrepro.training.engine"):
        log = e.run(FedAvg(e, parse_hyper(FedAvg, {})))
    rows = [(r, c, v) for r, c, m, v in zip(log.rounds, log.clients, log.metrics, log.values,
                                           strict=True) if m == R.DIVERGED]
    assert len(rows) == 1
    rnd, client, value = rows[0]
    assert client == -1 and value == rnd and 1 <= rnd < 30
    assert max(log.rounds) == rnd  # nothing after it
    # the round it stopped in was evaluated, and its test loss is what gave it away
    losses = [v for r, m, v in zip(log.rounds, log.metrics, log.values, strict=True)
              if r == rnd and m == R.TEST_LOSS]
    assert len(losses) == e.num_clients and not all(np.isfinite(losses))
    assert f"diverged in round {rnd}" in caplog.text


def test_a_sane_run_has_no_divergence_row():
    from pflrepro.algorithms.base import parse_hyper
    from pflrepro.algorithms.fedavg import FedAvg

    e = make_engine(optimizer="sgd", lr=0.1, rounds=3)
    log = e.run(FedAvg(e, parse_hyper(FedAvg, {})))
    assert R.DIVERGED not in log.metrics and max(log.rounds) == 3


# ---------------------------------------------------------------------- participation


def test_participants_all_by_default_else_a_seeded_sample():
    data = make_data(n_train=(4,) * 10, n_test=(1,) * 10)
    assert make_engine(data).participants(3) == list(range(10))
    e = make_engine(data, client_fraction=0.25, seed=1)
    picks = [e.participants(r) for r in range(1, 30)]
    assert all(len(p) == 2 and p == sorted(set(p)) for p in picks)  # round(2.5) = 2
    assert len({tuple(p) for p in picks}) > 5  # varies with the round
    assert make_engine(data, client_fraction=0.25, seed=1).participants(7) == picks[6]
    assert make_engine(data, client_fraction=0.25, seed=2).participants(7) != picks[6] or \
        make_engine(data, client_fraction=0.25, seed=2).participants(8) != picks[7]
    assert make_engine(data, client_fraction=0.01).participants(1).__len__() == 1


# ---------------------------------------------------------------------- architectures

ARCHS = [{"model": "mlp", "model_options": {"hidden": []}},
         {"model": "mlp", "model_options": {"hidden": [3]}},
         {"model": "mlp", "model_options": {"hidden": [5]}}]


def test_one_architecture_by_default():
    e = make_engine()
    assert not e.heterogeneous and e.arch_of == [0, 0, 0]
    assert e.model_sizes == [e.model_size] and e.model_size == 2 * 2 + 2
    assert e.arch_index(e.init_params()) == 0


def test_data_size_assignment_climbs_with_probability_n_over_max():
    # 40 clients: half with 40 samples (climb probability 1: always the largest), half
    # with 1 (probability 1/40 per step): the draw is seeded per (seed, client)
    sizes = (40, 1) * 20
    data = make_data(n_train=sizes, n_test=(1,) * 40)
    e = make_engine(data, architectures=ARCHS)
    assert e.heterogeneous and len(e.models) == 3
    assert all(e.arch_of[k] == 2 for k in range(0, 40, 2))
    small = [e.arch_of[k] for k in range(1, 40, 2)]
    assert small.count(0) >= 15  # P(rank 0) = (39/40)^2 ≈ 0.95 for each
    # by hand: client k's rank counts its two uniforms below n_k / max n
    from pflrepro.seeding import SETUP_ROUND, torch_generator
    for k in range(40):
        u = torch.rand(2, generator=torch_generator(0, SETUP_ROUND, k, "architecture"),
                       dtype=torch.float64)
        assert e.arch_of[k] == int((u < sizes[k] / 40).sum())
    assert make_engine(data, architectures=ARCHS).arch_of == e.arch_of  # seeded
    assert make_engine(data, architectures=ARCHS, seed=1).arch_of != e.arch_of


def test_clients_models_follow_their_architecture():
    data = make_data(n_train=(4, 2, 3, 5), n_test=(1,) * 4)
    e = make_engine(data, architectures=ARCHS, architecture_assignment="uniform")
    params, opts = e.client_models()
    assert [e.arch_index(p) for p in params] == e.arch_of
    assert e.model_sizes == [6, 2 * 3 + 3 + 3 * 2 + 2, 2 * 5 + 5 + 5 * 2 + 2]
    for k, p in enumerate(params):
        assert e.model_size_of(k) == e.model_sizes[e.arch_of[k]]
        assert e.probs(p, data.x[data.test[k]]).shape == (1, 2)
        trained, _, loss = e.train_client(p, opts[k], k, 1)
        assert e.arch_index(trained) == e.arch_of[k] and math.isfinite(loss)
    with pytest.raises(ValueError, match="client_models"):
        e.client_init()
    with pytest.raises(ValueError, match="no architecture of this run"):
        e.arch_index({W: torch.zeros(7, 2)})
    with pytest.raises(ValueError, match="same parameter names and shapes"):
        make_engine(architectures=[ARCHS[1], ARCHS[1]])


def test_heterogeneous_runs_record_each_clients_architecture():
    data = make_data(n_train=(4, 2, 3, 5), n_test=(1,) * 4)
    e = make_engine(data, architectures=ARCHS, architecture_assignment="uniform", rounds=1)

    class Own(Algorithm):
        name, summary = "own", "own"

        def init(self):
            return {"params": e.client_models()[0]}

        def round(self, state, rnd):
            return state, np.zeros(4)

        def predict(self, state, client, x, rnd):
            return e.probs(state["params"][client], x)

    frame = e.run(Own(e, None)).to_frame(
        {c: "x" if "seed" not in c else 0 for c in R.CONFIG_COLUMNS})
    r0 = frame[frame["round"] == 0].set_index(["client", "metric"])["value"]
    for k in range(4):
        assert r0[(k, R.ARCHITECTURE)] == e.arch_of[k]
        assert r0[(k, R.MODEL_SIZE)] == e.model_size_of(k)
    plain = make_engine(_eval_data(), rounds=1)
    assert R.ARCHITECTURE not in plain.run(FixedPrediction(plain, PROBS, [1.0, 1.0])).metrics
