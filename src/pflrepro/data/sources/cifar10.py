"""CIFAR-10, binary version (Krizhevsky 2009): train and test batches pooled."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pflrepro.data.datasets import DatasetSource, register_dataset
from pflrepro.data.download import RemoteFile
from pflrepro.data.formats import FormatError, read_cifar_binaries
from pflrepro.data.rawfiles import extracted, fetch_all
from pflrepro.data.store import DatasetMeta, write_dataset

# CIFAR-10 / CIFAR-100 binary versions (Krizhevsky 2009). Official MD5s from the CIFAR page:
# cifar-10-binary c32a1d4ab5d03f1284b67883e8d87530, cifar-100-binary
# 03b5dce01913d631647c71ecec9e9cb8. sha256/size widely published.
CIFAR10_FILES: tuple[RemoteFile, ...] = (
    RemoteFile("cifar-10-binary.tar.gz",
               sha256="c4a38c50a1bc5f3a1c5537f2155ab9d68f9f25eb1ed8d9ddda3db29a59bca1dd",
               size=170_052_171),
)
CIFAR_MIRRORS: tuple[str, ...] = ("https://www.cs.toronto.edu/~kriz/",)


def prepare_cifar10(out_dir: Path, raw_dir: Path, mirrors: Sequence[str], *,
                    files: Sequence[RemoteFile] = CIFAR10_FILES) -> DatasetMeta:
    """CIFAR-10 binary version: 60,000 RGB 32x32 images, 10 classes, train+test pooled.

    Batches are read in the order ``data_batch_1..5.bin``, ``test_batch.bin``.
    """
    raw_dir, out_dir = Path(raw_dir), Path(out_dir)
    (archive,) = fetch_all(files, mirrors, raw_dir)
    batch_dir = extracted(archive, raw_dir) / "cifar-10-batches-bin"
    names = [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"]
    paths = [batch_dir / n for n in names]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise FormatError(f"{archive}: not the CIFAR-10 binary layout; missing {missing}")
    x, y = read_cifar_binaries(paths, "cifar10")
    return write_dataset(out_dir, x, y, name="cifar10", num_classes=10, max_value=255,
                         source="CIFAR-10 binary version (Krizhevsky 2009); data_batch_1..5 + "
                                "test_batch pooled")


SOURCE = register_dataset(DatasetSource(
    name="cifar10",
    description="CIFAR-10 (binary version): 60,000 real 32x32 colour images, 10 classes; "
                "train+test pooled.",
    prepare=prepare_cifar10,
    default_mirrors=CIFAR_MIRRORS,
    num_samples=60_000,
    num_classes=10,
    image_shape=(3, 32, 32),
    files=CIFAR10_FILES,
))
