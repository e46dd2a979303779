"""MNIST's IDX layout, from a local mirror of files made here."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
from _source_helpers import idx, spec_for

from pflrepro.data.sources import mnist
from pflrepro.data.store import load_dataset


def test_mnist_layout_via_local_mirror(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    xtr = rng.integers(0, 256, (5, 28, 28), dtype=np.uint8)
    xte = rng.integers(0, 256, (3, 28, 28), dtype=np.uint8)
    ytr, yte = np.array([0, 1, 2, 3, 9], np.uint8), np.array([4, 5, 6], np.uint8)
    contents = [idx(xtr), idx(ytr), idx(xte), idx(yte)]
    files = []
    for f, data in zip(mnist.MNIST_FILES, contents, strict=True):
        (mirror / f.name).write_bytes(gzip.compress(data))
        files.append(spec_for(mirror / f.name))
    meta = mnist.prepare_mnist(tmp_path / "out", tmp_path / "raw", [str(mirror)], files=files)
    ds = load_dataset(tmp_path / "out")
    assert meta.size == 8
    np.testing.assert_array_equal(ds.x[:, 0], np.concatenate([xtr, xte]))  # train then test
    np.testing.assert_array_equal(ds.y, [0, 1, 2, 3, 9, 4, 5, 6])
