"""scikit-learn's bundled handwritten digits (no download)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from pflrepro.data.datasets import DatasetSource, register_dataset
from pflrepro.data.store import DatasetMeta, write_dataset


def prepare_digits(out_dir: Path, raw_dir: Path, mirrors: Sequence[str]) -> DatasetMeta:
    """scikit-learn's copy of the UCI optical handwritten digits (1797 images, 8×8, 0..16)."""
    from sklearn.datasets import load_digits

    bunch = load_digits()
    x = bunch.images.astype(np.uint8)[:, None, :, :]  # values 0..16, exact in uint8
    y = bunch.target.astype(np.int64)
    return write_dataset(out_dir, x, y, name="digits", num_classes=10, max_value=16,
                         source="sklearn.datasets.load_digits (UCI optdigits test set)")


SOURCE = register_dataset(DatasetSource(
    name="digits",
    description="scikit-learn's bundled handwritten digits: 1797 real 8x8 images, 10 classes; "
                "no download.",
    prepare=prepare_digits,
    num_samples=1797,
    num_classes=10,
    image_shape=(1, 8, 8),
))
