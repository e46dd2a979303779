"""CIFAR-100, binary version (Krizhevsky 2009): fine labels, train and test pooled."""

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
CIFAR100_FILES: tuple[RemoteFile, ...] = (
    RemoteFile("cifar-100-binary.tar.gz",
               sha256="58a81ae192c23a4be8b1804d68e518ed807d710a4eb253b1f2a199162a40d8ec",
               size=168_513_733),
)
CIFAR_MIRRORS: tuple[str, ...] = ("https://www.cs.toronto.edu/~kriz/",)


def prepare_cifar100(out_dir: Path, raw_dir: Path, mirrors: Sequence[str], *,
                     files: Sequence[RemoteFile] = CIFAR100_FILES) -> DatasetMeta:
    """CIFAR-100 binary version: 60,000 RGB 32x32 images, 100 fine classes, pooled."""
    raw_dir, out_dir = Path(raw_dir), Path(out_dir)
    (archive,) = fetch_all(files, mirrors, raw_dir)
    data_dir = extracted(archive, raw_dir) / "cifar-100-binary"
    paths = [data_dir / "train.bin", data_dir / "test.bin"]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise FormatError(f"{archive}: not the CIFAR-100 binary layout; missing {missing}")
    x, y = read_cifar_binaries(paths, "cifar100")
    return write_dataset(out_dir, x, y, name="cifar100", num_classes=100, max_value=255,
                         source="CIFAR-100 binary version (Krizhevsky 2009), fine labels; "
                                "train + test pooled")


SOURCE = register_dataset(DatasetSource(
    name="cifar100",
    description="CIFAR-100 (binary version): 60,000 real 32x32 colour images, 100 fine classes; "
                "train+test pooled.",
    prepare=prepare_cifar100,
    default_mirrors=CIFAR_MIRRORS,
    num_samples=60_000,
    num_classes=100,
    image_shape=(3, 32, 32),
    files=CIFAR100_FILES,
))
