"""The C allocator of a training process: freed blocks stay in the process for reuse.

glibc's ``malloc`` serves every block above its mmap threshold (32 MiB at most) with
fresh pages from the kernel and gives them back on ``free``. A round allocates and frees
such blocks over and over (stacked client models, float64 copies of every model,
activations of a batch of 32x32 images), and the kernel zeroes each page again on its
first touch: at the paper's shapes that costs more system time than the arithmetic.
:func:`keep_freed_memory` tells glibc to take every block from the heap
(``M_MMAP_MAX = 0``) and to return the heap's free top to the kernel only beyond
``TRIM_BYTES``. What is computed does not change; a process's peak RSS can grow by up
to ``TRIM_BYTES`` plus the heap's fragmentation.

Environment: ``PFLREPRO_MALLOC=system`` keeps glibc's defaults (to compare, or where the
larger peak does not fit). Elsewhere than glibc nothing is changed.
"""

from __future__ import annotations

import ctypes
import logging
import os
import platform

log = logging.getLogger(__name__)

#: mallopt's parameter numbers (glibc's malloc.h).
M_TRIM_THRESHOLD, M_MMAP_MAX = -1, -4
#: Free bytes at the heap's top kept for reuse before they go back to the kernel.
TRIM_BYTES = 1 << 30
#: The environment variable, and its value that keeps glibc's defaults.
ENV, SYSTEM = "PFLREPRO_MALLOC", "system"


def keep_freed_memory() -> bool:
    """Set glibc's allocator as the module docstring says; True where it was set.

    False when ``PFLREPRO_MALLOC=system``, when the C library is not glibc, or when
    ``mallopt`` refuses a value (then glibc's defaults stay).
    """
    choice = os.environ.get(ENV, "").strip().lower()
    if choice == SYSTEM:
        return False
    if choice:
        raise ValueError(f"{ENV}={choice!r}: the one value is {SYSTEM!r} (glibc's "
                         f"defaults); unset, freed memory stays in the process")
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    libc = ctypes.CDLL(None)
    mallopt = getattr(libc, "mallopt", None)
    if mallopt is None:
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    if not (mallopt(M_TRIM_THRESHOLD, TRIM_BYTES) and mallopt(M_MMAP_MAX, 0)):
        log.warning("mallopt refused a setting: glibc's allocator keeps its defaults")
        return False
    return True
