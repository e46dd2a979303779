"""Whether a lock is held by a running Snakemake (its message advised --unlock either way)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from pflrepro.store.locks import _is_snakemake, lock_note, running_snakemakes

pytestmark = pytest.mark.skipif(not Path("/proc/self/cwd").exists(), reason="needs /proc")


@pytest.mark.parametrize("argv, expected", [
    (["/venv/bin/snakemake", "--cores", "2"], True),
    (["/usr/bin/python3", "-m", "snakemake", "-n"], True),
    (["python", "-m", "pflrepro", "train"], False),
    (["bash", "-c", "snakemake"], False),
])
def test_what_runs_snakemake(argv: list[str], expected: bool) -> None:
    assert _is_snakemake(argv) is expected


def test_no_lock_no_note(tmp_path: Path) -> None:
    assert lock_note(tmp_path) is None
    (tmp_path / ".snakemake/locks").mkdir(parents=True)
    assert lock_note(tmp_path) is None


def test_a_stale_lock_and_a_held_one_are_told_apart(tmp_path: Path) -> None:
    locks = tmp_path / ".snakemake/locks"
    locks.mkdir(parents=True)
    (locks / "0.input.lock").write_text("results/x\n")
    note = lock_note(tmp_path)
    assert note is not None and "no Snakemake runs in this directory" in note
    assert "--unlock` is safe" in note
    # a process whose argv[0] is snakemake, working in the directory
    proc = subprocess.Popen(["bash", "-c", "exec -a snakemake sleep 30"], cwd=tmp_path)
    try:
        deadline = time.monotonic() + 10
        while proc.pid not in running_snakemakes(tmp_path):
            assert time.monotonic() < deadline, "not seen"
            time.sleep(0.05)
        note = lock_note(tmp_path)
        assert note is not None and f"Snakemake is running in this directory (pid {proc.pid})" \
            in note and "do not --unlock" in note
    finally:
        proc.kill()
        proc.wait()
    assert running_snakemakes(tmp_path) == []
