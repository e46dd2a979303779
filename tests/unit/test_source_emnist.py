"""EMNIST: one split out of NIST's zip, images transposed upright."""

from __future__ import annotations

import gzip
import zipfile
from pathlib import Path

import numpy as np
import pytest
from _source_helpers import idx, spec_for

from pflrepro.data.sources import emnist
from pflrepro.data.store import load_dataset


@pytest.mark.parametrize(("split", "offset"), [("balanced", 0), ("letters", 1)])
def test_emnist_split_transposed(tmp_path: Path, split: str, offset: int) -> None:
    rng = np.random.default_rng(3)
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    archive = mirror / "gzip.zip"
    upright = rng.integers(0, 256, (4, 28, 28), dtype=np.uint8)
    labels = np.array([0, 1, 2, 3], np.uint8) + offset
    with zipfile.ZipFile(archive, "w") as zf:
        for s in ("balanced", "letters"):
            for part, sl in (("train", slice(0, 3)), ("test", slice(3, 4))):
                stored = upright[sl].transpose(0, 2, 1).copy()  # EMNIST stores images transposed
                zf.writestr(f"gzip/emnist-{s}-{part}-images-idx3-ubyte.gz",
                            gzip.compress(idx(stored)))
                zf.writestr(f"gzip/emnist-{s}-{part}-labels-idx1-ubyte.gz",
                            gzip.compress(idx(labels[sl])))
    meta = emnist.prepare_emnist(tmp_path / "out", tmp_path / "raw", [str(mirror)],
                                  files=[spec_for(archive)], split=split)
    ds = load_dataset(tmp_path / "out")
    assert meta.num_classes == emnist.EMNIST_SPLITS[split]
    np.testing.assert_array_equal(ds.x[:, 0], upright)
    np.testing.assert_array_equal(ds.y, [0, 1, 2, 3])
