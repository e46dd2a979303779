"""pflrepro.engine: batching, stacking, initialisation, gradients, local training,
FederatedData.build and evaluation, on tiny hand-made data sets (CPU only)."""

import math

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from _fl_helpers import (
    CPU,
    B,
    W,
    assert_params_close,
    make_data,
    make_engine,
    manual_loss_and_grad,
    manual_sgd,
)

from pflrepro import results as R
from pflrepro.algorithms.base import Algorithm
from pflrepro.data.store import load_dataset, write_dataset
from pflrepro.engine import (
    Engine,
    FederatedData,
    PairMaxPool2d,
    choose_device,
    pair_max_pools,
    to_channels_last,
)
from pflrepro.training import TrainingConfig

# ---------------------------------------------------------------------- batches


def test_batches_cover_each_sample_once_per_epoch():
    # client 0: 4 train rows (0..3); batch size 2 -> 2 steps per epoch
    e = make_engine(make_data(n_train=(4, 8), n_test=(1, 1)), batch_size=2)
    batches = e.batches(0, 1, "local", 4)  # two epochs
    assert [len(b) for b in batches] == [2, 2, 2, 2]
    flat = torch.cat(batches)
    assert sorted(flat[:4].tolist()) == [0, 1, 2, 3]
    assert sorted(flat[4:].tolist()) == [0, 1, 2, 3]
    # client 1: rows 5..12, batch 3 -> ceil(8/3) = 3 steps = 9 draws: one full
    # permutation of the 8 rows, then the first row of the next epoch
    e3 = make_engine(make_data(n_train=(4, 8), n_test=(1, 1)), batch_size=3)
    steps = e3.steps_per_round(1)
    assert steps == 3
    flat = torch.cat(e3.batches(1, 1, "local", steps))
    assert len(flat) == 9
    assert sorted(flat[:8].tolist()) == list(range(5, 13))


def test_batch_size_capped_by_client_size():
    # 2 train samples, batch size 10 -> batches of 2
    e = make_engine(make_data(n_train=(2,), n_test=(1,)), batch_size=10)
    assert e.steps_per_round(0) == 1
    batches = e.batches(0, 3, "local", 3)
    assert [len(b) for b in batches] == [2, 2, 2]
    assert all(sorted(b.tolist()) == [0, 1] for b in batches)


def test_batches_depend_only_on_seed_round_client_purpose():
    data = make_data(n_train=(8, 8), n_test=(1, 1))
    e = make_engine(data, seed=3)
    torch.manual_seed(0)
    a = e.batches(0, 2, "local", 4)
    torch.manual_seed(99)  # global RNG must not matter
    torch.rand(10)
    e.batches(1, 2, "local", 4)  # nor other calls in between
    b = make_engine(data, seed=3).batches(0, 2, "local", 4)
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
    # prefix property: fewer steps give a prefix of the same stream
    assert all(torch.equal(x, y) for x, y in zip(e.batches(0, 2, "local", 2), a[:2],
                                                  strict=False))
    flat = torch.cat(a)
    for other in (make_engine(data, seed=4).batches(0, 2, "local", 4),
                  e.batches(0, 3, "local", 4), e.batches(0, 2, "finetune", 4)):
        assert not torch.equal(torch.cat(other), flat)
    # client 1 (same size, rows 9..16): its order is not client 0's order shifted
    assert not torch.equal(torch.cat(e.batches(1, 2, "local", 4)) - 9, flat)


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


# ---------------------------------------------------------------------- stacking


def test_weighted_mean_by_hand():
    # [[1,2],[3,4]] with weights [1,3] -> (1*[1,2] + 3*[3,4]) / 4 = [2.5, 3.5]
    stacked = {"a": torch.tensor([[1.0, 2.0], [3.0, 4.0]]),
               "m": torch.tensor([[[1.0, 0.0]], [[0.0, 1.0]]])}  # (2, 1, 2)
    out = Engine.weighted_mean(stacked, torch.tensor([1.0, 3.0]))
    torch.testing.assert_close(out["a"], torch.tensor([2.5, 3.5]))
    torch.testing.assert_close(out["m"], torch.tensor([[0.25, 0.75]]))
    # weights need not be normalised; equal weights give the plain mean
    out = Engine.weighted_mean(stacked, torch.tensor([5.0, 5.0]))
    torch.testing.assert_close(out["a"], torch.tensor([2.0, 3.0]))


