"""FedMix: K = 1 is FedAvg bit for bit, K = S with a one-hot gate is Local bit for bit,
q(z|y) by eq. 6 on a two-class toy by hand, responsibilities, predictions (own shard and
unseen shard) by hand, communication counts, records, determinism, checkpoints."""

import io
import math

import numpy as np
import pytest
import torch
from _alg_helpers import algorithm_factory
from _fl_helpers import B, W, clone, make_data, make_engine

from pflrepro.algorithms import ALGORITHMS, INFOS
from pflrepro.algorithms.base import parse_hyper
from pflrepro.algorithms.fedavg import FedAvg
from pflrepro.algorithms.fedmix import (
    EXPERT_POSTERIOR,
    GATE_MASS,
    FedMix,
    FedMixHyper,
    gate_logits,
)
from pflrepro.algorithms.local import Local
from pflrepro.store import results as R
from pflrepro.training.params import take

# default tiny data (_fl_helpers.make_data): train sizes (4, 2, 3), labels row % 2;
# training labels: client 0 [0, 1, 0, 1], client 1 [0, 1], client 2 [1, 0, 1];
# so class 0 has 4 training samples over all clients, class 1 has 5.
COUNTS = [4.0, 5.0]


_alg = algorithm_factory(FedMix)


def _equal(a, b):
    assert set(a) == set(b)
    for k in a:
        assert torch.equal(a[k], b[k]), k


def test_registered_and_defaults():
    assert ALGORITHMS["fedmix"] is FedMix
    hp = parse_hyper(FedMix, {})
    assert (hp.experts, hp.beta, hp.objective, hp.gate) == (4, 1.0, "bound", "learned")
    assert FedMix.records == (GATE_MASS, EXPERT_POSTERIOR)


# each bad value and its one-line message: the declared bounds and choices (parse_hyper),
# then what only FedMixHyper checks (β > 0 and finite, the rules between fields)
DECLARED = [({"experts": 0}, "'experts' must be >= 1, got 0"),
            ({"experts": 1.5}, "'experts' must be int, got 1.5"),
            ({"gate_hidden": -1}, "'gate_hidden' must be >= 0, got -1"),
            ({"gate_hidden": True}, "'gate_hidden' must be int, got True"),
            ({"beta": -1.0}, "'beta' must be >= 0.0, got -1.0"),
            ({"beta": "1"}, "'beta' must be float, got '1'"),
            ({"objective": "elbo"}, "'objective' must be one of ['bound', 'marginal'], got 'elbo'"),
            ({"gate": "fixed"}, "'gate' must be one of ['learned', 'one_hot'], got 'fixed'"),
            ({"posterior": "class"},
             "'posterior' must be one of ['label', 'label_shard', 'shard'], got 'class'")]
OWN = [({"beta": 0.0}, "fedmix: beta must be a finite number > 0, got 0.0"),
       ({"beta": math.inf}, "fedmix: beta must be a finite number > 0, got inf"),
       ({"posterior": "shard", "objective": "marginal"},
        "fedmix: posterior label_shard or shard needs objective bound"),
       ({"gate": "one_hot"}, "fedmix: gate one_hot needs objective marginal")]


@pytest.mark.parametrize(("bad", "message"), DECLARED + OWN)
def test_parse_hyper_rejects_each_bad_value_in_one_line(bad, message):
    with pytest.raises(ValueError) as err:
        parse_hyper(FedMix, bad)
    assert message in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize(("bad", "message"), DECLARED)
def test_the_config_check_refuses_the_declared_bounds_and_choices(bad, message):
    """The config reads the declarations from the source (no FedMixHyper): the same lines."""
    with pytest.raises(ValueError) as err:
        parse_hyper(INFOS["fedmix"], bad)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_one_hot_gate_needs_marginal_objective_and_k_equal_s():
    with pytest.raises(ValueError, match="objective marginal"):
        FedMixHyper(gate="one_hot")
    _, alg = _alg({"experts": 2, "gate": "one_hot", "objective": "marginal"})
    with pytest.raises(ValueError, match="experts = clients"):
        alg.init()


