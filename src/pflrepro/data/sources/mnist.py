"""MNIST (LeCun, Cortes & Burges): IDX files, train and test pooled."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pflrepro.data.datasets import DatasetSource, register_dataset
from pflrepro.data.download import RemoteFile
from pflrepro.data.rawfiles import prepare_idx
from pflrepro.data.store import DatasetMeta

# MNIST (LeCun, Cortes & Burges). Official-host MD5s (as torchvision pins them): train-images
# f68b3c2dcbeaaa9fbdd348bbdeb94873, train-labels d53e105ee54ea40749a09fcbcd1e9432, t10k-images
# 9fb629c4189551a2d022fa330f9573f3, t10k-labels ec29112dd5afa0611ce80d1b7f02629c. sha256/size:
# widely published for the original .gz files (identical on the CVDF and PyTorch mirrors).
# content_sha256: published by independent projects, not re-derived here (no local copy).
MNIST_FILES: tuple[RemoteFile, ...] = (
    RemoteFile("train-images-idx3-ubyte.gz",
               sha256="440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609",
               size=9_912_422,
               content_sha256="ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db"),
    RemoteFile("train-labels-idx1-ubyte.gz",
               sha256="3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",
               size=28_881,
               content_sha256="65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5"),
    RemoteFile("t10k-images-idx3-ubyte.gz",
               sha256="8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
               size=1_648_877,
               content_sha256="0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7"),
    RemoteFile("t10k-labels-idx1-ubyte.gz",
               sha256="f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",
               size=4_542,
               content_sha256="ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2"),
)
MNIST_MIRRORS: tuple[str, ...] = (
    "https://ossci-datasets.s3.amazonaws.com/mnist/",
    "https://storage.googleapis.com/cvdf-datasets/mnist/",
    "http://yann.lecun.com/exdb/mnist/",
)


def prepare_mnist(out_dir: Path, raw_dir: Path, mirrors: Sequence[str], *,
                  files: Sequence[RemoteFile] = MNIST_FILES) -> DatasetMeta:
    """MNIST: 70,000 grey 28x28 digit images, 10 classes, train+test pooled."""
    return prepare_idx("mnist", files, mirrors, Path(raw_dir), Path(out_dir),
                        num_classes=10, source="MNIST (LeCun et al.), IDX files")


SOURCE = register_dataset(DatasetSource(
    name="mnist",
    description="MNIST: 70,000 real 28x28 handwritten digits, 10 classes; train+test pooled.",
    prepare=prepare_mnist,
    default_mirrors=MNIST_MIRRORS,
    num_samples=70_000,
    num_classes=10,
    image_shape=(1, 28, 28),
    files=MNIST_FILES,
))
