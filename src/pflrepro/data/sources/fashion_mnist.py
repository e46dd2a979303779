"""Fashion-MNIST (Xiao, Rasul & Vollgraf 2017): IDX files, train and test pooled."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pflrepro.data.datasets import DatasetSource, register_dataset
from pflrepro.data.download import RemoteFile
from pflrepro.data.rawfiles import prepare_idx
from pflrepro.data.store import DatasetMeta

# Fashion-MNIST (Xiao, Rasul & Vollgraf 2017). Official MD5s (zalandoresearch/fashion-mnist
# README): train-images 8d4fb7e6c68d591d4c3dfef9ec88bf0d, train-labels
# 25c81989df183df01b3e8a0aad5dffbe, t10k-images bef4ecab320f06d8554ea6380940ec79, t10k-labels
# bb300cfdad3c16e7a12a480ee83cd310. The sha256/size of the official .gz files are the widely
# published ones (TFDS-style manifests, many projects). content_sha256 was computed here from
# the Debian package dataset-fashion-mnist 0.0~git20200523.55506a9-1 (re-compressed: its .gz
# files are 23-24 bytes smaller, no embedded file name) and agrees with the decompressed-content
# hashes other projects derived from archives matching the official MD5s.
FASHION_MNIST_FILES: tuple[RemoteFile, ...] = (
    RemoteFile("train-images-idx3-ubyte.gz",
               sha256="3aede38d61863908ad78613f6a32ed271626dd12800ba2636569512369268a84",
               size=26_421_880,
               content_sha256="c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888"),
    RemoteFile("train-labels-idx1-ubyte.gz",
               sha256="a04f17134ac03560a47e3764e11b92fc97de4d1bfaf8ba1a3aa29af54cc90845",
               size=29_515,
               content_sha256="bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9"),
    RemoteFile("t10k-images-idx3-ubyte.gz",
               sha256="346e55b948d973a97e58d2351dde16a484bd415d4595297633bb08f03db6a073",
               size=4_422_102,
               content_sha256="5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b"),
    RemoteFile("t10k-labels-idx1-ubyte.gz",
               sha256="67da17c76eaffca5446c3361aaab5c3cd6d1c2608764d35dfb1850b086bf8dd5",
               size=5_148,
               content_sha256="0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34"),
)
FASHION_MNIST_MIRRORS: tuple[str, ...] = (
    "/usr/share/datasets/fashion-mnist",  # Debian: apt-get install dataset-fashion-mnist
    "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",
    "https://raw.githubusercontent.com/zalandoresearch/fashion-mnist/master/data/fashion/",
)


def prepare_fashion_mnist(out_dir: Path, raw_dir: Path, mirrors: Sequence[str], *,
                          files: Sequence[RemoteFile] = FASHION_MNIST_FILES) -> DatasetMeta:
    """Fashion-MNIST: 70,000 grey 28x28 images, 10 classes (7,000 each), train+test pooled."""
    return prepare_idx("fashion_mnist", files, mirrors, Path(raw_dir), Path(out_dir),
                        num_classes=10, source="Fashion-MNIST (Xiao et al. 2017), IDX files")


SOURCE = register_dataset(DatasetSource(
    name="fashion_mnist",
    description="Fashion-MNIST: 70,000 real 28x28 grey clothing images, 10 classes; official "
                "train+test pooled. Local Debian copy or official hosts.",
    prepare=prepare_fashion_mnist,
    default_mirrors=FASHION_MNIST_MIRRORS,
    num_samples=70_000,
    num_classes=10,
    image_shape=(1, 28, 28),
    files=FASHION_MNIST_FILES,
))