def test_init_experts_gates_q():
    e, alg = _alg({"experts": 3, "gate_hidden": 5})
    state = alg.init()
    for k in range(3):
        _equal(take(state["experts"], k), e.init_params(k))
    assert state["gates"]["w1"].shape == (3, 5, 2)  # clients x hidden x features
    assert state["gates"]["w2"].shape == (3, 3, 5)  # clients x experts x hidden
    assert not torch.equal(state["gates"]["w1"][0], state["gates"]["w1"][1])
    torch.testing.assert_close(state["q"], torch.full((2, 3), 1 / 3, dtype=torch.float64))
    # one optimiser state per client, for its experts and gate together
    assert state["opt"]["step"].shape == (3,)
    assert set(state["opt"]) == {"step"}  # plain SGD: a step count only
    # K = 1: no gate at all
    _, one = _alg({"experts": 1})
    assert one.init()["gates"] == {}


# ---------------------------------------------------------------------- special cases


@pytest.mark.parametrize("optimizer,lr", [("sgd", 0.1), ("adam", 0.05)])
@pytest.mark.parametrize("objective", ["bound", "marginal"])
def test_one_expert_is_fedavg_bit_for_bit(optimizer, lr, objective):
    # K = 1: q = 1, the gate is p(z = 1 | x) = 1, every sample has weight 1 and the
    # server weights are n_s: the same batches (purpose 'local'), the same arithmetic.
    training = dict(optimizer=optimizer, lr=lr, local_epochs=2)
    ea, eb = make_engine(**training), make_engine(**training)
    avg = FedAvg(ea, parse_hyper(FedAvg, {}))
    mix = FedMix(eb, parse_hyper(FedMix, {"experts": 1, "objective": objective}))
    sa, sb = avg.init(), mix.init()
    _equal(take(sb["experts"], 0), sa["global"])  # one expert starts where FedAvg does
    x = ea.data.x
    for rnd in (1, 2, 3):
        sa, la = avg.round(sa, rnd)
        sb, lb = mix.round(sb, rnd)
        _equal(take(sb["experts"], 0), sa["global"])
        assert np.array_equal(la, lb)
        assert ea.traffic.up.tolist() == eb.traffic.up.tolist()
        assert ea.traffic.down.tolist() == eb.traffic.down.tolist()
        ea.traffic.up[:] = ea.traffic.down[:] = 0
        eb.traffic.up[:] = eb.traffic.down[:] = 0
        for k in range(3):
            assert torch.equal(mix.predict(sb, k, x, rnd), avg.predict(sa, k, x, rnd))
    assert sb["q"].tolist() == [[1.0], [1.0]]


@pytest.mark.parametrize("optimizer,lr", [("sgd", 0.1), ("adam", 0.05)])
def test_one_hot_gate_with_one_expert_per_client_is_local_bit_for_bit(optimizer, lr):
    # K = S, p(z = s | x, s) = 1 fixed: the posterior is one-hot on s, so expert s learns
    # from shard s alone (weight 1) and the server's mass-weighted average is its copy.
    training = dict(optimizer=optimizer, lr=lr, local_epochs=2)
    ea, eb = make_engine(**training), make_engine(**training)
    loc = Local(ea, parse_hyper(Local, {}))
    mix = FedMix(eb, parse_hyper(FedMix, {"experts": 3, "gate": "one_hot",
                                          "objective": "marginal"}))
    sa, sb = loc.init(), mix.init()
    _equal(sb["experts"], sa["params"])  # expert k and Local's client k: the same draw
    x = ea.data.x
    for rnd in (1, 2, 3):
        sa, la = loc.round(sa, rnd)
        sb, lb = mix.round(sb, rnd)
        _equal(sb["experts"], sa["params"])
        assert np.array_equal(la, lb)
        for k in range(3):
            assert torch.equal(mix.predict(sb, k, x, rnd), loc.predict(sa, k, x, rnd))
    assert mix.gate_mass(sb).tolist() == np.eye(3).tolist()
    # each client downloads 3 experts and uploads its own with its 3 masses
    assert eb.traffic.down.tolist() == [3 * 3 * eb.model_size] * 3
    assert eb.traffic.up.tolist() == [3 * (eb.model_size + 3)] * 3


# ---------------------------------------------------------------------- the toy by hand


