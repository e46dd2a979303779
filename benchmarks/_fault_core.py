"""The fault campaign's core: the tiny project, a trial's context, how a trial is judged.

:mod:`fault_campaign` runs the trials; the trial modules (``_fault_trials``,
``_fault_downloads``, ``_fault_project``) add theirs to :data:`TRIALS` with ``@trial``.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
#: What a project copy holds besides ``src`` and its config (as tests/workflow/_wf.py).
WORKFLOW_FILES = ("Snakefile", "workflow", "config", "profiles", "environment.yml")
VERDICTS = ("held", "silent", "stuck", "traceback", "unclear")
#: A verdict outranks those after it when a trial has several steps.
_RANK = {"stuck": 0, "traceback": 1, "silent": 2, "unclear": 3, "held": 4}
#: The tiny project every trial starts from.
TINY_CONFIG = """\
training:
  rounds: 2
  batch_size: 32
  local_epochs: 1
  optimizer: adam
  lr: 0.01
  eval_every: 1
  model: mlp
  model_options:
    hidden: [8]
  device: cpu
methods:
  local:
    algorithm: local
  fedavg:
    algorithm: fedavg
experiments:
  tiny:
    description: Fault campaign grid.
    dataset: digits
    partitions:
      - {scheme: label_groups, clients: 3, groups: 2, max_samples: 600}
    methods: [local, fedavg]
    split_seeds: [0]
    train_seeds: [0]
    resources: {gpu: 0, mem_mb: 1000, runtime: 5}
"""


@dataclass
class Result:
    """One command's run: its exit status (None: killed at its timeout) and output."""

    argv: list[str]
    code: int | None
    out: str
    seconds: float
    timeout: float = 0.0

    def brief(self) -> str:
        """The command and the last lines of its output, for a human."""
        words = [Path(a).name if a.startswith("/") and len(a) > 60 else a for a in self.argv]
        tail = "\n".join(self.out.strip().splitlines()[-6:])
        return f"$ {shlex.join(words)}  -> {self.code}\n{tail}"


@dataclass(frozen=True)
class Verdict:
    """A trial's classification and why."""

    kind: str
    note: str

    def __post_init__(self) -> None:
        if self.kind not in VERDICTS:
            raise ValueError(f"unknown verdict {self.kind!r}")


def judge(result: Result, *, expect: str = "refuse", needles: Sequence[str] = (),
          problems: Iterable[str | None] = ()) -> Verdict:
    """Classify one command's run.

    ``expect`` is ``"refuse"`` (a non-zero exit whose output names one of ``needles``)
    or ``"recover"`` (exit 0); ``problems`` are the hostile effects the trial observed
    afterwards (None or empty: none), which make an exit 0 silent.
    """
    if expect not in {"refuse", "recover"}:
        raise ValueError(f"expect must be 'refuse' or 'recover', not {expect!r}")
    if result.code is None:
        return Verdict("stuck", f"ran past its {result.timeout:g} s timeout\n{result.brief()}")
    if "Traceback" in result.out:
        return Verdict("traceback", result.brief())
    found = [p for p in problems if p]
    if found:
        kind = "silent" if result.code == 0 else "unclear"
        return Verdict(kind, "; ".join(found) + "\n" + result.brief())
    if expect == "recover":
        if result.code != 0:
            return Verdict("unclear", f"no recovery (exit {result.code})\n{result.brief()}")
        return Verdict("held", "recovered")
    if result.code == 0:
        return Verdict("silent", f"exit 0: nothing refused\n{result.brief()}")
    if needles and not any(n in result.out for n in needles):
        return Verdict("unclear", f"refused without naming any of {list(needles)}\n"
                                  f"{result.brief()}")
    return Verdict("held", first_error(result.out))


def worst(*verdicts: Verdict) -> Verdict:
    """The verdict of a trial of several steps: its worst step (stuck first)."""
    return min(verdicts, key=lambda v: _RANK[v.kind])


def first_error(out: str) -> str:
    """The line of ``out`` that says what went wrong (the last non-empty one otherwise)."""
    lines = [line.strip() for line in out.splitlines() if line.strip()]
    for line in lines:
        if "error" in line.lower() or "refus" in line.lower():
            return line[:200]
    return lines[-1][:200] if lines else ""


