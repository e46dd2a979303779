"""Whether Snakemake's lock on a working directory is held by a running Snakemake.

Snakemake refuses to run in a directory whose ``.snakemake/locks/`` holds a lock and
advises ``--unlock``, the same words whether another Snakemake is still writing there
(unlocking then lets two runs write the same files) or the lock was left by a killed
one. :func:`lock_note` says which, for this host: the running Snakemake processes
whose working directory is this one (from ``/proc``, Linux), or none. A Snakemake on
another host sharing the directory cannot be seen, and the note says so.
"""

from __future__ import annotations

import os
from pathlib import Path

#: Where Snakemake keeps its locks, relative to the working directory.
LOCKS = Path(".snakemake") / "locks"


def _is_snakemake(argv: list[str]) -> bool:
    """Whether a command line runs Snakemake (``snakemake ...`` or ``python -m snakemake``)."""
    if argv and Path(argv[0]).name.startswith("snakemake"):
        return True
    return any(a == "-m" and b == "snakemake" for a, b in zip(argv, argv[1:], strict=False))


def _own_line() -> set[int]:
    """The pids of this process and its ancestors (the Snakemake reading the workflow)."""
    from pflrepro.store.lifeline import parent_of

    line, pid = set(), os.getpid()
    while pid and pid not in line:
        line.add(pid)
        pid = parent_of(pid) or 0
    return line


def running_snakemakes(workdir: str | Path, proc: Path = Path("/proc")) -> list[int]:
    """Process ids of the other Snakemake processes on this host working in ``workdir``."""
    target = Path(workdir).resolve()
    found = []
    own = _own_line()
    for entry in proc.iterdir() if proc.is_dir() else ():
        if not entry.name.isdigit() or int(entry.name) in own:
            continue
        try:
            cwd = Path(os.readlink(entry / "cwd")).resolve()
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if cwd == target and _is_snakemake([a.decode(errors="replace") for a in argv if a]):
            found.append(int(entry.name))
    return sorted(found)


def lock_note(workdir: str | Path) -> str | None:
    """What to do about a lock on ``workdir`` (None when there is none)."""
    locks = Path(workdir) / LOCKS
    if not locks.is_dir() or not any(locks.iterdir()):
        return None
    pids = running_snakemakes(workdir)
    if pids:
        return (f"pflrepro: {locks} holds a lock and Snakemake is running in this directory "
                f"(pid {', '.join(map(str, pids))}): wait for it to end; do not --unlock "
                f"while it runs (two runs would write the same files)")
    return (f"pflrepro: {locks} holds a lock, but no Snakemake runs in this directory on "
            f"this host: the lock is left from a run that was killed, and `snakemake "
            f"--unlock` is safe (unless a Snakemake on another host shares the directory)")
