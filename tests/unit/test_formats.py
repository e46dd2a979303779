"""Readers of the real raw formats, on small files written in those formats."""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np
import pytest

from pflrepro.data.formats import (
    FormatError,
    read_cifar10_binary,
    read_cifar100_binary,
    read_cifar_binaries,
    read_idx,
    read_idx_images,
    read_idx_labels,
    read_idx_pair,
)


def idx_bytes(arr: np.ndarray, code: int = 0x08) -> bytes:
    header = bytes([0, 0, code, arr.ndim]) + struct.pack(f">{arr.ndim}I", *arr.shape)
    big = arr.astype(arr.dtype.newbyteorder(">"))
    return header + big.tobytes()


def write(path: Path, data: bytes, gz: bool = False) -> Path:
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


@pytest.fixture
def images() -> np.ndarray:
    rng = np.random.default_rng(0)
    return rng.integers(0, 256, size=(7, 5, 4), dtype=np.uint8)  # non-square: catches swaps


@pytest.mark.parametrize("gz", [False, True])
def test_idx_images_and_labels_roundtrip(tmp_path: Path, images: np.ndarray, gz: bool) -> None:
    labels = np.arange(7, dtype=np.uint8) % 3
    # names deliberately do not say .gz: compression is detected from the content
    ip = write(tmp_path / "img.idx", idx_bytes(images), gz)
    lp = write(tmp_path / "lab.idx", idx_bytes(labels), gz)
    x, y = read_idx_pair(ip, lp)
    assert x.dtype == np.uint8 and x.shape == (7, 1, 5, 4)
    np.testing.assert_array_equal(x[:, 0], images)
    assert y.dtype == np.int64
    np.testing.assert_array_equal(y, labels)


def test_idx_transpose_for_emnist(tmp_path: Path, images: np.ndarray) -> None:
    ip = write(tmp_path / "img.idx", idx_bytes(images))
    x = read_idx_images(ip, transpose=True)
    assert x.shape == (7, 1, 4, 5)
    np.testing.assert_array_equal(x[3, 0], images[3].T)


def test_idx_other_dtypes(tmp_path: Path) -> None:
    a = np.array([[1.5, -2.0], [3.25, 4.0]], dtype=np.float32)
    out = read_idx(write(tmp_path / "f.idx", idx_bytes(a, 0x0D)))
    np.testing.assert_array_equal(out, a)
    b = np.array([-3, 70000], dtype=np.int32)
    np.testing.assert_array_equal(read_idx(write(tmp_path / "i.idx", idx_bytes(b, 0x0C))), b)


def test_idx_malformed(tmp_path: Path, images: np.ndarray) -> None:
    good = idx_bytes(images)
    with pytest.raises(FormatError, match="magic"):
        read_idx(write(tmp_path / "a", b"\x01\x00" + good[2:]))
    with pytest.raises(FormatError, match="type code"):
        read_idx(write(tmp_path / "b", good[:2] + b"\x07" + good[3:]))
    with pytest.raises(FormatError, match="truncated"):
        read_idx(write(tmp_path / "c", good[:-1]))
    with pytest.raises(FormatError, match="trailing"):
        read_idx(write(tmp_path / "d", good + b"\x00"))
    with pytest.raises(FormatError, match="header"):
        read_idx(write(tmp_path / "e", good[:10]))
    with pytest.raises(FormatError, match="3 dimensions"):
        read_idx_images(write(tmp_path / "f", idx_bytes(np.zeros(4, np.uint8))))
    with pytest.raises(FormatError, match="1 dimension"):
        read_idx_labels(write(tmp_path / "g", good))
    with pytest.raises(FormatError, match="gzip"):
        read_idx(write(tmp_path / "h", gzip.compress(good)[:-20]))
    with pytest.raises(FormatError, match="labels"):
        read_idx_pair(write(tmp_path / "i", good),
                      write(tmp_path / "j", idx_bytes(np.zeros(6, np.uint8))))


def cifar_records(labels: list[tuple[int, ...]], seed: int = 0) -> tuple[bytes, np.ndarray]:
    rng = np.random.default_rng(seed)
    pix = rng.integers(0, 256, size=(len(labels), 3, 32, 32), dtype=np.uint8)
    out = b"".join(bytes(lab) + pix[i].tobytes() for i, lab in enumerate(labels))
    return out, pix


def test_cifar10_binary(tmp_path: Path) -> None:
    data, pix = cifar_records([(3,), (9,), (0,)])
    x, y = read_cifar10_binary(write(tmp_path / "data_batch_1.bin", data))
    assert x.shape == (3, 3, 32, 32) and x.dtype == np.uint8
    np.testing.assert_array_equal(x, pix)
    np.testing.assert_array_equal(y, [3, 9, 0])
    # red plane first, row-major: byte 1 of the record is R(0,0), byte 1+32 is R(1,0)
    assert x[0, 0, 1, 0] == data[1 + 32] and x[0, 2, 0, 0] == data[1 + 2048]


def test_cifar100_binary_uses_fine_label(tmp_path: Path) -> None:
    data, pix = cifar_records([(4, 77), (19, 0)])
    path = write(tmp_path / "train.bin", data)
    x, y = read_cifar100_binary(path)
    np.testing.assert_array_equal(x, pix)
    np.testing.assert_array_equal(y, [77, 0])
    np.testing.assert_array_equal(read_cifar100_binary(path, "coarse")[1], [4, 19])


def test_cifar_concatenation_order(tmp_path: Path) -> None:
    a, pa = cifar_records([(1,)], seed=1)
    b, pb = cifar_records([(2,), (3,)], seed=2)
    x, y = read_cifar_binaries([write(tmp_path / "a", a), write(tmp_path / "b", b)], "cifar10")
    np.testing.assert_array_equal(y, [1, 2, 3])
    np.testing.assert_array_equal(x, np.concatenate([pa, pb]))


def test_cifar_malformed(tmp_path: Path) -> None:
    data, _ = cifar_records([(3,), (4,)])
    with pytest.raises(FormatError, match="whole number"):
        read_cifar10_binary(write(tmp_path / "short", data[:-1]))
    with pytest.raises(FormatError, match="whole number"):
        read_cifar10_binary(write(tmp_path / "empty", b""))
    bad, _ = cifar_records([(12,)])
    with pytest.raises(FormatError, match="out of range"):
        read_cifar10_binary(write(tmp_path / "label", bad))
    bad100, _ = cifar_records([(25, 3)])
    with pytest.raises(FormatError, match="out of range"):
        read_cifar100_binary(write(tmp_path / "label100", bad100))