def test_stack_take_put():
    params = {"w": torch.tensor([[1.0, 2.0]]), "b": torch.tensor(3.0)}
    stacked = Engine.stack(params, 3)
    assert stacked["w"].shape == (3, 1, 2) and stacked["b"].shape == (3,)
    assert torch.equal(Engine.take(stacked, 2)["w"], params["w"])
    Engine.put(stacked, 1, {"w": torch.tensor([[7.0, 8.0]]), "b": torch.tensor(9.0)})
    assert stacked["w"][:, 0, 0].tolist() == [1.0, 7.0, 1.0]
    assert stacked["b"].tolist() == [3.0, 9.0, 3.0]
    # stack copies: params untouched; take gives views into the stack
    assert params["w"].tolist() == [[1.0, 2.0]]
    view = Engine.take(stacked, 0)
    view["b"].fill_(-1.0)
    assert stacked["b"].tolist() == [-1.0, 9.0, 3.0]


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
        assert_params_close(Engine.take(state["params"], k), e.init_params(k), atol=0, rtol=0)
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
    new, opt, loss = e.local_train(params, e.init_opt(params), client, rnd=1)
    ref, ref_loss = manual_sgd(params, e, client, 1, "local", steps, lr=0.3)
    assert_params_close(new, ref)
    assert loss == pytest.approx(ref_loss, rel=1e-5)
    assert float(opt["step"]) == steps
    # explicit steps and purpose
    new, _, _ = e.local_train(params, e.init_opt(params), client, 2, purpose="x", steps=3)
    ref, _ = manual_sgd(params, e, client, 2, "x", 3, lr=0.3)
    assert_params_close(new, ref)


def test_local_train_grad_hook():
    # proximal hook: g + mu (p - anchor), mu = 0.5; the reported loss is the data loss only
    e = make_engine(lr=0.2)
    params = e.init_params(0)
    anchor = {k: torch.zeros_like(v) for k, v in params.items()}
    seen = []

    def hook(p, g):
        seen.append(1)
        return {k: g[k] + 0.5 * (p[k] - anchor[k]) for k in g}

    new, _, loss = e.local_train(params, e.init_opt(params), 0, 1, grad_hook=hook)
    steps = e.steps_per_round(0)
    assert len(seen) == steps == 2
    p, total = {k: v.clone() for k, v in params.items()}, 0.0
    for idx in e.batches(0, 1, "local", steps):
        batch_loss, g = manual_loss_and_grad(p, e.data.x[idx], e.data.y[idx])
        p = {k: p[k] - 0.2 * (g[k] + 0.5 * p[k]) for k in p}
        total += batch_loss
    assert_params_close(new, p)
    assert loss == pytest.approx(total / steps, rel=1e-5)


def test_local_train_with_zero_steps_is_a_no_op():
    e = make_engine()
    params = e.init_params(0)
    assert e.batches(0, 1, "local", 0) == []
    new, opt, loss = e.local_train(params, e.init_opt(params), 0, 1, steps=0)
    assert_params_close(new, params, atol=0, rtol=0)
    assert loss == 0.0


# ---------------------------------------------------------------------- FederatedData.build

# 8 images of shape (1, 1, 2), values 0 or 4 with max_value 4: on the [0, 1] scale
# half the pixels are 0 and half are 1, so mean = 0.5 and std = 0.5, and the
# normalised pixels are (x/4 - 0.5)/0.5 = -1 (for 0) or +1 (for 4).
X8 = np.array([[0, 4], [4, 0], [0, 0], [4, 4], [0, 4], [4, 0], [4, 4], [0, 0]],
              dtype=np.uint8).reshape(8, 1, 1, 2)
Y8 = np.array([0, 1, 2, 0, 1, 2, 0, 1])


def _dataset(tmp_path):
    write_dataset(tmp_path / "ds", X8, Y8, name="toy", num_classes=3, max_value=4,
                  source="test")
    return load_dataset(tmp_path / "ds")


def test_build_normalises_and_remaps(tmp_path):
    ds = _dataset(tmp_path)
    assert ds.meta.mean == pytest.approx((0.5,)) and ds.meta.std == pytest.approx((0.5,))
    # rows 0 and 3 are not used by the partition
    part = pd.DataFrame({
        "client": np.array([0, 0, 0, 1, 1, 1], dtype=np.int32),
        "index": np.array([5, 1, 2, 7, 4, 6], dtype=np.int64),
        "split": pd.array(["train", "train", "test", "train", "train", "test"], dtype="string"),
        "group": np.array([1, 1, 1, 0, 0, 0], dtype=np.int32),
    })
    data = FederatedData.build(ds, part, CPU)
    # resident rows: used = [1, 2, 4, 5, 6, 7] -> positions 0..5
    assert data.x.shape == (6, 1, 1, 2) and data.x.dtype == torch.float32
    assert data.y.dtype == torch.int64 and data.y.tolist() == Y8[[1, 2, 4, 5, 6, 7]].tolist()
    assert data.num_clients == 2 and data.num_classes == 3
    assert data.groups == (1, 0)
    # client 0: train rows 5, 1 -> positions 3, 0 (sorted [0, 3]); test row 2 -> 1
    assert data.train[0].tolist() == [0, 3] and data.test[0].tolist() == [1]
    # client 1: train rows 7, 4 -> positions 5, 2; test row 6 -> 4
    assert data.train[1].tolist() == [2, 5] and data.test[1].tolist() == [4]
    for k, (tr, te) in enumerate([([1, 5], [2]), ([4, 7], [6])]):
        expected = torch.from_numpy(X8[tr].astype(np.float32)) / 2 - 1  # 0 -> -1, 4 -> 1
        assert torch.equal(data.x[data.train[k]], expected)
        assert data.y[data.train[k]].tolist() == Y8[tr].tolist()
        assert data.y[data.test[k]].tolist() == Y8[te].tolist()
    # row 1 is [4, 0] -> [+1, -1]
    assert data.x[0].flatten().tolist() == [1.0, -1.0]


