"""pflrepro.training.threads: clients on CPU threads (``ClientThreads``), same bits as a loop."""

from __future__ import annotations

import threading
import time

import pytest
import torch
from _fl_helpers import make_data, make_engine

from pflrepro.algorithms import ALGORITHMS
from pflrepro.algorithms.base import parse_hyper
from pflrepro.data.federated import FederatedData
from pflrepro.store import results as R
from pflrepro.training import local_training as LT
from pflrepro.training.engine import Engine
from pflrepro.training.settings import TrainingConfig

# enough clients and samples for every method (FedFomo holds out validation data,
# Clustered FL and FedAMP need several clients)
DATA = dict(n_train=(8, 6, 7, 8, 5), n_test=(3, 2, 3, 2, 2), groups=(0, 0, 1, 1, 1),
            public=6)


def _frame(log: R.MetricLog):
    return log.to_frame({c: "x" if "seed" not in c else 0 for c in R.CONFIG_COLUMNS})


def _run(name: str, workers: int, threads_seen: set[int] | None = None):
    engine = make_engine(make_data(**DATA), seed=5, workers=workers, rounds=3, batch_size=3,
                         optimizer="sgd", lr=0.05, model_options={"hidden": [4]})
    with pytest.MonkeyPatch.context() as patch:
        if threads_seen is not None:
            def spying(inner):
                def spy(*args, **kwargs):
                    threads_seen.add(threading.get_ident())
                    time.sleep(0.002)  # a busy machine: let the other workers take clients
                    return inner(*args, **kwargs)
                return spy

            # a client's step: the plain loss's gradient, or an objective's
            patch.setattr(engine.context, "loss_and_grad", spying(engine.context.loss_and_grad))
            patch.setattr(LT, "loss_and_grad", spying(LT.loss_and_grad))
        cls = ALGORITHMS[name]
        return _frame(engine.run(cls(engine, parse_hyper(cls, {}))))


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_every_algorithm_same_bits_with_client_threads(name: str) -> None:
    seen: set[int] = set()
    threaded = _run(name, workers=3, threads_seen=seen)
    assert threaded.equals(_run(name, workers=1))
    if name == "majority":  # a reference that trains nothing: no gradient anywhere
        assert not seen
        return
    # the clients' gradients really were computed on worker threads
    assert threading.get_ident() not in seen and len(seen) >= 2


def test_cnn_fedavg_same_bits_with_client_threads() -> None:
    # convolutions (oneDNN) on two threads at once; Adam state per client
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(60, 3, 12, 12, generator=gen).contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, 4, (60,), generator=gen)
    parts = torch.arange(60).split(10)
    data = FederatedData(x=x, y=y, train=tuple(p[:8] for p in parts),
                         test=tuple(p[8:] for p in parts), groups=(-1,) * 6, num_classes=4)
    cfg = TrainingConfig(rounds=2, batch_size=4, optimizer="adam", lr=0.01, model="cnn",
                         device="cpu")
    frames = []
    for workers in (1, 2):
        e = Engine(data, cfg, 1, (3, 12, 12), torch.device("cpu"), workers=workers)
        cls = ALGORITHMS["fedavg"]
        frames.append(_frame(e.run(cls(e, parse_hyper(cls, {})))))
    assert frames[0].equals(frames[1])


def test_map_clients_order_and_overlap() -> None:
    e = make_engine(workers=2)
    barrier = threading.Barrier(2, timeout=20)

    def fn(k: int) -> tuple[int, int]:
        if k < 2:
            barrier.wait()  # only passes when clients 0 and 1 run at the same time
        time.sleep(0.01 * (5 - k))  # later clients finish first
        return k, torch.get_num_threads()

    out = list(e.threads.map_clients(fn, [0, 1, 2, 3, 4]))
    assert [k for k, _ in out] == [0, 1, 2, 3, 4]
    assert {n for _, n in out} == {1}  # one torch thread per client thread


def test_map_clients_computes_at_most_two_per_worker_ahead() -> None:
    e = make_engine(workers=2)
    started: list[int] = []
    lock = threading.Lock()

    def fn(k: int) -> int:
        with lock:
            started.append(k)
        return k

    seen = []
    for k in e.threads.map_clients(fn, range(20)):
        time.sleep(0.005)  # a slow consumer
        with lock:
            assert len(started) <= k + 1 + 2 * 2
        seen.append(k)
    assert seen == list(range(20))


def test_map_clients_raises_the_first_error_and_stops() -> None:
    e = make_engine(workers=2)
    done: list[int] = []

    def fn(k: int) -> int:
        if k == 3:
            raise RuntimeError("client 3 failed")
        time.sleep(0.01)
        done.append(k)
        return k

    with pytest.raises(RuntimeError, match="client 3 failed"):
        list(e.threads.map_clients(fn, range(40)))
    assert len(done) < 40  # what had not started was dropped


def test_one_worker_is_a_plain_loop_and_threads_have_own_models() -> None:
    e = make_engine(workers=1)
    assert list(e.threads.map_clients(lambda k: threading.get_ident(), range(3))) == \
        [threading.get_ident()] * 3
    assert e.threads._pool is None
    e2 = make_engine(workers=2)
    nets = list(e2.threads.map_clients(lambda k: e2.net, range(4)))
    assert all(n is not e2.model for n in nets)
    assert e2.net is e2.model  # the engine's own thread keeps the original


def test_workers_must_be_positive() -> None:
    with pytest.raises(ValueError, match="workers"):
        make_engine(workers=0)