def leftovers(root: Path, exclude: Sequence[int] = ()) -> list[int]:
    """Processes (pids) whose working directory or command line lies under ``root``."""
    found = []
    here = {os.getpid(), *exclude}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in here:
            continue
        try:
            cwd = os.readlink(entry / "cwd")
            cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if state != "Z" and (cwd.startswith(str(root)) or str(root) in cmdline):
            found.append(int(entry.name))
    return sorted(found)


def run_command(argv: Sequence[str], *, cwd: Path, env: dict[str, str],
                timeout: float) -> Result:
    """Run ``argv`` in its own session; past ``timeout`` the session is killed."""
    start = time.monotonic()
    proc = subprocess.Popen(list(argv), cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, errors="replace",
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
        code: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        code = None
    return Result(list(argv), code, out, time.monotonic() - start, timeout)


@dataclass
class Base:
    """The tiny project every trial copies, and what its first build ran."""

    path: Path
    train_args: list[str]  # the fedavg run's `pflrepro train` arguments, as the rule ran them
    run: str  # that run's table, relative to the project
    part: str  # its partition


class Ctx:
    """One trial's scratch folder, commands and project copies."""

    def __init__(self, root: Path, base: Base) -> None:
        self.root = root
        self.base = base
        self.work = root / "work"  # the working directory of project-less commands
        self.work.mkdir(parents=True)
        self.env = environment(base.path / "src")

    def project(self) -> Path:
        """A fresh copy of the tiny project, mtimes kept."""
        dest = self.root / "project"
        shutil.copytree(self.base.path, dest, symlinks=True)
        self.env = environment(dest / "src")  # the workflow runs its own copy's source
        return dest

    def pf(self, *args: str, cwd: Path | None = None, timeout: float = 60) -> Result:
        """``python -m pflrepro ARGS`` with the snapshot's source."""
        return run_command([PYTHON, "-m", "pflrepro", *args], cwd=cwd or self.work,
                           env=self.env, timeout=timeout)

    def snakemake(self, project: Path, *args: str, timeout: float = 240) -> Result:
        return run_command(snakemake_argv(project, *args), cwd=project, env=self.env,
                           timeout=timeout)

    def specials(self) -> dict[str, Path]:
        """A FIFO, a folder, a socket and (as root) a ``/dev/full`` twin, in the scratch."""
        import socket

        d = self.root / "nodes"
        d.mkdir()
        out = {"fifo": d / "fifo", "folder": d / "folder", "socket": d / "socket"}
        os.mkfifo(out["fifo"])
        out["folder"].mkdir()
        with socket.socket(socket.AF_UNIX) as sock:
            sock.bind(str(out["socket"]))
        try:
            os.mknod(d / "full", 0o020666, os.makedev(1, 7))
            out["device"] = d / "full"
        except PermissionError:
            pass
        return out

    def shadow(self) -> Path:
        """A stand-in for /etc/shadow inside the scratch folder."""
        path = self.root / "etc" / "shadow"
        path.parent.mkdir(exist_ok=True)
        path.write_text(SHADOW)
        return path


SHADOW = "root:$6$CAMPAIGNSECRET$x:19000:0:99999:7:::\n"


def node_state(path: Path) -> tuple:
    """What identifies a node for "untouched": its type, inode, size, folder entries."""
    st = os.lstat(path)
    entries = tuple(sorted(os.listdir(path))) if path.is_dir() and not path.is_symlink() else ()
    return (st.st_mode, st.st_ino, st.st_size, entries)


def environment(src: Path) -> dict[str, str]:
    """The trials' environment: the snapshot's source first, one thread, this venv."""
    env = dict(os.environ)
    env.pop("PFLREPRO_ANY_SOURCE", None)
    env["PATH"] = f"{Path(PYTHON).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(src)
    env["OMP_NUM_THREADS"] = "1"
    env["MKL_NUM_THREADS"] = "1"
    return env


def snakemake_argv(project: Path, *args: str) -> list[str]:
    return [PYTHON, "-m", "snakemake", "--snakefile", str(project / "Snakefile"),
            "--directory", str(project), "--configfile", str(project / "config.yaml"),
            "--replace-workflow-config", "--cores", "2", *args]


def build_base(repo: Path, dest: Path) -> Base:
    """Copy ``repo``'s source and workflow into ``dest``, write the tiny config, build its
    aggregate."""
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(repo / "src", dest / "src", ignore=ignore)
    for name in WORKFLOW_FILES:
        if (repo / name).is_dir():
            shutil.copytree(repo / name, dest / name, ignore=ignore)
        elif (repo / name).exists():
            shutil.copy(repo / name, dest / name)
    (dest / "config.yaml").write_text(TINY_CONFIG)
    # the experiment's aggregate and what it needs (data, partition, runs): what the
    # trials break; figures, reports and cost tables are left to the runs that ask
    result = run_command(snakemake_argv(dest, "-p", "results/aggregate/tiny.parquet"),
                         cwd=dest, env=environment(dest / "src"), timeout=600)
    if result.code != 0:
        raise SystemExit(f"the tiny project did not build:\n{result.brief()}")
    train = next(line for line in result.out.splitlines()
                 if " train --spec " in line and "/fedavg/" in line)
    words = shlex.split(train)
    args = words[words.index("train") + 1:words.index(">")] if ">" in words else \
        words[words.index("train") + 1:]
    run = args[args.index("--out") + 1]
    return Base(dest, args, run, args[args.index("--partition") + 1])


def record(path: Path) -> Path:
    """The digest record of a stored file (``.digests/NAME.sha256`` beside it)."""
    return path.parent / ".digests" / f"{path.name}.sha256"


@dataclass(frozen=True)
class Trial:
    """One trial: its group, name, what it does, and whether ``--quick`` runs it."""

    group: str
    name: str
    fn: Callable[[Ctx], Verdict]
    quick: bool = False


#: Every trial, in the order they run (the trial modules add theirs on import).
TRIALS: list[Trial] = []
#: The test that holds each group (docs/reliability.md's campaign table).
TESTS: dict[str, str] = {
    "write-special": "`test_targets.py::test_output_options_refuse_special_files`",
    "folders-outside": "`test_targets.py::test_command_line_outputs_create_folders_only_"
                       "inside_the_working_directory`",
    "link-at-output": "`test_targets.py::test_a_link_is_replaced_not_written_through`",
    "read-through-link": "`test_verify.py::test_a_record_linked_to_another_file_is_not_read`",
    "non-regular-outputs": "`test_verify.py::test_outputs_that_are_no_regular_files_are_set_"
                           "aside`, `test_io.py`",
    "decompression-bomb": "`test_rawfiles.py::test_a_decompression_bomb_is_refused_before_"
                          "extraction`",
    "hostile-archive": "`test_rawfiles.py::test_a_refused_archive_never_sticks`, "
                       "`test_download.py`",
    "hostile-server": "`test_download.py::test_a_trickling_server_is_given_up`, "
                      "`test_download.py`",
    "tracebacks": "`test_no_traceback.py::test_malformed_input_ends_in_one_line`",
    "yaml-values": "`test_config_bounds.py`, `test_no_traceback.py`",
    "user-file-moved": "`test_checkpoint.py::test_an_unusable_checkpoint_outside_results_is_"
                       "never_moved`",
    "damaged-checkpoint": "`test_checkpoint.py`",
    "bit-rot": "`test_verify.py`, `test_io.py`",
    "deleted-record": "`test_verify.py::test_the_last_line_says_what_snakemake_rebuilds`",
    "garbled-records": "`test_rawfiles.py::test_a_garbled_first_use_record_is_named`, "
                       "`test_damage.py`, `test_verify.py`",
    "malformed-config": "`test_config_errors.py`, `test_config_names.py`, "
                        "`test_config_bounds.py`",
    "snakemake-configfile": "none: Snakemake reads `--configfile` before the workflow "
                            "starts (its traceback); `pflrepro check-config FILE` names the "
                            "problem in one line",
    "concurrent-snakemake": "`workflow/test_workflow.py::test_a_second_snakemake_on_a_"
                            "running_directory_is_refused`",
    "kills": "`workflow/test_resume.py`, `workflow/test_killed_job_shell.py`, "
             "`test_lifeline.py`",
}


def trial(group: str, name: str, quick: bool = False) -> Callable:
    """Add the decorated function to :data:`TRIALS` as one trial of ``group``."""
    def add(fn: Callable[[Ctx], Verdict]) -> Callable[[Ctx], Verdict]:
        if group not in TESTS:
            raise ValueError(f"group {group!r} names no test in TESTS")
        TRIALS.append(Trial(group, name, fn, quick))
        return fn
    return add
