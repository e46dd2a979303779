"""A job's process ends with its shell and with its Snakemake (``--exit-with-parent``).

The campaign's stuck case: SIGKILL to a job's ``bash -c ... pflrepro train`` wrapper left
the Python child running; it wrote its run after Snakemake had recorded the failure.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pflrepro.store.lifeline import parent_of

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")

CHILD = """import os, sys, time
from pflrepro.store.lifeline import exit_with_parent
assert exit_with_parent(interval_s=0.2)
with open(sys.argv[1] + ".tmp", "w") as fh:
    fh.write(str(os.getpid()))
os.replace(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep(60)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2] != "Z"


def _child_pid(ready: Path, shell: subprocess.Popen) -> int:
    deadline = time.monotonic() + 60
    while not ready.exists():
        assert time.monotonic() < deadline and shell.poll() is None
        time.sleep(0.05)
    return int(ready.read_text())


def _wait_gone(pid: int, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


def _start(tmp_path: Path, levels: int) -> tuple[subprocess.Popen, int, Path]:
    """``bash -c`` (nested ``levels`` deep) running the child; (outer shell, child pid)."""
    ready = tmp_path / "ready"
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    command = f"{sys.executable} {script} {ready}; true"
    for _ in range(levels - 1):
        command = f"bash -c '{command}'; true"
    shell = subprocess.Popen(["bash", "-c", command], start_new_session=True)
    return shell, _child_pid(ready, shell), ready


def test_the_child_dies_with_its_shell(tmp_path: Path) -> None:
    shell, child, _ = _start(tmp_path, 1)
    try:
        assert parent_of(child) == shell.pid
        os.kill(shell.pid, signal.SIGKILL)
        shell.wait()
        assert _wait_gone(child), "the child outlived its killed shell"
    finally:
        os.killpg(shell.pid, signal.SIGKILL) if _alive(child) else None


def test_the_child_dies_when_its_shells_parent_dies(tmp_path: Path) -> None:
    # Snakemake killed: the job's shell lives on (orphaned), so the child watches it
    outer, child, _ = _start(tmp_path, 2)
    try:
        shell = parent_of(child)
        assert shell is not None and parent_of(shell) == outer.pid
        os.kill(outer.pid, signal.SIGKILL)
        outer.wait()
        assert _wait_gone(child), "the child outlived its shell's parent"
    finally:
        os.killpg(outer.pid, signal.SIGKILL) if _alive(child) else None


def test_every_workflow_job_asks_for_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # the rules all pass --require-source; their commands stay as they were (Snakemake
    # reruns every job whose command text changes)
    import pflrepro
    import pflrepro.store.lifeline as lifeline
    from pflrepro.cli import main

    calls: list[bool] = []
    monkeypatch.setattr(lifeline, "exit_with_parent", lambda: calls.append(True) or True)
    src = str(Path(pflrepro.__file__).resolve().parent.parent)
    assert main(["list", "datasets"]) == 0 and calls == []
    assert main(["--require-source", src, "list", "datasets"]) == 0 and calls == [True]
    assert main(["--exit-with-parent", "list", "datasets"]) == 0 and calls == [True, True]


def test_a_job_starting_after_its_snakemake_died_stops_at_once(tmp_path: Path) -> None:
    # the campaign's leftover: a job that started at about the moment of the kill found
    # its shell already orphaned, watched init, and lived on
    ready = tmp_path / "ready"
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    ended = tmp_path / "ended"
    inner = f"sleep 0.5; {sys.executable} {script} {ready}; touch {ended}"
    outer = subprocess.Popen(["bash", "-c", f"bash -c '{inner}' & exit 0"],
                             start_new_session=True)
    outer.wait()  # the "Snakemake" is gone before the job starts
    deadline = time.monotonic() + 30
    while not (ready.exists() or ended.exists()) and time.monotonic() < deadline:
        time.sleep(0.05)
    if ended.exists() and not ready.exists():  # it stopped before it said it started
        return
    assert ready.exists(), "the job neither started nor ended within 30 s"
    child = int(ready.read_text())
    try:
        assert _wait_gone(child), "a job whose Snakemake had died lived on"
    finally:
        if _alive(child):
            os.kill(child, signal.SIGKILL)