def test_build_general_formula(tmp_path):
    # values 0..16 with max_value 16 (digits-like): (x/16 - mean)/std, mean/std of all rows
    rng = np.random.default_rng(0)
    x = rng.integers(0, 17, size=(10, 2, 2, 2)).astype(np.uint8)
    write_dataset(tmp_path / "d", x, np.arange(10) % 2, name="t", num_classes=2,
                  max_value=16, source="test")
    ds = load_dataset(tmp_path / "d")
    part = pd.DataFrame({"client": np.zeros(10, dtype=np.int32), "index": np.arange(10),
                         "split": ["train"] * 8 + ["test"] * 2,
                         "group": np.full(10, -1, dtype=np.int32)})
    data = FederatedData.build(ds, part, CPU)
    scaled = x.astype(np.float64) / 16
    mean = scaled.mean(axis=(0, 2, 3)).reshape(1, 2, 1, 1)
    std = scaled.std(axis=(0, 2, 3)).reshape(1, 2, 1, 1)
    np.testing.assert_allclose(data.x.numpy(), (scaled - mean) / std, atol=1e-5)
    assert data.groups == (-1,)


def test_build_rejects_missing_client(tmp_path):
    ds = _dataset(tmp_path)
    part = pd.DataFrame({"client": np.array([0, 0, 2, 2], dtype=np.int32),
                         "index": np.array([0, 1, 2, 3]),
                         "split": ["train", "test", "train", "test"],
                         "group": np.full(4, -1, dtype=np.int32)})
    with pytest.raises(ValueError, match="no samples for client 1"):
        FederatedData.build(ds, part, CPU)


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


def test_choose_device():
    assert choose_device("cpu") == CPU
    if not torch.cuda.is_available():
        assert choose_device("auto") == CPU
        with pytest.raises(RuntimeError):
            choose_device("cuda")


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
    new, new_opt, _ = e.local_train(params, opt, 0, 1)
    assert_params_close(params, before_p, atol=0, rtol=0)
    assert_params_close(opt, before_o, atol=0, rtol=0)
    assert not any(v.requires_grad for v in new.values())
    assert float(new_opt["step"]) == e.steps_per_round(0)


def test_running_mean_equals_weighted_mean_bitwise():
    gen = torch.Generator().manual_seed(0)
    stacked = {"a": torch.randn(4, 3, 2, generator=gen), "b": torch.randn(4, 5, generator=gen)}
    weights = torch.tensor([3.0, 1.0, 0.0, 2.0])
    acc = Engine.running_mean(Engine.take(stacked, 0), weights)
    for k in range(4):
        acc.add(k, Engine.take(stacked, k))
    got = acc.result()
    assert_params_close(got, Engine.weighted_mean(stacked, weights), atol=0, rtol=0)
    w = weights / weights.sum()
    assert_params_close(got, {n: torch.tensordot(w, v, dims=1) for n, v in stacked.items()})


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


@pytest.mark.parametrize("shape", [(2, 3, 8, 8), (3, 4, 7, 9), (1, 2, 2, 2)])
def test_pair_max_pool_same_bits_as_max_pool(shape):
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(*shape, generator=gen).round(decimals=1)  # plenty of ties
    x[0, 0, 0, 0] = float("nan")
    pool = PairMaxPool2d(2)
    for layout in (torch.contiguous_format, torch.channels_last):
        xs = x.contiguous(memory_format=layout)
        expected = F.max_pool2d(xs, 2)
        with torch.inference_mode():
            got = pool(xs)
        torch.testing.assert_close(got, expected, rtol=0, atol=0, equal_nan=True)
    # with autograd on it is max-pooling itself: the same gradient, ties included
    a = x.nan_to_num().requires_grad_(True)
    pool(a).sum().backward()
    b = x.nan_to_num().requires_grad_(True)
    F.max_pool2d(b, 2).sum().backward()
    assert torch.equal(a.grad, b.grad)


def test_pair_max_pools_replaces_only_plain_two_by_two_pools():
    model = torch.nn.Sequential(torch.nn.MaxPool2d(2), torch.nn.MaxPool2d((2, 2), 2),
                                torch.nn.MaxPool2d(3), torch.nn.MaxPool2d(2, padding=1),
                                torch.nn.MaxPool2d(2, ceil_mode=True),
                                torch.nn.Sequential(torch.nn.MaxPool2d(2, 2)))
    pair_max_pools(model)
    kinds = [type(m).__name__ for m in model.modules()][1:]
    assert kinds == ["PairMaxPool2d", "PairMaxPool2d", "MaxPool2d", "MaxPool2d", "MaxPool2d",
                     "Sequential", "PairMaxPool2d"]
