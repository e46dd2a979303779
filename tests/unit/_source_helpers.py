"""What the data-set source tests share: manifest entries for files made here, IDX
bytes."""

from __future__ import annotations

import hashlib
import struct
from pathlib import Path

import numpy as np

from pflrepro.data.download import RemoteFile


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def spec_for(path: Path) -> RemoteFile:
    return RemoteFile(path.name, sha(path), path.stat().st_size)


def idx(arr: np.ndarray) -> bytes:
    return bytes([0, 0, 8, arr.ndim]) + struct.pack(f">{arr.ndim}I", *arr.shape) + arr.tobytes()


def tiny_mnist_mirror(mirror: Path) -> dict[str, str]:
    """Six random images in MNIST's four IDX files under ``mirror``; SHA-256 by file name."""
    import gzip

    from pflrepro.data.datasets import DATASETS

    mirror.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, size=(6, 28, 28), dtype=np.uint8)
    y = np.arange(6, dtype=np.uint8) % 10
    sums = {}
    for f, arr in zip(DATASETS["mnist"].files, (x[:4], y[:4], x[4:], y[4:]), strict=True):
        (mirror / f.name).write_bytes(gzip.compress(idx(arr), mtime=0))
        sums[f.name] = sha(mirror / f.name)
    return sums