def _hand_state(alg, beta_q=None):
    """Two experts, a linear gate (gate_hidden 0) with zero weights.

    Expert 0 gives p(y = 0) = 3/4, expert 1 gives 1/2; every client's gate gives
    p(z) = [1/4, 3/4] for every input.
    """
    state = alg.init()
    state["experts"][W].zero_()
    state["experts"][B].copy_(torch.tensor([[math.log(3.0), 0.0], [0.0, 0.0]]))
    state["gates"]["w2"].zero_()
    state["gates"]["b2"].copy_(torch.tensor([0.0, math.log(3.0)]).expand(3, 2))
    return state


# log-joint log p(y | x, w_k) + log p(z = k | x): class 0: [log 3/16, log 3/8],
# class 1: [log 1/16, log 3/8] (the same for every sample: nothing depends on x).
JOINT = [[3 / 16, 3 / 8], [1 / 16, 3 / 8]]
# eq. 6 with beta = 1: q(.|0) ∝ [3/16, 3/8] = [1/3, 2/3]; q(.|1) ∝ [1/16, 6/16] = [1/7, 6/7]
Q_BETA1 = [[1 / 3, 2 / 3], [1 / 7, 6 / 7]]
# beta = 2: the square roots: q(.|0) ∝ [1, √2], q(.|1) ∝ [1, √6]
Q_BETA2 = [[1 / (1 + 2 ** 0.5), 2 ** 0.5 / (1 + 2 ** 0.5)],
           [1 / (1 + 6 ** 0.5), 6 ** 0.5 / (1 + 6 ** 0.5)]]


@pytest.mark.parametrize("beta,expected", [(1.0, Q_BETA1), (2.0, Q_BETA2)])
def test_q_update_two_class_toy_by_hand(beta, expected):
    _, alg = _alg({"experts": 2, "gate_hidden": 0, "beta": beta})
    sums = torch.tensor([[c * math.log(v) for v in row] for c, row in zip(COUNTS, JOINT,
                                                                          strict=True)],
                        dtype=torch.float64)
    q = alg.q_update(sums, torch.tensor(COUNTS, dtype=torch.float64),
                     torch.full((2, 2), 0.5, dtype=torch.float64))
    torch.testing.assert_close(q, torch.tensor(expected, dtype=torch.float64))
    # a class no client holds keeps its row
    previous = torch.tensor([[0.9, 0.1], [0.2, 0.8]], dtype=torch.float64)
    kept = alg.q_update(sums, torch.tensor([4.0, 0.0], dtype=torch.float64), previous)
    assert kept[1].tolist() == [0.2, 0.8]
    torch.testing.assert_close(kept[0], torch.tensor(expected[0], dtype=torch.float64))


@pytest.mark.parametrize("beta,expected", [(1.0, Q_BETA1), (2.0, Q_BETA2)])
def test_round_forms_q_from_every_shards_class_sums(monkeypatch, beta, expected):
    # no local training (the clients return what they received): the round's q is eq. 6
    # over the shards' per-class sums and counts, i.e. the hand values above
    _, alg = _alg({"experts": 2, "gate_hidden": 0, "beta": beta})
    state = _hand_state(alg)

    _untrained(alg, monkeypatch)
    state, _ = alg.round(state, 1)
    torch.testing.assert_close(state["q"], torch.tensor(expected, dtype=torch.float64))


def test_bound_weights_are_q_of_the_label_and_marginal_ones_the_posterior():
    e, alg = _alg({"experts": 2, "gate_hidden": 0})
    state = _hand_state(alg)
    state["q"] = torch.tensor(Q_BETA2, dtype=torch.float64)
    idx = e.data.train[0]  # labels [0, 1, 0, 1]
    r = alg.responsibilities(state["experts"], take(state["gates"], 0), 0, idx, state["q"])
    torch.testing.assert_close(r, torch.tensor([Q_BETA2[y] for y in (0, 1, 0, 1)]))
    _, marg = _alg({"experts": 2, "gate_hidden": 0, "objective": "marginal"})
    mstate = _hand_state(marg)
    # posterior ∝ p(y | x, w_k) p(z = k | x): the joint above, normalised (= Q_BETA1)
    r = marg.responsibilities(mstate["experts"], take(mstate["gates"], 0), 0, idx,
                              mstate["q"])
    torch.testing.assert_close(r, torch.tensor([Q_BETA1[y] for y in (0, 1, 0, 1)]))


