"""pflrepro.training.communication, and every method's per-round traffic against its formula."""

import numpy as np
import pytest
import torch
from _fl_helpers import make_data, make_engine

from pflrepro.algorithms import ALGORITHMS
from pflrepro.algorithms.base import parse_hyper
from pflrepro.store import results as R
from pflrepro.training.communication import Traffic, size

K = 4
DATA = dict(n_train=(8, 6, 7, 8), n_test=(3, 2, 3, 2), groups=(0, 0, 1, 1), public=5)


def test_size_counts_scalars():
    assert size({"w": torch.zeros(3, 4), "b": torch.zeros(4)}) == 16
    assert size({"w": np.zeros((2, 5))}) == 10


def test_traffic_counts_flushes_and_resets():
    t = Traffic(3)
    t.exchange(range(3), up=5, down=7)
    t.send_up(1, 2)
    t.send_down([0, 2], 1)
    log = R.MetricLog()
    t.flush(4, log)
    rows = {(c, m): v for r, c, m, v in zip(log.rounds, log.clients, log.metrics, log.values,
                                           strict=True) if r == 4}
    assert [rows[(c, R.COMM_UP)] for c in range(3)] == [5, 7, 5]
    assert [rows[(c, R.COMM_DOWN)] for c in range(3)] == [8, 7, 8]
    assert not t.up.any() and not t.down.any()


def _run(name: str, **hyper):
    engine = make_engine(make_data(**DATA), optimizer="sgd", lr=0.05, rounds=2)
    cls = ALGORITHMS[name]
    log = engine.run(cls(engine, parse_hyper(cls, hyper)))
    frame = {(r, c, m): v for r, c, m, v in zip(log.rounds, log.clients, log.metrics,
                                                log.values, strict=True)
             if m in (R.COMM_UP, R.COMM_DOWN)}
    return engine, frame


def _per_client(frame, rnd, metric):
    return [frame[(rnd, k, metric)] for k in range(K)]


# (up, down) per client and round, in models of P scalars
SERVER = {"fedavg": (1, 1), "fedavg_plus": (1, 1), "fedprox": (1, 1), "fedprox_ft": (1, 1),
          "apfl": (1, 1), "clustered_fl": (1, 1), "fedamp": (1, 1), "heurfedamp": (1, 1),
          "ditto": (1, 1), "scaffold": (2, 2), "local": (0, 0), "majority": (0, 0), "fedem": (4, 4),
          "fedfomo": (1, K - 1), "hypcluster": (1, 3), "per_fedavg": (1, 1),
          "feddf": (1, 1)}  # FedDF's distillation is server-side: no traffic


def test_federico_one_step_mstep_sends_one_gradient_per_peer():
    """``mstep: step`` / ``full``: M peers, each a model down and one w_ij + gradient up."""
    for mstep in ("step", "full"):
        engine, frame = _run("federico", mstep=mstep, warmup_rounds=0)
        p, m = engine.model_size, ALGORITHMS["federico"].Hyper().neighbors
        for rnd in (1, 2):
            up = _per_client(frame, rnd, R.COMM_UP)
            down = _per_client(frame, rnd, R.COMM_DOWN)
            assert sum(up) == sum(down) == K * m * (2 * p + 1)


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_every_method_reports_its_traffic_every_round(name):
    engine, frame = _run(name)
    p = engine.model_size
    for rnd in (0, 1, 2):  # rows for every client and round, zeros included
        for metric in (R.COMM_UP, R.COMM_DOWN):
            assert all((rnd, k, metric) in frame for k in range(K)), (rnd, metric)
    for rnd in (1, 2):
        up, down = _per_client(frame, rnd, R.COMM_UP), _per_client(frame, rnd, R.COMM_DOWN)
        if name == "perfedckt":  # soft decisions on P up; c centroids down from round 2
            numbers = len(engine.data.public) * engine.data.num_classes
            clusters = ALGORITHMS[name].Hyper().clusters
            assert up == [numbers] * K
            assert down == [(clusters * numbers if rnd > 1 else 0)] * K
            continue
        if name == "federico" and rnd <= ALGORITHMS[name].Hyper().warmup_rounds:
            # warm-up: nothing sampled or sent; its last round starts the table, every
            # model to every other client
            last = rnd == ALGORITHMS[name].Hyper().warmup_rounds
            assert up == down == [(K - 1) * p if last else 0] * K
            continue
        if name == "federico":  # peers: whatever one sends another receives
            # each of M peers: its model (P), then w_ij and a gradient (P + 1) per M-step
            # of that model (default `mstep: epoch`: the owner's local steps per round)
            m = ALGORITHMS[name].Hyper().neighbors
            steps = [engine.steps_per_round(k) for k in range(K)]
            assert sum(up) == sum(down)
            assert K * m * (p + min(steps) * (p + 1)) <= sum(up)
            assert sum(up) <= K * m * (p + max(steps) * (p + 1))
            assert all(d >= m * p for d in down)
            continue
        if name == "fedmix":  # K experts each way; per-class sums + counts up, q down
            experts = ALGORITHMS[name].Hyper().experts
            c = engine.data.num_classes
            assert up == [experts * p + c * experts + c] * K
            assert down == [experts * p + c * experts] * K
            continue
        assert name in SERVER, f"no traffic formula for {name!r} in this test"
        assert up == [SERVER[name][0] * p] * K and down == [SERVER[name][1] * p] * K
    if name == "federico" and not ALGORITHMS[name].Hyper().warmup_rounds:
        # the first loss table: every model to every other client
        assert _per_client(frame, 0, R.COMM_DOWN) == [(K - 1) * p] * K
    else:
        assert _per_client(frame, 0, R.COMM_UP) == [0.0] * K
