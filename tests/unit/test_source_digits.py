"""The bundled digits: scikit-learn's 1797 8x8 images as they are, values 0..16."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from sklearn.datasets import load_digits

from pflrepro.data.datasets import DATASETS
from pflrepro.data.sources import digits
from pflrepro.data.store import load_dataset


def test_digits_are_sklearns_images_unchanged(tmp_path: Path) -> None:
    meta = digits.prepare_digits(tmp_path / "out", tmp_path / "raw", ())
    ds = load_dataset(tmp_path / "out", verify=True)
    assert meta.size == 1797 and meta.shape == (1, 8, 8) and meta.num_classes == 10
    assert meta.shape == DATASETS["digits"].image_shape  # what the config check reads
    assert ds.x.dtype == np.uint8 and int(ds.x.max()) == 16
    bunch = load_digits()
    np.testing.assert_array_equal(ds.x[:, 0], bunch.images)
    np.testing.assert_array_equal(ds.y, bunch.target)
    assert not (tmp_path / "raw").exists()  # nothing downloaded