def test_server_weights_experts_by_data_mass(monkeypatch):
    # every client returns experts filled with its id: expert k becomes
    # Σ_s m_sk · s / Σ_s m_sk with m_sk = Σ_{i ∈ D_s} q(k | y_i)
    e, alg = _alg({"experts": 2, "gate_hidden": 0})
    state = alg.init()
    state["q"] = torch.tensor([[0.2, 0.8], [0.6, 0.4]], dtype=torch.float64)

    def constant(state, rnd, mass, clients):
        return [({n: torch.full_like(v, float(s)) for n, v in state["experts"].items()},
                 clone(take(state["gates"], s)), 0.0) for s in clients]

    monkeypatch.setattr(alg, "local_training", constant)
    q = state["q"].numpy()
    labels = {0: [0, 1, 0, 1], 1: [0, 1], 2: [1, 0, 1]}
    m = np.array([sum(q[y] for y in labels[s]) for s in range(3)])  # (S, K)
    state, _ = alg.round(state, 1)
    for k in range(2):
        expected = float((m[:, k] * np.arange(3)).sum() / m[:, k].sum())
        assert state["experts"][B][k].tolist() == pytest.approx([expected] * 2, rel=1e-6)


# ---------------------------------------------------------------------- predictions


def test_predict_is_the_gated_mixture_by_hand():
    e, alg = _alg({"experts": 2, "gate_hidden": 0})
    state = _hand_state(alg)
    # gate [1/4, 3/4]: p(y = 0) = 1/4 · 3/4 + 3/4 · 1/2 = 9/16
    out = alg.predict(state, 1, e.data.x[:3], 1)
    torch.testing.assert_close(out, torch.tensor([[9 / 16, 7 / 16]] * 3))


def test_predict_unseen_by_hand():
    # a shard without a gate: p(y | x) ∝ Σ_k q(k | y) p(y | x, w_k); with Q_BETA1:
    # y = 0: 1/3 · 3/4 + 2/3 · 1/2 = 7/12;  y = 1: 1/7 · 1/4 + 6/7 · 1/2 = 13/28
    e, alg = _alg({"experts": 2, "gate_hidden": 0})
    state = _hand_state(alg)
    state["q"] = torch.tensor(Q_BETA1, dtype=torch.float64)
    out = alg.predict_unseen(state, e.data.x[:4])
    total = 7 / 12 + 13 / 28
    torch.testing.assert_close(out, torch.tensor([[7 / 12 / total, 13 / 28 / total]] * 4))
    # one expert: the unseen shard gets that expert's prediction
    e1, one = _alg({"experts": 1})
    s1 = one.init()
    torch.testing.assert_close(one.predict_unseen(s1, e1.data.x),
                               e1.probs(take(s1["experts"], 0), e1.data.x))


def test_gate_is_an_mlp_on_flattened_inputs():
    gate = {"w1": torch.ones(3, 2), "b1": torch.tensor([0.0, -10.0, 1.0]),
            "w2": torch.eye(3)[:2], "b2": torch.zeros(2)}
    x = torch.tensor([[[[1.0, 2.0]]]])  # (1, 1, 1, 2)
    # hidden: relu([3, -7, 4]) = [3, 0, 4]; logits: first two hidden units
    assert gate_logits(gate, x).tolist() == [[3.0, 0.0]]


# ---------------------------------------------------------------------- training, records


