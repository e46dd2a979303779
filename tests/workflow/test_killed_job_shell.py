"""A training job's shell killed under a running Snakemake: its Python child ends too.

Snakemake runs each job as ``bash -c "... python -m pflrepro train ..."`` and, when the
job fails, kills that shell only. A ``SIGKILL`` to the shell (an out-of-memory killer,
a user's ``kill -9``) makes Snakemake record the job as failed; the Python child must
end with it (``--exit-with-parent``, :mod:`pflrepro.store.lifeline`), or it trains on,
writes its run after the failure was recorded, and the next ``snakemake`` takes that
run as finished and never measures it. Here the child ends (its checkpoint saved), no
run appears, and the next ``snakemake`` trains the run again and finishes; a benchmark
record that is missing all the same is named by the cost table, which goes on.

Tier ``workflow_full`` (``pytest -m workflow_full``): this file builds a project of its own.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from _wf import TINY, new_workdir, snakemake, start_snakemake

pytestmark = [pytest.mark.workflow, pytest.mark.workflow_full,
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc")]

#: Rounds of the one training job: enough that it is still training when its shell is
#: killed and for a while after, so that a child left running would write its run late.
ROUNDS = 300


def _processes() -> dict[int, tuple[int, str]]:
    """Every process: pid -> (parent pid, command line), read from ``/proc``."""
    out = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:  # ended meanwhile
            continue
        out[int(entry.name)] = (int(stat[stat.rindex(")") + 2:].split()[1]), cmdline)
    return out


def _descendants(root: int, table: dict[int, tuple[int, str]]) -> list[int]:
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _train_job(snake: subprocess.Popen, log: Path) -> tuple[int, int]:
    """(job shell, its ``pflrepro train`` child) under ``snake``, once the run trains."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        assert snake.poll() is None, snake.communicate()[0]
        table = _processes()
        for pid in _descendants(snake.pid, table):
            parent, cmdline = table[pid]
            if " pflrepro " in cmdline and " train " in cmdline and "bash" in table.get(
                    parent, (0, ""))[1] and log.is_file() and "round" in log.read_text():
                return parent, pid
        time.sleep(0.05)
    raise AssertionError("no training job started")


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def _wait_gone(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_a_killed_job_shell_takes_its_training_process_with_it(tmp_path: Path) -> None:
    config = yaml.safe_load(TINY.read_text())
    tiny = config["experiments"]["tiny"]
    config["methods"] = {"fedavg": config["methods"]["fedavg"]}
    tiny.update(methods=["fedavg"], train_seeds=[0], partitions=tiny["partitions"][:1])
    tiny.pop("public")
    config["training"]["rounds"] = ROUNDS
    work = new_workdir(tmp_path / "wf", config)
    logs = work / "logs/train/tiny"
    snake = start_snakemake(work)
    child = None
    try:
        deadline = time.monotonic() + 300
        while not (logs.is_dir() and list(logs.rglob("*.log"))):
            assert snake.poll() is None and time.monotonic() < deadline, snake.communicate()[0]
            time.sleep(0.05)
        log = next(logs.rglob("*.log"))
        shell, child = _train_job(snake, log)
        os.kill(shell, signal.SIGKILL)
        out, _ = snake.communicate(timeout=300)
        assert snake.returncode != 0, out
        assert "Error in rule train" in out, out
        # Snakemake has recorded the failure: the child ends (SIGTERM, its checkpoint
        # saved at the end of its round) and no run appears after
        assert _wait_gone(child, 30), "the training process outlived its killed shell"
    finally:
        if child is not None and _alive(child):
            os.kill(child, signal.SIGKILL)
    run = work / "results/runs/tiny" / log.relative_to(logs).with_suffix(".parquet")
    assert not run.exists(), "a run was written after Snakemake recorded its job as failed"
    assert "stopped after round" in log.read_text()
    assert run.with_name(run.name + ".ckpt").exists()
    benchmark = (work / "results/benchmarks/train/tiny"
                 / log.relative_to(logs).with_suffix(".tsv"))
    assert not benchmark.exists()

    # the next snakemake trains the run again (from its checkpoint) and finishes
    snakemake(work)
    assert run.is_file() and benchmark.is_file()
    assert "resuming after round" in log.read_text()
    assert "Nothing to be done" in "".join(snakemake(work, "-n").stdout)

    # a benchmark record missing all the same: the cost table names it and goes on
    benchmark.unlink()
    snakemake(work, "--forcerun", "cost_table")
    assert "no benchmark record" in (work / "logs/cost/tiny.log").read_text()
    assert (work / "results/tables/tiny-cost.md").is_file()
