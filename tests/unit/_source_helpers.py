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
