"""Checkpoint and resume: an interrupted run resumes to bit-identical metrics.

A checkpoint that does not verify (flipped bytes, truncated, no digest, a payload
``weights_only`` refuses) is set aside and the run restarts from round 0.
"""

import hashlib
import logging
from pathlib import Path

import pytest
import torch
from _fl_helpers import make_data, make_engine

from pflrepro.algorithms import ALGORITHMS
from pflrepro.algorithms.base import parse_hyper
from pflrepro.store import results as R
from pflrepro.store.checkpoint import (
    MAGIC,
    TRAILER,
    Checkpointer,
    CorruptCheckpoint,
    Interrupted,
)
from pflrepro.store.results import MetricLog

ROUNDS = 5
# enough clients/samples for every method (FedFomo holds out validation data,
# Clustered FL and FedAMP need several clients)
DATA = dict(n_train=(8, 6, 7, 8), n_test=(3, 2, 3, 2), groups=(0, 0, 1, 1), public=6)


def _frame(log: MetricLog):
    return log.to_frame({c: "x" if c not in ("split_seed", "train_seed") else 0
                         for c in R.CONFIG_COLUMNS})


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
    assert not list(tmp_path.glob("*.corrupt-*"))  # a good checkpoint is never set aside


def test_periodic_checkpoints_and_fingerprint(tmp_path: Path) -> None:
    ckpt = Checkpointer(tmp_path / "run.ckpt", fingerprint="spec-a", every=2)
    _run("fedavg", ckpt)
    raw = ckpt.path.read_bytes()
    assert raw[-TRAILER:-TRAILER + len(MAGIC)] == MAGIC  # the digest trailer
    assert raw[-TRAILER + len(MAGIC):] == hashlib.sha256(raw[:-TRAILER]).digest()
    resumed = ckpt.load(torch.device("cpu"))
    assert resumed is not None and resumed[0] == 4  # rounds 2 and 4; none after round 5
    other = Checkpointer(ckpt.path, fingerprint="spec-b", every=2)
    assert other.load(torch.device("cpu")) is None  # another spec: not resumed from
    ckpt.remove()
    assert not ckpt.path.exists()


def test_interval_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="interval"):
        Checkpointer(tmp_path / "x", "f", every=0)


class NotAllowed:
    """A class ``torch.load(weights_only=True)`` refuses to build."""


def _flip_16(path: Path) -> None:
    raw = bytearray(path.read_bytes())
    mid = len(raw) // 2
    raw[mid:mid + 16] = bytes(b ^ 0xFF for b in raw[mid:mid + 16])
    path.write_bytes(bytes(raw))


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _strip_digest(path: Path) -> None:  # as written before checkpoints carried digests
    path.write_bytes(path.read_bytes()[:-TRAILER])


def _unsafe_payload(path: Path) -> None:  # verifies, but weights_only refuses its payload
    import io

    buf = io.BytesIO()
    torch.save({"format": 1, "fingerprint": "spec-a", "round": 2, "evil": NotAllowed()}, buf)
    payload = buf.getvalue()
    path.write_bytes(payload + MAGIC + hashlib.sha256(payload).digest())


@pytest.mark.parametrize("damage, why", [
    (_flip_16, "sha256 is"),
    (_truncate, "no checksum trailer"),
    (_strip_digest, "no checksum trailer"),
    (_unsafe_payload, "weights_only=True"),
])
def test_unusable_checkpoint_is_set_aside_and_run_restarts(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, damage, why: str) -> None:
    reference = _frame(_run("fedavg", None))
    ckpt = Checkpointer(tmp_path / "results" / "run.ckpt", fingerprint="spec-a", every=100)
    with pytest.raises(Interrupted):
        _run("fedavg", ckpt, stop_after=2)
    damage(ckpt.path)
    damaged = ckpt.path.read_bytes()
    with caplog.at_level(logging.WARNING, logger="pflrepro.store.checkpoint"):
        restarted = _frame(_run("fedavg", ckpt))
    assert restarted.equals(reference)  # from round 0: as if never interrupted
    aside = tmp_path / "results" / "run.ckpt.corrupt-1"
    assert aside.read_bytes() == damaged  # kept for inspection, out of the way
    assert not ckpt.path.exists()  # no checkpoint due before the final round
    message = " ".join(r.getMessage() for r in caplog.records)
    assert str(ckpt.path) in message and str(aside) in message and why in message
    assert "round 0" in message
    # the next damaged checkpoint gets the next free name
    with pytest.raises(Interrupted):
        _run("fedavg", ckpt, stop_after=2)
    _truncate(ckpt.path)
    assert _frame(_run("fedavg", ckpt)).equals(reference)
    assert (tmp_path / "results" / "run.ckpt.corrupt-2").exists() and aside.exists()


def test_digest_checked_before_torch_load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ckpt = Checkpointer(tmp_path / "results" / "run.ckpt", fingerprint="spec-a", every=100)
    with pytest.raises(Interrupted):
        _run("fedavg", ckpt, stop_after=1)
    _flip_16(ckpt.path)
    calls = []
    monkeypatch.setattr(torch, "load", lambda *a, **k: calls.append(1))
    assert ckpt.load(torch.device("cpu")) is None
    assert calls == []  # torch.load never saw the unverified bytes



def test_an_unusable_checkpoint_outside_results_is_never_moved(tmp_path: Path) -> None:
    # `pflrepro train --checkpoint notes.txt` renamed the user's file to .corrupt-1
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    ckpt = Checkpointer(notes, fingerprint="spec-a", every=100)
    with pytest.raises(CorruptCheckpoint, match="outside a results folder, so nothing was "
                                                "changed"):
        ckpt.load(torch.device("cpu"))
    assert notes.read_text() == "my notes\n" and list(tmp_path.iterdir()) == [notes]
