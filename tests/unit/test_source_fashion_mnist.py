"""Fashion-MNIST end to end from the Debian copy (skipped without it)."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from pflrepro.data.datasets import DATASETS
from pflrepro.data.sources import fashion_mnist
from pflrepro.data.store import load_dataset

DEBIAN_FASHION = Path("/usr/share/datasets/fashion-mnist")


@pytest.mark.skipif(not DEBIAN_FASHION.is_dir(),
                    reason=f"{DEBIAN_FASHION} missing: apt-get install dataset-fashion-mnist")
def test_fashion_mnist_from_debian(tmp_path: Path) -> None:
    start = time.perf_counter()
    meta = fashion_mnist.prepare_fashion_mnist(tmp_path / "out", tmp_path / "raw",
                                         [str(DEBIAN_FASHION)])
    elapsed = time.perf_counter() - start
    ds = load_dataset(tmp_path / "out", verify=True)
    assert meta.size == 70_000 and ds.x.shape == (70_000, 1, 28, 28)
    assert meta.shape == (1, 28, 28) and meta.num_classes == 10
    assert meta.shape == DATASETS["fashion_mnist"].image_shape  # what the config check reads
    np.testing.assert_array_equal(np.bincount(ds.y, minlength=10), [7_000] * 10)
    assert ds.x.dtype == np.uint8 and int(ds.x.max()) == 255
    # the Debian files are re-compressed: they verify by their decompressed content
    for f in fashion_mnist.FASHION_MNIST_FILES:
        assert (tmp_path / "raw" / f.name).is_file()
    assert elapsed < 30