def test_gate_learns_toward_q():
    # with q fixed one-hot per class, the gate's cross-entropy to q falls as it trains
    e, alg = _alg({"experts": 2, "gate_hidden": 0}, lr=0.5, rounds=5)
    state = alg.init()
    state["q"] = torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=torch.float64)

    def ce(state):
        total = 0.0
        for s in range(3):
            idx = e.data.train[s]
            logp = alg.gate_log_probs(state, s, e.data.x[idx])
            target = state["q"].float()[e.data.y[idx]]
            total += float(-(target * logp.clamp_min(-50)).sum(1).mean())
        return total

    before = ce(state)
    q = state["q"].clone()
    for rnd in (1, 2, 3):
        state, _ = alg.round(state, rnd)
        state["q"] = q.clone()  # keep the target fixed
    assert ce(state) < before


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_q_scales_an_experts_step_under_sgd_and_adam_cancels_it(optimizer):
    # q(k | y) = (0.25, 0.75) for both classes: expert k's loss is r_k × the batch mean,
    # so one plain-SGD step moves it r_k × the unweighted step; Adam's first step,
    # lr · g / (|g| + eps), is the same for any constant r_k: the weighting is lost
    lr = 0.1
    e, alg = _alg({"experts": 2, "gate_hidden": 0}, optimizer=optimizer, lr=lr,
                  local_steps=1)
    state = alg.init()
    state["q"] = torch.tensor([[0.25, 0.75], [0.25, 0.75]], dtype=torch.float64)
    start = {n: v.clone() for n, v in state["experts"].items()}
    idx = e.minibatches(0, 1, "local", 1)[0]
    trained, _, _ = alg.local_training(state, 1, torch.ones(3, 2, dtype=torch.float64))[0]
    for k, r in enumerate((0.25, 0.75)):
        _, g = e.loss_and_grad(take(start, k), idx)
        moved = take(trained, k)[B] - take(start, k)[B]
        if optimizer == "sgd":
            torch.testing.assert_close(moved, -lr * r * g[B])
        else:  # the first Adam step: -lr * g / (|g| + eps), whatever r is
            torch.testing.assert_close(moved, -lr * g[B] / (g[B].abs() + 1e-8))


def test_fedmix_requires_plain_sgd_in_the_config_check():
    # Adam would cancel q's weighting of the experts (above): the config check rejects
    # FedMix with Adam or momentum, and every configured FedMix experiment trains
    # with plain SGD (so its FedAvg rows share the optimiser: K = 1 stays FedAvg)
    import copy
    from pathlib import Path

    import yaml

    from pflrepro.algorithms.registry import INFOS
    from pflrepro.config import ConfigError, load_config_file, parse

    assert FedMix.requires_plain_sgd and INFOS["fedmix"].requires_plain_sgd
    repo = Path(__file__).resolve().parents[2]
    tiny = yaml.safe_load((repo / "tests/workflow/config.yaml").read_text())
    for optimizer, momentum, ok in (("adam", 0.0, False), ("sgd", 0.9, False),
                                    ("sgd", 0.0, True)):
        raw = copy.deepcopy(tiny)
        raw["methods"]["fedmix"] = {"algorithm": "fedmix"}
        raw["experiments"]["tiny"]["methods"].append("fedmix")
        raw["training"].update(optimizer=optimizer, momentum=momentum)
        if ok:
            assert "fedmix" in parse(raw).experiments["tiny"].methods
        else:
            with pytest.raises(ConfigError, match="requires plain SGD"):
                parse(raw)
    cfg = parse(load_config_file(repo / "config.yaml"))
    fedmix = {m for m, spec in cfg.methods.items() if spec.algorithm == "fedmix"}
    experiments = [x for x in cfg.experiments.values() if fedmix & set(x.methods)]
    assert len(experiments) >= 10  # 5 paper-scale and 5 CPU-scale FedMix experiments
    for x in experiments:
        assert (x.training.optimizer, x.training.momentum) == ("sgd", 0.0), x.name


def test_communication_counts_bound():
    e, alg = _alg({"experts": 2, "gate_hidden": 3})
    state = alg.init()
    alg.round(state, 1)
    p, c, k = e.model_size, 2, 2
    assert p == 6  # 2 features x 2 classes + 2 biases
    # down: K experts and q (C x K); up: K experts, per-class sums (C x K) and counts (C)
    assert e.traffic.down.tolist() == [k * p + c * k] * 3
    assert e.traffic.up.tolist() == [k * p + c * k + c] * 3
    # the gate (2*3 + 3 + 3*2 + 2 = 17 scalars per client) is never sent


def test_record_logs_gate_mass_and_q():
    e, alg = _alg({"experts": 2, "gate_hidden": 0})
    state = _hand_state(alg)
    state["q"] = torch.tensor(Q_BETA1, dtype=torch.float64)
    log = R.MetricLog()
    alg.record(state, 4, log)
    rows = list(zip(log.rounds, log.clients, log.peers, log.metrics, log.values, strict=True))
    gates = [(c, p, v) for r, c, p, m, v in rows if m == GATE_MASS]
    assert [(c, p) for c, p, _ in gates] == [(s, k) for s in range(3) for k in range(2)]
    assert [v for _, _, v in gates] == pytest.approx([0.25, 0.75] * 3)
    qs = [(c, p, v) for r, c, p, m, v in rows if m == EXPERT_POSTERIOR]
    assert [(c, p) for c, p, _ in qs] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert [v for _, _, v in qs] == pytest.approx([1 / 3, 2 / 3, 1 / 7, 6 / 7])
    assert set(log.rounds) == {4}


