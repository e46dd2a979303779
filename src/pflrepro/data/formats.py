"""Readers for the raw file formats of the real data sets; no pickle anywhere.

IDX (MNIST, Fashion-MNIST, EMNIST)
    A big-endian header: two zero bytes, a type code, the number of dimensions
    ``d``, then ``d`` unsigned 32-bit sizes, followed by the values in row-major
    order. Type codes: ``0x08`` unsigned byte, ``0x09`` signed byte, ``0x0B`` 16-bit
    int, ``0x0C`` 32-bit int, ``0x0D`` 32-bit float, ``0x0E`` 64-bit float. Image
    files are ``ubyte`` with ``d = 3`` (N, rows, cols); label files ``ubyte`` with
    ``d = 1``. Files may be gzip-compressed (recognised by content, not by name).
    EMNIST stores every image transposed (column-major), hence ``transpose=True``.

CIFAR-10 binary version (``cifar-10-binary.tar.gz``)
    Fixed-size records of 1 label byte (0..9) followed by 3072 pixel bytes: 1024 red,
    1024 green, 1024 blue values, each channel a 32x32 image in row-major order.

CIFAR-100 binary version (``cifar-100-binary.tar.gz``)
    Records of 1 coarse-label byte (0..19), 1 fine-label byte (0..99), then the same
    3072 pixel bytes. The readers return the fine label unless asked otherwise.

All image readers return ``uint8`` arrays of shape ``(N, C, H, W)``; label readers
return ``int64`` arrays of shape ``(N,)``.
"""

from __future__ import annotations

import gzip
import struct
from pathlib import Path
from typing import Literal

import numpy as np

IDX_DTYPES: dict[int, np.dtype] = {
    0x08: np.dtype(">u1"),
    0x09: np.dtype(">i1"),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}

CIFAR_PIXELS = 3 * 32 * 32
CIFAR10_RECORD = 1 + CIFAR_PIXELS
CIFAR100_RECORD = 2 + CIFAR_PIXELS


class FormatError(ValueError):
    """A raw file does not follow its declared format."""


def read_bytes_maybe_gzip(path: Path) -> bytes:
    """Return the file's bytes, gunzipped when the content starts with the gzip magic."""
    path = Path(path)
    with path.open("rb") as fh:
        head = fh.read(2)
    if head == b"\x1f\x8b":
        try:
            with gzip.open(path, "rb") as fh:
                return fh.read()
        except (OSError, EOFError) as exc:
            raise FormatError(f"{path}: damaged gzip stream: {exc}") from exc
    return path.read_bytes()


def parse_idx(data: bytes, source: str = "<bytes>") -> np.ndarray:
    """Parse an IDX byte string into an array (native byte order)."""
    if len(data) < 4:
        raise FormatError(f"{source}: {len(data)} bytes, too short for an IDX header")
    zero1, zero2, code, ndim = data[0], data[1], data[2], data[3]
    if zero1 != 0 or zero2 != 0:
        raise FormatError(f"{source}: bad IDX magic {data[:4].hex()} (must start with 0000)")
    if code not in IDX_DTYPES:
        raise FormatError(f"{source}: unknown IDX type code 0x{code:02x}")
    if ndim == 0:
        raise FormatError(f"{source}: IDX file declares 0 dimensions")
    header = 4 + 4 * ndim
    if len(data) < header:
        raise FormatError(f"{source}: truncated IDX header ({len(data)} < {header} bytes)")
    dims = struct.unpack(f">{ndim}I", data[4:header])
    dtype = IDX_DTYPES[code]
    expected = int(np.prod(dims, dtype=np.int64)) * dtype.itemsize
    body = len(data) - header
    if body != expected:
        what = "truncated" if body < expected else "has trailing bytes"
        raise FormatError(f"{source}: IDX body {what}: {body} bytes for dims {dims} "
                          f"of {dtype.name}, expected {expected}")
    arr = np.frombuffer(data, dtype=dtype, offset=header).reshape(dims)
    return arr.astype(dtype.newbyteorder("="))


