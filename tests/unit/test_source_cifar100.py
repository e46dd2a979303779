"""CIFAR-100's binary layout: the fine labels are kept."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import numpy as np
from _source_helpers import spec_for

from pflrepro.data.sources import cifar100
from pflrepro.data.store import load_dataset


def test_cifar100_fine_labels(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    archive = mirror / "cifar-100-binary.tar.gz"
    xs, fine = [], []
    with tarfile.open(archive, "w:gz") as tf:
        for name, n in (("train.bin", 3), ("test.bin", 2)):
            x = rng.integers(0, 256, (n, 3, 32, 32), dtype=np.uint8)
            f = rng.integers(0, 100, n)
            data = b"".join(bytes([f[i] // 5, f[i]]) + x[i].tobytes() for i in range(n))
            info = tarfile.TarInfo(f"cifar-100-binary/{name}")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
            xs.append(x)
            fine.append(f)
    meta = cifar100.prepare_cifar100(tmp_path / "out", tmp_path / "raw", [mirror.as_uri()],
                                    files=[spec_for(archive)])
    ds = load_dataset(tmp_path / "out")
    assert meta.num_classes == 100 and meta.size == 5
    np.testing.assert_array_equal(ds.x, np.concatenate(xs))
    np.testing.assert_array_equal(ds.y, np.concatenate(fine))
