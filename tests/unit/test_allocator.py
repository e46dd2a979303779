"""pflrepro.training.allocator: glibc's allocator keeps freed blocks, or its defaults."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

from pflrepro.training import allocator

GLIBC = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"


def test_system_keeps_glibc_defaults(monkeypatch):
    monkeypatch.setenv(allocator.ENV, "system")
    assert allocator.keep_freed_memory() is False


def test_an_unknown_value_is_refused(monkeypatch):
    monkeypatch.setenv(allocator.ENV, "jemalloc")
    with pytest.raises(ValueError, match="PFLREPRO_MALLOC='jemalloc'.*'system'"):
        allocator.keep_freed_memory()


@pytest.mark.skipif(not GLIBC, reason="mallopt is glibc's")
def test_freed_large_blocks_are_reused_not_faulted_in_again():
    # A 64 MiB block (above glibc's largest mmap threshold) allocated and freed over and
    # over: with the defaults each one is fresh pages (16,384 minor faults apiece); kept,
    # once the heap has settled (20 blocks here; it has taken up to 8), its pages are reused.
    code = (
        "import resource, sys, torch\n"
        "from pflrepro.training.allocator import keep_freed_memory\n"
        "set_ = keep_freed_memory()\n"
        "for _ in range(20):\n"
        "    torch.ones(1 << 23, dtype=torch.float64)\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt\n"
        "for _ in range(10):\n"
        "    torch.ones(1 << 23, dtype=torch.float64)\n"
        "print(set_, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)\n"
    )
    faults = {}
    for value in ("", "system"):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             env={**os.environ, allocator.ENV: value},
                             check=True).stdout.split()
        faults[value] = (out[0], int(out[1]))
    assert faults[""][0] == "True" and faults["system"][0] == "False"
    assert faults["system"][1] >= 10 * 16_384
    assert faults[""][1] < 16_384
