"""EMNIST (Cohen et al. 2017): one split of NIST's ``gzip.zip``, train and test pooled."""

from __future__ import annotations

import zipfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from pflrepro.data.datasets import DatasetSource, register_dataset
from pflrepro.data.download import RemoteFile
from pflrepro.data.formats import FormatError, read_idx_pair
from pflrepro.data.rawfiles import extracted, fetch_all
from pflrepro.data.store import DatasetMeta, write_dataset

# EMNIST (Cohen et al. 2017): one zip of gzipped IDX files for all six splits. Official MD5
# (torchvision) 58c8d27c78d21e728a6bc7b3cc06412e; sha256/size widely published.
EMNIST_FILES: tuple[RemoteFile, ...] = (
    RemoteFile("gzip.zip",
               sha256="fb9bb67e33772a9cc0b895e4ecf36d2cf35be8b709693c3564cea2a019fcda8e",
               size=561_753_746),
)
EMNIST_MIRRORS: tuple[str, ...] = (
    "https://biometrics.nist.gov/cs_links/EMNIST/",
    "https://www.itl.nist.gov/iaui/vip/cs_links/EMNIST/",
)
#: classes per EMNIST split; ``letters`` labels are 1..26 in the files and shifted to 0..25.
EMNIST_SPLITS: dict[str, int] = {
    "byclass": 62, "bymerge": 47, "balanced": 47, "letters": 26, "digits": 10, "mnist": 10,
}
EMNIST_DEFAULT_SPLIT = "balanced"


def _zip_member_for(names: Sequence[str], basename: str, archive: Path) -> str:
    hits = [n for n in names if n == basename or n.endswith("/" + basename)]
    if len(hits) != 1:
        raise FormatError(f"{archive}: expected exactly one member named {basename}, "
                          f"found {hits or 'none'}")
    return hits[0]


def prepare_emnist(out_dir: Path, raw_dir: Path, mirrors: Sequence[str], *,
                   files: Sequence[RemoteFile] = EMNIST_FILES,
                   split: str = EMNIST_DEFAULT_SPLIT) -> DatasetMeta:
    """EMNIST ``split`` (default ``balanced``: 131,600 images, 47 classes), train+test pooled.

    Only the chosen split's four IDX files are extracted from NIST's ``gzip.zip``.
    Images are transposed back to the usual orientation; ``letters`` labels are
    shifted from 1..26 to 0..25.
    """
    if split not in EMNIST_SPLITS:
        raise ValueError(f"unknown EMNIST split {split!r}; choose from {sorted(EMNIST_SPLITS)}")
    raw_dir, out_dir = Path(raw_dir), Path(out_dir)
    (archive,) = fetch_all(files, mirrors, raw_dir)
    with zipfile.ZipFile(archive) as zf:
        names = zf.namelist()
    parts = ("train-images-idx3", "train-labels-idx1", "test-images-idx3", "test-labels-idx1")
    members = [_zip_member_for(names, f"emnist-{split}-{p}-ubyte.gz", archive) for p in parts]
    root = extracted(archive, raw_dir, members, tag=f".{split}")
    paths = [root / m for m in members]
    x_tr, y_tr = read_idx_pair(paths[0], paths[1], transpose=True)
    x_te, y_te = read_idx_pair(paths[2], paths[3], transpose=True)
    x = np.concatenate([x_tr, x_te])
    y = np.concatenate([y_tr, y_te])
    if split == "letters":
        y = y - 1
    return write_dataset(out_dir, x, y, name="emnist", num_classes=EMNIST_SPLITS[split],
                         max_value=255,
                         source=f"EMNIST {split} (Cohen et al. 2017), NIST gzip.zip; official "
                                f"train ({len(x_tr)}) + test ({len(x_te)}) pooled; images "
                                "transposed to upright")


SOURCE = register_dataset(DatasetSource(
    name="emnist",
    description="EMNIST balanced: 131,600 real 28x28 handwritten characters, 47 classes; "
                "train+test pooled.",
    prepare=prepare_emnist,
    default_mirrors=EMNIST_MIRRORS,
    num_samples=131_600,
    num_classes=47,
    image_shape=(1, 28, 28),
    files=EMNIST_FILES,
))
