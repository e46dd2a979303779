"""Kill a real training process mid-run (SIGTERM, SIGKILL) and resume it.

The resumed run must write a Parquet file byte-identical to an uninterrupted run.
The kill waits for the first periodic checkpoint, then a seeded random delay, so
every trial interrupts a run in progress at a different round.
The default tier runs one trial per signal; the other trials and the job of two
runs are in the ``workflow_full`` tier (``pytest -m workflow_full``; ``.ci/run`` runs it).
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from pflrepro.data.datasets import prepare_dataset
from pflrepro.data.partition import from_spec, write_partition
from pflrepro.data.store import load_dataset

pytestmark = pytest.mark.workflow

SPEC = {"experiment": "resume", "dataset": "digits", "partition": "p", "method": "federico",
        "algorithm": "federico", "params": {}, "split_seed": 0, "train_seed": 0,
        # 120 rounds (~4 s of training): the kill, 0-1 s after the first checkpoint,
        # lands mid-run (FedeRiCo's default M-step is one step per round: fast rounds)
        "training": {"rounds": 120, "model": "mlp", "model_options": {"hidden": [32]},
                     "device": "cpu", "eval_every": 1}}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("resume")
    prepare_dataset("digits", root / "digits", root / "raw")
    p = from_spec({"scheme": "label_groups", "clients": 6, "groups": 3})
    frame = p.split(load_dataset(root / "digits").y[:], 10, 0)
    write_partition(frame, str(root / "p.parquet"), partitioner=p, dataset="digits", seed=0)
    return root / "digits", root / "p.parquet"


def _cmd(inputs: tuple[Path, Path], out: Path, checkpoint: Path | None) -> list[str]:
    cmd = [sys.executable, "-m", "pflrepro", "train", "--spec", json.dumps(SPEC),
           "--data", str(inputs[0]), "--partition", str(inputs[1]), "--out", str(out)]
    if checkpoint is not None:
        cmd += ["--checkpoint", str(checkpoint), "--checkpoint-every", "3"]
    return cmd


@pytest.fixture(scope="module")
def reference(inputs: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> bytes:
    out = tmp_path_factory.mktemp("ref") / "run.parquet"
    subprocess.run(_cmd(inputs, out, None), check=True, capture_output=True)
    return out.read_bytes()


# trial 0 of each signal in the default tier, the other delays in workflow_full
@pytest.mark.parametrize("trial", [0, *(pytest.param(t, marks=pytest.mark.workflow_full)
                                        for t in (1, 2))])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_killed_run_resumes_to_identical_results(inputs: tuple[Path, Path], reference: bytes,
                                                 tmp_path: Path, sig: signal.Signals,
                                                 trial: int) -> None:
    out, ckpt = tmp_path / "run.parquet", tmp_path / "run.parquet.ckpt"
    proc = subprocess.Popen(_cmd(inputs, out, ckpt), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while not ckpt.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert ckpt.exists(), "no checkpoint was written"
    time.sleep(np.random.default_rng(trial + 10 * int(sig)).uniform(0.0, 1.0))
    proc.send_signal(sig)
    code = proc.wait(timeout=120)
    stderr = proc.stderr.read().decode() if proc.stderr else ""
    if code == 0:
        pytest.skip("the run finished before the signal arrived")
    if out.exists():  # killed after writing its output: it must be the complete file
        assert out.read_bytes() == reference
        pytest.skip("the run wrote its output before the signal arrived")
    assert not out.exists()  # nothing half-written
    assert ckpt.exists()
    if sig == signal.SIGTERM:
        assert code == 143, stderr  # checkpoint saved at the end of the round, then stop
        assert "stopped after round" in stderr
    subprocess.run(_cmd(inputs, out, ckpt), check=True, capture_output=True)
    assert out.read_bytes() == reference
    assert not ckpt.exists()  # removed once the results are written


@pytest.mark.workflow_full
def test_a_job_of_several_runs_stopped_in_its_second_resumes_both(
        inputs: tuple[Path, Path], reference: bytes, tmp_path: Path) -> None:
    # issue 28, item 2: SIGTERM while the second of two runs trains. The first run's
    # table is whole, the second has none; the first's checkpoint is kept until the job
    # ends, so the retry resumes the first from its last checkpoint, the second from its
    # checkpoint, and both tables have the bytes of their runs trained alone
    second = {**SPEC, "train_seed": 1}
    alone = tmp_path / "alone.parquet"
    cmd = _cmd(inputs, alone, None)
    assert cmd[4:6] == ["--spec", json.dumps(SPEC)]
    subprocess.run([*cmd[:5], json.dumps(second), *cmd[6:]], check=True, capture_output=True)
    outs = [tmp_path / "run0.parquet", tmp_path / "run1.parquet"]
    ckpts = [tmp_path / "run0.ckpt", tmp_path / "run1.ckpt"]
    logs = [tmp_path / "run0.log", tmp_path / "run1.log"]
    cmd = [sys.executable, "-m", "pflrepro", "train", "--spec", json.dumps(SPEC),
           json.dumps(second), "--data", str(inputs[0]), "--partition", str(inputs[1]),
           str(inputs[1]), "--out", *map(str, outs), "--checkpoint", *map(str, ckpts),
           "--checkpoint-every", "3", "--log", *map(str, logs)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 240
    while not ckpts[1].exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert ckpts[1].exists(), "the second run wrote no checkpoint"
    proc.send_signal(signal.SIGTERM)
    code = proc.wait(timeout=120)
    if code == 0:
        pytest.skip("the job finished before the signal arrived")
    assert code == 143
    assert outs[0].read_bytes() == reference and not outs[1].exists()
    assert ckpts[0].exists() and ckpts[1].exists()
    subprocess.run(cmd, check=True, capture_output=True)
    assert outs[0].read_bytes() == reference and outs[1].read_bytes() == alone.read_bytes()
    # the first run resumes from its last periodic checkpoint (every 3 rounds), not round 0
    resumed = re.search(r"resuming after round (\d+)", logs[0].read_text())
    assert resumed and int(resumed[1]) >= SPEC["training"]["rounds"] - 3
    assert "resuming after round" in logs[1].read_text()
    assert not ckpts[0].exists() and not ckpts[1].exists()
