"""One GPU per training job: device leases shared by the jobs running on one machine.

``snakemake --resources gpu=N`` caps how many GPU jobs run at once, but it does not
tell a job *which* GPU to take; left alone, every job would start on ``cuda:0``. A
CUDA training job therefore takes a *lease*: an exclusive ``flock`` on one slot file
per device in a lock directory that all jobs of the machine share. A job takes the
first free slot (the first slot of every device before any second slot), so up to N
jobs land on N different devices; with every slot taken it waits until one is freed.
The kernel drops a lock when its process ends, however it ends (SIGKILL, a crash,
preemption), so a dead job never keeps a device.

Slot files are named after the device's UUID, not its index: jobs that see
different GPUs as ``cuda:0`` (SLURM's or the user's ``CUDA_VISIBLE_DEVICES``) never
wait for each other, and jobs that see the same GPU under two indices still share
its slots.

Settings (environment, so that changing them never invalidates finished runs):

* ``PFLREPRO_JOBS_PER_GPU`` -- slots per device, default 1 (no two jobs on one GPU);
* ``PFLREPRO_GPU_LOCK_DIR`` -- the lock directory, default
  ``<tmp>/pflrepro-gpu-locks-<uid>``; it must be on a local file system shared by the
  machine's jobs.
"""

from __future__ import annotations

import fcntl
import logging
import os
import socket
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)

JOBS_PER_GPU_ENV = "PFLREPRO_JOBS_PER_GPU"
LOCK_DIR_ENV = "PFLREPRO_GPU_LOCK_DIR"


@dataclass
class Lease:
    """A held slot: device ``index`` (as this process numbers them), released on exit."""

    index: int
    key: str
    slot: int
    path: Path
    _fd: int | None = field(default=None, repr=False)

    def release(self) -> None:
        """Give the slot back (also happens when the process ends)."""
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def jobs_per_device(environ: dict[str, str] | None = None) -> int:
    """Slots per device from ``PFLREPRO_JOBS_PER_GPU`` (default 1); bad values raise."""
    raw = (os.environ if environ is None else environ).get(JOBS_PER_GPU_ENV, "1")
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"{JOBS_PER_GPU_ENV}={raw!r}: expected a whole number >= 1")
    return value


def lock_dir(environ: dict[str, str] | None = None) -> Path:
    """The machine's shared lock directory (``PFLREPRO_GPU_LOCK_DIR`` or a per-user tmp)."""
    env = os.environ if environ is None else environ
    if env.get(LOCK_DIR_ENV):
        return Path(env[LOCK_DIR_ENV])
    return Path(tempfile.gettempdir()) / f"pflrepro-gpu-locks-{os.getuid()}"


def _slot_name(key: str, slot: int) -> str:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in key)
    return f"{safe}.slot{slot}.lock"


def _try_lock(path: Path) -> int | None:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    # who holds it, for a person looking at the lock directory
    os.ftruncate(fd, 0)
    os.write(fd, f"{socket.gethostname()} pid {os.getpid()}\n".encode())
    return fd


def claim(keys: Sequence[str], directory: Path, per_device: int = 1, poll_s: float = 1.0,
          timeout_s: float | None = None,
          sleep: Callable[[float], None] = time.sleep) -> Lease:
    """Lease a free slot among ``per_device`` slots of each device in ``keys``.

    Slot 0 of every device is tried before any slot 1, so jobs spread over the
    devices first. With every slot taken, waits (polling every ``poll_s``) until one
    is freed, or raises :class:`TimeoutError` after ``timeout_s``.
    """
    if not keys:
        raise ValueError("no devices to lease")
    if per_device < 1:
        raise ValueError(f"per_device must be >= 1, got {per_device}")
    directory.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    waited = False
    while True:
        for slot in range(per_device):
            for index, key in enumerate(keys):
                path = directory / _slot_name(key, slot)
                fd = _try_lock(path)
                if fd is not None:
                    if waited:
                        log.info("device slot freed after %.0f s", time.monotonic() - start)
                    return Lease(index, key, slot, path, fd)
        if timeout_s is not None and time.monotonic() - start >= timeout_s:
            raise TimeoutError(f"all {len(keys) * per_device} device slots in {directory} "
                               f"stayed busy for {timeout_s} s")
        if not waited:
            log.warning("all %d device slot(s) (%d device(s) x %d) are taken by other jobs; "
                        "waiting for one (lock directory %s)", len(keys) * per_device,
                        len(keys), per_device, directory)
            waited = True
        sleep(poll_s)


def cuda_keys() -> list[str]:
    """A stable identity per visible CUDA device (its UUID; else its bus id or index)."""
    import torch

    keys = []
    for i in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(i)
        uuid = getattr(props, "uuid", None)
        keys.append(f"gpu-{uuid}" if uuid else f"gpu-index{i}")
    return keys


def cuda_lease() -> Lease:
    """Lease one visible CUDA device for this job (see the module docstring)."""
    return claim(cuda_keys(), lock_dir(), jobs_per_device())


def choose_device(request: str) -> torch.device:
    """``auto`` -> CUDA when available, else CPU; ``cuda`` without a GPU raises."""
    import torch

    if request == "cpu":
        return torch.device("cpu")
    if torch.cuda.is_available():
        return torch.device("cuda")
    if request == "cuda":
        raise RuntimeError("training.device is 'cuda' but no CUDA device is available; "
                           "set training.device: auto (or cpu) to train on the CPU")
    return torch.device("cpu")