def test_round_is_deterministic_and_thread_count_free():
    runs = []
    for workers in (1, 1, 2):
        _, alg = _alg({"experts": 2, "gate_hidden": 4}, workers=workers, optimizer="adam",
                      lr=0.05)
        state = alg.init()
        for rnd in (1, 2):
            state, losses = alg.round(state, rnd)
        runs.append((state, losses))
    for state, losses in runs[1:]:
        _equal(state["experts"], runs[0][0]["experts"])
        _equal(state["gates"], runs[0][0]["gates"])
        assert torch.equal(state["q"], runs[0][0]["q"])
        assert np.array_equal(losses, runs[0][1])


@pytest.mark.parametrize("posterior", ["label", "shard"])
def test_state_checkpoints_and_resumes(posterior):
    # the global q, or each client's own q(z|s) (q_local), survives a checkpoint
    _, alg = _alg({"experts": 2, "gate_hidden": 4, "posterior": posterior})
    state, _ = alg.round(alg.init(), 1)
    buf = io.BytesIO()
    torch.save(state, buf)
    buf.seek(0)
    loaded = torch.load(buf, weights_only=True)
    a, _ = alg.round(clone(state), 2)
    b, _ = alg.round(loaded, 2)
    _equal(a["experts"], b["experts"])
    assert torch.equal(a["q"], b["q"])
    if posterior == "shard":
        assert torch.equal(a["q_local"], b["q_local"])


def test_uneven_data_and_more_classes_run():
    data = make_data(n_train=(5, 1, 7), n_test=(2, 1, 3), num_classes=3, groups=[0, 1, 0])
    e = make_engine(data)
    alg = FedMix(e, parse_hyper(FedMix, {"experts": 3}))
    state = alg.init()
    for rnd in (1, 2):
        state, losses = alg.round(state, rnd)
    assert np.isfinite(losses).all()
    torch.testing.assert_close(state["q"].sum(1), torch.ones(3, dtype=torch.float64))
    for k in range(3):
        out = alg.predict(state, k, e.data.x[e.data.test[k]], 2)
        torch.testing.assert_close(out.sum(1), torch.ones(len(out)))


# ---------------------------------------------------------------------- local posteriors


@pytest.mark.parametrize("bad", [{"posterior": "writer"},
                                 {"posterior": "shard", "objective": "marginal"}])
def test_posterior_option_rejects(bad):
    with pytest.raises(ValueError):
        parse_hyper(FedMix, bad)


def _untrained(alg, monkeypatch):
    def untrained(state, rnd, mass, clients):
        return [(clone(state["experts"]), clone(take(state["gates"], s)), 0.0)
                for s in clients]

    monkeypatch.setattr(alg, "local_training", untrained)


def test_label_shard_posterior_is_eq6_per_shard_and_class(monkeypatch):
    # the joint of the toy does not depend on the shard, so every shard's q(z | y, s) is
    # the global hand value Q_BETA1 for each class it holds (all three hold both)
    _, alg = _alg({"experts": 2, "gate_hidden": 0, "posterior": "label_shard"})
    state = _hand_state(alg)
    assert state["q_local"].shape == (3, 2, 2)
    _untrained(alg, monkeypatch)
    state, _ = alg.round(state, 1)
    for s in range(3):
        torch.testing.assert_close(state["q_local"][s], torch.tensor(Q_BETA1,
                                                                     dtype=torch.float64))
    torch.testing.assert_close(state["q"], torch.tensor(Q_BETA1, dtype=torch.float64))


