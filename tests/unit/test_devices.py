"""Device leases: one job per GPU slot, across processes, freed when a job dies."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from pflrepro.training import devices
from pflrepro.training.devices import claim

KEYS = ["gpu-A", "gpu-B", "gpu-C"]


def no_sleep(_: float) -> None:
    raise AssertionError("claim waited although a slot was free")


def test_jobs_spread_over_devices_before_sharing_one(tmp_path: Path) -> None:
    leases = [claim(KEYS, tmp_path, per_device=2, sleep=no_sleep) for _ in range(5)]
    assert [(lease.index, lease.slot) for lease in leases] == [
        (0, 0), (1, 0), (2, 0), (0, 1), (1, 1)]
    for lease in leases:
        lease.release()


def test_a_released_slot_is_taken_again(tmp_path: Path) -> None:
    first = claim(KEYS, tmp_path, sleep=no_sleep)
    second = claim(KEYS, tmp_path, sleep=no_sleep)
    assert (first.index, second.index) == (0, 1)
    first.release()
    third = claim(KEYS, tmp_path, sleep=no_sleep)
    assert third.index == 0
    second.release()
    third.release()


def test_all_slots_taken_waits_then_times_out(tmp_path: Path) -> None:
    held = [claim(KEYS[:2], tmp_path) for _ in range(2)]
    sleeps: list[float] = []
    with pytest.raises(TimeoutError, match="2 device slots"):
        claim(KEYS[:2], tmp_path, poll_s=0.01, timeout_s=0.05, sleep=sleeps.append)
    assert sleeps and all(s == 0.01 for s in sleeps)
    for lease in held:
        lease.release()


def test_waiting_job_gets_the_slot_when_it_is_freed(tmp_path: Path) -> None:
    held = claim(KEYS[:1], tmp_path)
    calls = []

    def sleep(_: float) -> None:  # the holder finishes while we wait
        calls.append(1)
        if len(calls) == 3:
            held.release()

    lease = claim(KEYS[:1], tmp_path, poll_s=0.0, timeout_s=10, sleep=sleep)
    assert (lease.index, len(calls)) == (0, 3)
    lease.release()


HOLDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from pflrepro.training.devices import claim
    lease = claim(sys.argv[2].split(","), Path(sys.argv[1]), timeout_s=20, poll_s=0.05)
    print(lease.index, flush=True)
    time.sleep(60)
""")


def holder(tmp_path: Path, keys: list[str]) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(Path(devices.__file__).parents[1])}
    return subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path), ",".join(keys)],
                            stdout=subprocess.PIPE, text=True, env=env)


def test_concurrent_processes_get_distinct_devices_and_a_killed_one_frees_its_own(
        tmp_path: Path) -> None:
    keys = ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]
    procs = [holder(tmp_path, keys) for _ in range(4)]
    try:
        got = [int(p.stdout.readline()) for p in procs]
        assert sorted(got) == [0, 1, 2, 3]
        # every slot is held by another process: this one must not get one
        with pytest.raises(TimeoutError):
            claim(keys, tmp_path, poll_s=0.01, timeout_s=0.1)
        victim = procs[got.index(2)]
        victim.send_signal(signal.SIGKILL)
        victim.wait(10)
        lease = claim(keys, tmp_path, poll_s=0.05, timeout_s=10)
        assert lease.index == 2
        lease.release()
    finally:
        for p in procs:
            p.kill()
            p.wait(10)
            p.stdout.close()


def test_settings_come_from_the_environment_and_bad_values_raise(tmp_path: Path) -> None:
    assert devices.jobs_per_device({}) == 1
    assert devices.jobs_per_device({devices.JOBS_PER_GPU_ENV: "3"}) == 3
    for bad in ("0", "-1", "two", ""):
        with pytest.raises(ValueError, match=devices.JOBS_PER_GPU_ENV):
            devices.jobs_per_device({devices.JOBS_PER_GPU_ENV: bad})
    assert devices.lock_dir({devices.LOCK_DIR_ENV: str(tmp_path)}) == tmp_path
    assert devices.lock_dir({}).name == f"pflrepro-gpu-locks-{os.getuid()}"
    with pytest.raises(ValueError, match="no devices"):
        claim([], tmp_path)


def test_keys_with_odd_characters_make_safe_file_names(tmp_path: Path) -> None:
    with claim(["gpu-../x y"], tmp_path) as lease:
        assert lease.path.parent == tmp_path
        assert "pid" in lease.path.read_text()


@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="needs CUDA")
def test_cuda_lease_takes_a_visible_device(tmp_path: Path, monkeypatch) -> None:
    import torch

    monkeypatch.setenv(devices.LOCK_DIR_ENV, str(tmp_path))
    monkeypatch.delenv(devices.JOBS_PER_GPU_ENV, raising=False)
    keys = devices.cuda_keys()
    assert len(keys) == torch.cuda.device_count() and len(set(keys)) == len(keys)
    with devices.cuda_lease() as first:
        assert first.index == 0
        if len(keys) > 1:
            with devices.cuda_lease() as second:
                assert second.index == 1
        else:
            with pytest.raises(TimeoutError):
                claim(keys, tmp_path, poll_s=0.01, timeout_s=0.1)


def test_choose_device():
    cpu = torch.device("cpu")
    assert devices.choose_device("cpu") == cpu
    if not torch.cuda.is_available():
        assert devices.choose_device("auto") == cpu
        with pytest.raises(RuntimeError):
            devices.choose_device("cuda")
