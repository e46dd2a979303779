"""Checkpoint and resume: an interrupted run resumes to bit-identical metrics."""

from pathlib import Path

import pytest
import torch
from _fl_helpers import make_data, make_engine

from pflrepro.algorithms import ALGORITHMS
from pflrepro.algorithms.base import parse_hyper
from pflrepro.checkpoint import Checkpointer, Interrupted
from pflrepro.results import MetricLog

ROUNDS = 5
# enough clients/samples for every method (FedFomo holds out validation data,
# Clustered FL and FedAMP need several clients)
DATA = dict(n_train=(8, 6, 7, 8), n_test=(3, 2, 3, 2), groups=(0, 0, 1, 1))


def _frame(log: MetricLog):
    return log.to_frame({c: "x" if c not in ("split_seed", "train_seed") else 0
                         for c in ("experiment", "dataset", "partition", "method",
                                   "algorithm", "params", "split_seed", "train_seed",
                                   "package_version", "git_revision")})


def _run(name: str, checkpoint: Checkpointer | None, stop_after: int | None = None):
    engine = make_engine(make_data(**DATA), seed=3, rounds=ROUNDS, batch_size=3,
                         optimizer="sgd", lr=0.05, model_options={"hidden": [4]})
    cls = ALGORITHMS[name]
    algorithm = cls(engine, parse_hyper(cls, {}))
    if stop_after is not None:
        inner = algorithm.round

        def round_then_stop(state, rnd):
            out = inner(state, rnd)
            if rnd == stop_after:
                engine.stop = True  # what the SIGTERM handler does
            return out

        algorithm.round = round_then_stop
    return engine.run(algorithm, checkpoint=checkpoint)


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
@pytest.mark.parametrize("stop_after", [1, 3])
def test_resume_after_interruption_is_bit_identical(tmp_path: Path, name: str,
                                                     stop_after: int) -> None:
    reference = _frame(_run(name, None))
    ckpt = Checkpointer(tmp_path / "run.ckpt", fingerprint="spec-a", every=100)
    with pytest.raises(Interrupted):
        _run(name, ckpt, stop_after=stop_after)
    assert ckpt.path.exists()
    resumed = _frame(_run(name, ckpt))  # a fresh engine and algorithm, like a new process
    assert resumed.equals(reference)


def test_periodic_checkpoints_and_fingerprint(tmp_path: Path) -> None:
    ckpt = Checkpointer(tmp_path / "run.ckpt", fingerprint="spec-a", every=2)
    _run("fedavg", ckpt)
    saved = torch.load(ckpt.path, weights_only=True)
    assert saved["round"] == 4  # rounds 2 and 4; none after the final round 5
    other = Checkpointer(ckpt.path, fingerprint="spec-b", every=2)
    assert other.load(torch.device("cpu")) is None  # another spec: not resumed from
    ckpt.remove()
    assert not ckpt.path.exists()


def test_interval_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="interval"):
        Checkpointer(tmp_path / "x", "f", every=0)
