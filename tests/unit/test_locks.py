"""Whether a lock is held by a running Snakemake (its message advised --unlock either way)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pflrepro.store.locks import is_snakemake, lock_note, running_snakemakes, survey

pytestmark = pytest.mark.skipif(not Path("/proc/self/cwd").exists(), reason="needs /proc")

#: Launchers of Snakemake as their command lines read in /proc/<pid>/cmdline.
LAUNCHERS = {
    "script": ["/venv/bin/snakemake", "--cores", "2"],
    "script through its #! line": ["/venv/bin/python3", "/venv/bin/snakemake", "--cores", "2"],
    "script through an interpreter with options": ["python3.11", "-u", "-X", "dev",
                                                   "/venv/bin/snakemake", "-n"],
    "module": ["/usr/bin/python3", "-m", "snakemake", "-n"],
    "module's cli": ["python", "-m", "snakemake.cli", "--cores", "1"],
    "code": ["python3", "-c", "from snakemake.cli import main; main()"],
    "SLURM login node": ["/home/u/.venv/bin/python3", "/home/u/.venv/bin/snakemake",
                         "--profile", "profiles/slurm"],
}
#: Command lines that run no Snakemake (a job's shell, a training job, a plugin module).
NOT_SNAKEMAKE = [
    ["python", "-m", "pflrepro", "train"],
    ["bash", "-c", "snakemake"],
    ["python3", "tools/snakemake_helper.py"],
    ["python3", "-m", "snakemake_executor_plugin_slurm"],
    ["sleep", "snakemake"],
    [],
]
#: A fake pid beyond any kernel's pid_max, so never this process or an ancestor.
FAKE = 5_000_000


@pytest.mark.parametrize("argv", LAUNCHERS.values(), ids=LAUNCHERS.keys())
def test_every_launcher_runs_snakemake(argv: list[str]) -> None:
    assert is_snakemake(argv)


@pytest.mark.parametrize("argv", NOT_SNAKEMAKE, ids=map(" ".join, NOT_SNAKEMAKE))
def test_other_command_lines_do_not(argv: list[str]) -> None:
    assert not is_snakemake(argv)


def _fake_process(proc: Path, pid: int, argv: list[str], cwd: Path | None,
                  open_files: dict[Path, int] | None = None) -> None:
    """A /proc/<pid> entry: its command line, working directory and open files (flags)."""
    entry = proc / str(pid)
    (entry / "fd").mkdir(parents=True)
    (entry / "fdinfo").mkdir()
    (entry / "cmdline").write_bytes(b"".join(a.encode() + b"\0" for a in argv))
    if cwd is not None:
        (entry / "cwd").symlink_to(cwd)
    for fd, (path, flags) in enumerate((open_files or {}).items(), start=3):
        (entry / "fd" / str(fd)).symlink_to(path)
        (entry / "fdinfo" / str(fd)).write_text(f"pos:\t0\nflags:\t{flags:o}\nmnt_id:\t1\n")


def _locked(workdir: Path) -> Path:
    """``workdir`` with a lock and one old Snakemake log; returns that log."""
    (workdir / ".snakemake/locks").mkdir(parents=True)
    (workdir / ".snakemake/locks/0.output.lock").write_text(f"{workdir}/done.txt\n")
    log = workdir / ".snakemake/log/2026-01-01T000000.000000.snakemake.log"
    log.parent.mkdir(parents=True)
    log.write_text("Building DAG of jobs...\n")
    return log


@pytest.mark.parametrize("argv", LAUNCHERS.values(), ids=LAUNCHERS.keys())
def test_each_launcher_working_here_holds_the_lock(tmp_path: Path, argv: list[str]) -> None:
    workdir, proc = tmp_path / "work", tmp_path / "proc"
    _locked(workdir)
    _fake_process(proc, FAKE, argv, workdir)
    _fake_process(proc, FAKE + 1, argv, tmp_path)  # the same launcher elsewhere
    assert running_snakemakes(workdir, proc) == [FAKE]
    note = lock_note(workdir, proc)
    assert note is not None and f"Snakemake is running in this directory (pid {FAKE} " \
        "runs Snakemake in this directory)" in note, note
    assert "do not --unlock" in note and "is safe" not in note, note


def test_a_process_writing_the_log_holds_the_lock_whatever_its_command(tmp_path: Path) -> None:
    # an unknown launcher (a wrapper whose argv names no Snakemake), started elsewhere:
    # the log it holds open for writing under the directory's .snakemake/ gives it away
    workdir, proc = tmp_path / "work", tmp_path / "proc"
    log = _locked(workdir)
    _fake_process(proc, FAKE, ["/opt/site/bin/run-pipeline", "--resume"], tmp_path,
                  {log: os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC})
    note = lock_note(workdir, proc)
    assert note is not None and f"(pid {FAKE} holds {log.relative_to(workdir)} open)" \
        in note, note
    assert "do not --unlock" in note and "is safe" not in note, note


def test_a_reader_of_the_log_holds_nothing(tmp_path: Path) -> None:
    workdir, proc = tmp_path / "work", tmp_path / "proc"
    log = _locked(workdir)
    _fake_process(proc, FAKE, ["tail", "-f", str(log)], workdir, {log: os.O_RDONLY})
    _fake_process(proc, FAKE + 1, ["python", "-m", "pflrepro", "train"], workdir)
    assert running_snakemakes(workdir, proc) == []
    note = lock_note(workdir, proc)
    assert note is not None and "no Snakemake runs in this directory on this host" in note
    assert "checked 2 processes on this host" in note, note
    assert f"its newest log, .snakemake/log/{log.name}, was last written" in note, note
    assert "`snakemake --unlock` is safe unless a Snakemake on another host" in note, note


def test_a_snakemake_that_cannot_be_inspected_is_no_all_clear(tmp_path: Path) -> None:
    # another user's Snakemake: its command line is readable, its cwd and fds are not
    workdir, proc = tmp_path / "work", tmp_path / "proc"
    _locked(workdir)
    _fake_process(proc, FAKE, LAUNCHERS["script through its #! line"], None)
    (proc / str(FAKE) / "fd").rmdir()
    found = survey(workdir, proc)
    assert found.running == {} and list(found.unseen) == [FAKE]
    note = lock_note(workdir, proc)
    assert note is not None and "is not known" in note and f"pid {FAKE}" in note, note
    assert "is safe" not in note and "only once you know it does not run here" in note, note


def test_without_proc_the_note_does_not_say_unlock_is_safe(tmp_path: Path) -> None:
    _locked(tmp_path)
    note = lock_note(tmp_path, tmp_path / "no-proc")
    assert note is not None and "cannot be checked on this host" in note, note
    assert "is safe" not in note, note


def test_no_lock_no_note(tmp_path: Path) -> None:
    assert lock_note(tmp_path) is None
    (tmp_path / ".snakemake/locks").mkdir(parents=True)
    assert lock_note(tmp_path) is None


@pytest.mark.workflow
def test_a_real_snakemake_from_the_venv_is_seen_then_its_lock_is_stale(tmp_path: Path) -> None:
    # the venv's `snakemake` script run through its python (argv[0] is python, as under
    # `python3 .venv/bin/snakemake` or a login node's wrapper), working in tmp_path
    (tmp_path / "Snakefile").write_text(
        'rule all:\n    output: "done.txt"\n    shell: "sleep 60; touch {output}"\n')
    script = Path(sys.executable).parent / "snakemake"
    assert script.is_file(), f"no snakemake script beside {sys.executable}"
    run = subprocess.Popen([sys.executable, str(script), "--cores", "1"], cwd=tmp_path,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           start_new_session=True)
    try:
        locks = tmp_path / ".snakemake/locks"
        deadline = time.monotonic() + 60
        while not (locks.is_dir() and any(locks.iterdir())):
            assert run.poll() is None, run.communicate()[1].decode()
            assert time.monotonic() < deadline, "Snakemake never took its lock"
            time.sleep(0.05)
        assert run.pid in running_snakemakes(tmp_path)
        note = lock_note(tmp_path)
        assert note is not None and "Snakemake is running in this directory" in note, note
        assert f"pid {run.pid} holds .snakemake/log/" in note, note
        assert "do not --unlock" in note and "is safe" not in note, note
    finally:
        os.killpg(run.pid, signal.SIGKILL)  # Snakemake and its job, as a crash would
        run.wait()
    # the killed run leaves its lock behind: now --unlock is safe
    note = lock_note(tmp_path)
    assert note is not None and "no Snakemake runs in this directory on this host" in note
    assert "`snakemake --unlock` is safe" in note, note