def read_idx(path: Path) -> np.ndarray:
    """Read a (possibly gzipped) IDX file into an array."""
    return parse_idx(read_bytes_maybe_gzip(path), str(path))


def read_idx_images(path: Path, *, transpose: bool = False) -> np.ndarray:
    """Read an IDX ``ubyte`` image file as ``uint8`` ``(N, 1, H, W)``.

    ``transpose=True`` swaps the two image axes of every image, which EMNIST needs
    (its images are stored column-major).
    """
    arr = read_idx(path)
    if arr.dtype != np.uint8 or arr.ndim != 3:
        raise FormatError(f"{path}: expected uint8 images with 3 dimensions (N, H, W), got "
                          f"{arr.dtype} with shape {arr.shape}")
    if transpose:
        arr = arr.transpose(0, 2, 1)
    return np.ascontiguousarray(arr[:, None, :, :])


def read_idx_labels(path: Path) -> np.ndarray:
    """Read an IDX ``ubyte`` label file as ``int64`` ``(N,)``."""
    arr = read_idx(path)
    if arr.dtype != np.uint8 or arr.ndim != 1:
        raise FormatError(f"{path}: expected uint8 labels with 1 dimension, got {arr.dtype} "
                          f"with shape {arr.shape}")
    return arr.astype(np.int64)


def read_idx_pair(images: Path, labels: Path, *, transpose: bool = False
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Read matching IDX image and label files; their counts must agree."""
    x = read_idx_images(images, transpose=transpose)
    y = read_idx_labels(labels)
    if len(x) != len(y):
        raise FormatError(f"{images} has {len(x)} images but {labels} has {len(y)} labels")
    return x, y


def _cifar_records(path: Path, record: int) -> np.ndarray:
    data = np.fromfile(Path(path), dtype=np.uint8)
    if data.size == 0 or data.size % record:
        raise FormatError(f"{path}: {data.size} bytes is not a whole number of "
                          f"{record}-byte CIFAR records")
    return data.reshape(-1, record)


def read_cifar10_binary(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Read one CIFAR-10 binary batch: ``uint8`` ``(N, 3, 32, 32)`` and ``int64`` labels."""
    rec = _cifar_records(path, CIFAR10_RECORD)
    y = rec[:, 0].astype(np.int64)
    if y.max() > 9:
        raise FormatError(f"{path}: CIFAR-10 label {int(y.max())} out of range 0..9 "
                          "(is this a CIFAR-100 file?)")
    x = np.ascontiguousarray(rec[:, 1:].reshape(-1, 3, 32, 32))
    return x, y


def read_cifar100_binary(path: Path, label: Literal["fine", "coarse"] = "fine"
                         ) -> tuple[np.ndarray, np.ndarray]:
    """Read one CIFAR-100 binary file: ``uint8`` ``(N, 3, 32, 32)`` and the chosen labels."""
    if label not in ("fine", "coarse"):
        raise ValueError(f"label must be 'fine' or 'coarse', got {label!r}")
    rec = _cifar_records(path, CIFAR100_RECORD)
    coarse, fine = rec[:, 0].astype(np.int64), rec[:, 1].astype(np.int64)
    if coarse.max() > 19 or fine.max() > 99:
        raise FormatError(f"{path}: CIFAR-100 labels out of range (coarse max "
                          f"{int(coarse.max())}, fine max {int(fine.max())})")
    x = np.ascontiguousarray(rec[:, 2:].reshape(-1, 3, 32, 32))
    return x, fine if label == "fine" else coarse


def read_cifar_binaries(paths: list[Path], kind: Literal["cifar10", "cifar100"]
                        ) -> tuple[np.ndarray, np.ndarray]:
    """Read and concatenate several CIFAR binary files in the given order."""
    reader = read_cifar10_binary if kind == "cifar10" else read_cifar100_binary
    parts = [reader(p) for p in paths]
    return (np.concatenate([p[0] for p in parts]),
            np.concatenate([p[1] for p in parts]))