def test_shard_posterior_pools_a_shards_classes_by_hand(monkeypatch):
    # q(z | s) ∝ exp(mean over the shard's samples of the joint): client 0 holds classes
    # [0, 1, 0, 1] -> exp((2 log j0 + 2 log j1) / 4) = geometric means of the JOINT rows
    _, alg = _alg({"experts": 2, "gate_hidden": 0, "posterior": "shard"})
    state = _hand_state(alg)
    assert state["q_local"].shape == (3, 1, 2)
    _untrained(alg, monkeypatch)
    state, _ = alg.round(state, 1)
    labels = {0: [0, 1, 0, 1], 1: [0, 1], 2: [1, 0, 1]}
    expected = {}
    for s, ys in labels.items():
        logit = [sum(math.log(JOINT[y][k]) for y in ys) / len(ys) for k in range(2)]
        z = [math.exp(v) for v in logit]
        expected[s] = [v / sum(z) for v in z]
        assert state["q_local"][s, 0].tolist() == pytest.approx(expected[s])
    # the recorded (pooled) q(z | y = c): Σ_s n_sc q_s / n_c
    for c in range(2):
        n = {s: ys.count(c) for s, ys in labels.items()}
        pooled = [sum(n[s] * expected[s][k] for s in labels) / sum(n.values())
                  for k in range(2)]
        assert state["q"][c].tolist() == pytest.approx(pooled)
    # a shard's samples are weighted by its own q, whatever their class
    idx = alg.engine.data.train[2]
    r = alg.responsibilities(state["experts"], take(state["gates"], 2), 2, idx,
                             alg.client_q(state, 2))
    torch.testing.assert_close(r, torch.tensor([expected[2]] * 3, dtype=torch.float32))


@pytest.mark.parametrize("posterior", ["label_shard", "shard"])
def test_local_posteriors_send_only_experts(posterior):
    e, alg = _alg({"experts": 2, "gate_hidden": 3, "posterior": posterior})
    alg.round(alg.init(), 1)
    assert e.traffic.down.tolist() == [2 * e.model_size] * 3
    assert e.traffic.up.tolist() == [2 * e.model_size] * 3


def test_label_posterior_keeps_the_global_q_bits():
    # posterior label is the default: no local table, and the same bits as before
    runs = []
    for params in ({"experts": 2, "gate_hidden": 4}, {"experts": 2, "gate_hidden": 4,
                                                      "posterior": "label"}):
        _, alg = _alg(params)
        state = alg.init()
        assert "q_local" not in state
        for rnd in (1, 2):
            state, _ = alg.round(state, rnd)
        runs.append(state)
    _equal(runs[0]["experts"], runs[1]["experts"])
    assert torch.equal(runs[0]["q"], runs[1]["q"])


def test_client_chunks_hold_the_budget():
    # the default linear model: 2 classes x 2 features + 2 biases = 6 parameters;
    # K = 2: 4 bytes x 2 x 6 = 48 bytes of experts per client
    import pflrepro.algorithms.fedmix as FM

    _, alg = _alg({"experts": 2})
    assert alg.client_chunks() == [range(0, 3)]  # 1 GiB: all three clients at once
    for budget, sizes in ((96, [2, 1]), (48, [1, 1, 1]), (1, [1, 1, 1])):
        FM_budget = FM.CHUNK_BYTES
        try:
            FM.CHUNK_BYTES = budget
            assert [len(r) for r in alg.client_chunks()] == sizes
        finally:
            FM.CHUNK_BYTES = FM_budget


@pytest.mark.parametrize("params", [
    {"experts": 2},
    {"experts": 2, "posterior": "label_shard", "gate_hidden": 3},
    {"experts": 3, "gate": "one_hot", "objective": "marginal"},
])
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_rounds_in_chunks_equal_one_pass_bit_for_bit(params, optimizer, monkeypatch):
    """The CPU loop path trains each client alone: chunks change memory, never bits."""
    import pflrepro.algorithms.fedmix as FM

    runs = {}
    for budget in (1 << 30, 1):  # one chunk; chunks of one client
        monkeypatch.setattr(FM, "CHUNK_BYTES", budget)
        e, alg = _alg(params, optimizer=optimizer, lr=0.05)
        state = alg.init()
        losses = []
        for rnd in (1, 2):
            state, loss = alg.round(state, rnd)
            losses.append(loss)
        runs[budget] = (len(alg.client_chunks()), state, np.stack(losses))
    (one, a, la), (many, b, lb) = runs.values()
    assert (one, many) == (1, 3)
    np.testing.assert_array_equal(la, lb)
    for key in a:
        if isinstance(a[key], dict):
            _equal(a[key], b[key])
        else:
            assert torch.equal(a[key], b[key]), key
