"""Whether Snakemake's lock on a working directory is held by a running Snakemake.

Snakemake refuses to run in a directory whose ``.snakemake/locks/`` holds a lock and
advises ``--unlock``, the same words whether another Snakemake is still writing there
(unlocking then lets two runs write the same files) or the lock was left by a killed
one. :func:`lock_note` says which, for this host, from ``/proc`` (Linux). A process
counts as a Snakemake running in the directory when either holds:

* it holds a file under ``<workdir>/.snakemake/`` open for writing. A Snakemake run
  (not a dry run) keeps its log, ``.snakemake/log/<time>.snakemake.log``, open for
  writing from before it takes the lock until it ends, whatever launched it
  (``snakemake``, ``python -m snakemake``, ``python3 .venv/bin/snakemake``, a cluster
  login node's ``nohup``); a reader such as ``tail -f`` opens it read-only and does
  not count;
* its working directory is this one and its command line runs Snakemake
  (:func:`is_snakemake`: the ``snakemake`` script run directly or through an
  interpreter, ``python -m snakemake``, ``python -c "...snakemake..."``).

The processes of this Snakemake itself and its ancestors are left out. A Snakemake of
another user whose working directory and files this user cannot read, a host without
``/proc`` and a Snakemake on another host sharing the directory cannot be seen; the note
then says what was checked and advises ``--unlock`` only with that proviso, never while
a run is seen.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

#: Where Snakemake keeps its locks, relative to the working directory.
LOCKS = Path(".snakemake") / "locks"
#: Where a Snakemake run keeps its log open, relative to the working directory.
LOGS = Path(".snakemake") / "log"
#: An interpreter that may run the ``snakemake`` script (``python3.11``, ``pypy3``).
_INTERPRETER = re.compile(r"^(python|pypy)[\d.]*$")
#: Interpreter options that take a value as the next argument.
_OPTION_WITH_VALUE = {"-W", "-X", "-Q"}
#: ``O_ACCMODE`` bits of an ``fdinfo`` ``flags:`` value opened for writing.
_WRITE_MODES = {os.O_WRONLY, os.O_RDWR}


def _runs_snakemake(name: str) -> bool:
    """Whether a program or module name is Snakemake (``snakemake``, ``snakemake.cli``)."""
    return re.fullmatch(r"snakemake([-.][\w.-]*)?", Path(name).name) is not None


def is_snakemake(argv: list[str]) -> bool:
    """Whether a command line runs Snakemake.

    ``snakemake ...`` (any path), an interpreter running the ``snakemake`` script
    (``python3 /venv/bin/snakemake ...``, which is also what the kernel makes of running
    the script through its ``#!`` line), ``python -m snakemake ...`` and ``python -c``
    code that names ``snakemake``.
    """
    if not argv:
        return False
    if _runs_snakemake(argv[0]):
        return True
    if not _INTERPRETER.match(Path(argv[0]).name):
        return False
    args = iter(argv[1:])
    for arg in args:
        if arg == "-m":
            return _runs_snakemake(next(args, ""))
        if arg == "-c":
            return "snakemake" in next(args, "")
        if arg in _OPTION_WITH_VALUE:
            next(args, None)
        elif not arg.startswith("-"):
            return _runs_snakemake(arg)
    return False


def _own_line() -> set[int]:
    """The pids of this process and its ancestors (the Snakemake reading the workflow)."""
    from pflrepro.store.lifeline import parent_of

    line, pid = set(), os.getpid()
    while pid and pid not in line:
        line.add(pid)
        pid = parent_of(pid) or 0
    return line


def _writes_under(entry: Path, prefix: str) -> list[str] | None:
    """Files under ``prefix`` that process ``entry`` holds open for writing.

    None when its open files cannot be read (another user's process).
    """
    try:
        fds = list((entry / "fd").iterdir())
    except OSError:
        return None
    held = []
    for fd in fds:
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if not target.startswith(prefix):
            continue
        try:
            info = (entry / "fdinfo" / fd.name).read_text()
            flags = int(re.search(r"^flags:\s*([0-7]+)", info, re.M).group(1), 8)
        except (OSError, AttributeError):
            continue
        if (flags & os.O_ACCMODE) in _WRITE_MODES:
            held.append(target)
    return held


@dataclass
class Survey:
    """What a look at this host's processes found about Snakemake runs in one directory."""

    #: Whether the processes could be listed at all (``/proc`` exists).
    listed: bool = False
    #: How many other processes were looked at.
    checked: int = 0
    #: Snakemake processes running in the directory: pid -> how they were recognised.
    running: dict[int, str] = field(default_factory=dict)
    #: Processes whose command line runs Snakemake but whose working directory and open
    #: files could not be read (another user's): pid -> command line.
    unseen: dict[int, str] = field(default_factory=dict)
    #: Files open in this Snakemake and its ancestors (its own log).
    own_files: set[str] = field(default_factory=set)


def survey(workdir: str | Path, proc: Path = Path("/proc")) -> Survey:
    """Look at every other process on this host for a Snakemake running in ``workdir``."""
    target = Path(workdir).resolve()
    prefix = f"{target / '.snakemake'}/"
    found = Survey(listed=proc.is_dir())
    own = _own_line()
    for entry in proc.iterdir() if found.listed else ():
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        if pid in own:
            found.own_files.update(_writes_under(entry, prefix) or ())
            continue
        try:
            argv = [a.decode(errors="replace")
                    for a in (entry / "cmdline").read_bytes().split(b"\0") if a]
        except OSError:
            continue  # ended while we looked
        found.checked += 1
        held = _writes_under(entry, prefix)
        if held:
            found.running[pid] = f"holds {os.path.relpath(held[0], target)} open"
            continue
        snakemake = is_snakemake(argv)
        try:
            cwd = Path(os.readlink(entry / "cwd")).resolve()
        except OSError:
            if snakemake and held is None:
                found.unseen[pid] = " ".join(argv)
            continue
        if snakemake and cwd == target:
            found.running[pid] = "runs Snakemake in this directory"
    return found


def running_snakemakes(workdir: str | Path, proc: Path = Path("/proc")) -> list[int]:
    """Process ids of the other Snakemake processes on this host running in ``workdir``."""
    return sorted(survey(workdir, proc).running)


def _newest_log(workdir: Path, own: set[str]) -> str | None:
    """When the newest Snakemake log in ``workdir`` not open in this run was last written."""
    logs = [p for p in (workdir / LOGS).glob("*.snakemake.log") if str(p.resolve()) not in own]
    if not logs:
        return None
    newest = max(logs, key=lambda p: p.stat().st_mtime)
    age = max(0, int(time.time() - newest.stat().st_mtime))
    ago = f"{age} s" if age < 120 else f"{age // 60} min" if age < 7200 else f"{age // 3600} h"
    return f"its newest log, {LOGS / newest.name}, was last written {ago} ago"


def lock_note(workdir: str | Path, proc: Path = Path("/proc")) -> str | None:
    """What to do about a lock on ``workdir`` (None when there is none).

    It advises ``snakemake --unlock`` only when no Snakemake is seen running there, and
    says what was checked.
    """
    locks = Path(workdir) / LOCKS
    if not locks.is_dir() or not any(locks.iterdir()):
        return None
    found = survey(workdir, proc)
    if found.running:
        seen = "; ".join(f"pid {pid} {how}" for pid, how in sorted(found.running.items()))
        return (f"pflrepro: {locks} holds a lock and Snakemake is running in this directory "
                f"({seen}): wait for it to end; do not --unlock while it runs (two runs "
                f"would write the same files)")
    if not found.listed:
        return (f"pflrepro: {locks} holds a lock; whether a Snakemake still runs in this "
                f"directory cannot be checked on this host (no {proc}): run `snakemake "
                f"--unlock` only once you know none does (two runs would write the same "
                f"files)")
    log = _newest_log(Path(workdir), found.own_files)
    checked = (f"checked {found.checked} processes on this host for a Snakemake command "
               f"line working here or a file under .snakemake/ open for writing"
               + (f"; {log}" if log else ""))
    if found.unseen:
        pids = ", ".join(f"pid {pid} ({cmd[:80]})" for pid, cmd in sorted(found.unseen.items()))
        return (f"pflrepro: {locks} holds a lock, and whether a Snakemake still runs in this "
                f"directory is not known: {pids} runs Snakemake but its working directory "
                f"and open files cannot be read by this user ({checked}): run `snakemake "
                f"--unlock` only once you know it does not run here")
    return (f"pflrepro: {locks} holds a lock, but no Snakemake runs in this directory on "
            f"this host ({checked}): the lock is left from a run that was killed, and "
            f"`snakemake --unlock` is safe unless a Snakemake on another host shares the "
            f"directory")
