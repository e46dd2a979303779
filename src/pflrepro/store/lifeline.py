"""A workflow job's process ends with its job (``pflrepro --exit-with-parent``).

Snakemake runs each job as ``bash -c "... python -m pflrepro train ..."``. Killing
that shell (or Snakemake itself) does not end the Python child on its own: it would
write its run after Snakemake recorded the job as failed, leave no benchmark record, and
go on using a core nobody accounts for.

:func:`exit_with_parent` asks the kernel to send ``SIGTERM`` when the parent dies
(``prctl(PR_SET_PDEATHSIG)``, Linux), and starts a watcher thread that sends it when
the parent's own parent changes (the shell was orphaned: Snakemake died; a shell does
not end when its parent does). ``SIGTERM`` is what a scheduler sends: a training job
saves its checkpoint and exits 143, so the next run resumes. The CLI calls it for
``--exit-with-parent`` and for ``--require-source``, which every rule passes, so no
rule's command changes (Snakemake reruns a job whose command text changed); it is
called as the interpreter starts (``python -m pflrepro``), before the command's imports,
so that the window in which a dying Snakemake goes unnoticed is as short as it can be,
and a job whose shell is already orphaned when it starts stops at once. Elsewhere than
Linux it does nothing and says so.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import sys
import threading
from pathlib import Path

log = logging.getLogger(__name__)

#: ``prctl`` option: the signal sent to this process when its parent thread ends.
PR_SET_PDEATHSIG = 1
#: Seconds between the watcher's looks at the parent's parent.
WATCH_INTERVAL_S = 2.0
#: Whether this process already watches (one watcher a process).
_WATCHING = False


def parent_of(pid: int) -> int | None:
    """The parent process id of ``pid`` from ``/proc`` (None when it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # pid (comm) state ppid ...: comm may hold spaces and parentheses
    return int(stat[stat.rindex(")") + 2:].split()[1])


def _init_is_snakemake() -> bool:
    """Whether process 1 is a Snakemake (a container started with it as its command)."""
    try:
        return b"snakemake" in Path("/proc/1/cmdline").read_bytes()
    except OSError:
        return False


def exit_with_parent(interval_s: float = WATCH_INTERVAL_S) -> bool:
    """Make this process get ``SIGTERM`` when its parent, or its parent's parent, dies.

    Returns whether it could (Linux with ``/proc``); the watcher is a daemon thread.
    """
    global _WATCHING
    if _WATCHING:
        return True
    if not sys.platform.startswith("linux"):
        log.info("--exit-with-parent: not on Linux, the process may outlive its job")
        return False
    parent = os.getppid()
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0) != 0:
        log.warning("--exit-with-parent: prctl failed (errno %d)", ctypes.get_errno())
        return False
    if os.getppid() != parent:  # the parent died before prctl took effect
        os.kill(os.getpid(), signal.SIGTERM)
    grandparent = parent_of(parent)
    if grandparent is None:
        return True
    if 1 in (parent, grandparent) and not _init_is_snakemake():
        # the job's shell was orphaned before this process got here: its Snakemake
        # ended while the job was starting (the watcher below would compare against
        # init and never fire)
        log.warning("the job's Snakemake ended before the job started: stopping (SIGTERM)")
        os.kill(os.getpid(), signal.SIGTERM)

    def watch() -> None:
        stop = threading.Event()
        while not stop.wait(interval_s):
            if os.getppid() != parent or parent_of(parent) != grandparent:
                log.warning("the job's shell or its Snakemake ended: stopping (SIGTERM)")
                os.kill(os.getpid(), signal.SIGTERM)
                return

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()
    _WATCHING = True
    return True
