"""Manifest of the real data sets: files, checksums, mirrors and how each is prepared.

Every entry registers a :class:`~pflrepro.data.datasets.DatasetSource` whose
``prepare(out_dir, raw_dir, mirrors)`` fetches the raw files into ``raw_dir`` (see
:func:`pflrepro.data.download.fetch`: verified, resumable, offline once fetched),
reads the real file format (:mod:`pflrepro.data.formats`) and writes the uniform
form of :mod:`pflrepro.data.store`.

Official train and test parts are **pooled** into one array (train first, then
test, each in file order): partitions later make their own per-client train/test
splits, as FedeRiCo and FedEM do. Nothing about the official split is kept.

Every prepare function takes its file list as a keyword argument ``files`` whose
default is the manifest below, so a test (or a user with a private copy) can pass
its own :class:`~pflrepro.data.download.RemoteFile` specs and mirrors without
touching module globals.

Checksums
---------
``sha256`` values are those of the files on the official hosts, published widely
and cross-checked against several independent public sources (listed beside each
entry); the publishers themselves list only MD5 sums, quoted in comments.
``content_sha256`` (the SHA-256 of the gunzipped content) lets re-compressed
mirrors such as Debian's ``dataset-fashion-mnist`` package verify. FEMNIST and
Office-Home have no official checksum: they are trusted on first use (the hash of
the first file placed is recorded in ``raw_dir/<name>.sha256`` and enforced after),
once the archive has been read to its end; when a later archive differs, the error
names that record, to be deleted if the first archive was the wrong one.

Extra arrays
------------
``femnist`` writes ``writer.npy`` (``int64``, index of each image's writer, i.e. its
natural client) and ``writers.json`` (writer ids in index order); ``officehome``
writes ``domain.npy`` (``int64``, index into :data:`OFFICEHOME_DOMAINS`) and
``classes.json``. They are written before ``meta.json``, beside ``x.npy``.
"""

from __future__ import annotations

import json
import logging
import re
import zipfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from pflrepro.data.datasets import DatasetSource, register_dataset
from pflrepro.data.download import (
    ARCHIVE_ERRORS,
    ChecksumError,
    DamagedArchiveError,
    DownloadError,
    RemoteFile,
    fetch,
    safe_extract,
    sha256_file,
    tofu_record,
    verify_file,
)
from pflrepro.data.formats import FormatError, read_cifar_binaries, read_idx_pair
from pflrepro.data.store import DatasetMeta, write_dataset
from pflrepro.io import atomic_path, write_text

log = logging.getLogger(__name__)


class ArchiveMissingError(FileNotFoundError):
    """A data set whose archive must be placed by hand is absent (or does not verify)."""


# --------------------------------------------------------------------------- manifest

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

# CIFAR-10 / CIFAR-100 binary versions (Krizhevsky 2009). Official MD5s from the CIFAR page:
# cifar-10-binary c32a1d4ab5d03f1284b67883e8d87530, cifar-100-binary
# 03b5dce01913d631647c71ecec9e9cb8. sha256/size widely published.
CIFAR10_FILES: tuple[RemoteFile, ...] = (
    RemoteFile("cifar-10-binary.tar.gz",
               sha256="c4a38c50a1bc5f3a1c5537f2155ab9d68f9f25eb1ed8d9ddda3db29a59bca1dd",
               size=170_052_171),
)
CIFAR100_FILES: tuple[RemoteFile, ...] = (
    RemoteFile("cifar-100-binary.tar.gz",
               sha256="58a81ae192c23a4be8b1804d68e518ed807d710a4eb253b1f2a199162a40d8ec",
               size=168_513_733),
)
CIFAR_MIRRORS: tuple[str, ...] = ("https://www.cs.toronto.edu/~kriz/",)

# FEMNIST (LEAF, Caldas et al. 2018) has no downloadable archive: LEAF's scripts build it from
# NIST SD19. No checksum exists, so it is trusted on first use.
FEMNIST_FILES: tuple[RemoteFile, ...] = (
    RemoteFile("femnist_all_data.tar.gz", sha256=None),
)
FEMNIST_HOWTO = (
    "FEMNIST is built locally with LEAF (https://github.com/TalwalkarLab/leaf): in "
    "leaf/data/femnist run `./preprocess.sh -s niid --sf 1.0 -k 0 -t sample` (any options; "
    "only the all_data output is used), then pack its JSON files with "
    "`tar -czf femnist_all_data.tar.gz -C leaf/data/femnist/data all_data`."
)
FEMNIST_NUM_CLASSES = 62

# Office-Home (Venkateswara et al. 2017), hosted on Google Drive behind a browser page
# (https://www.hemanthdv.org/officeHomeDataset.html). No official checksum is published; one
# third-party loader pins MD5 b1c14819770c4448fd5b6d931031c91c for a copy of this zip, which
# could not be verified here, so the file is trusted on first use.
OFFICEHOME_FILES: tuple[RemoteFile, ...] = (
    RemoteFile("OfficeHomeDataset_10072016.zip", sha256=None),
)
OFFICEHOME_HOWTO = (
    "Download OfficeHomeDataset_10072016.zip with a browser from "
    "https://www.hemanthdv.org/officeHomeDataset.html (Google Drive)."
)
#: domain index used in ``domain.npy``
OFFICEHOME_DOMAINS: tuple[str, ...] = ("Art", "Clipart", "Product", "Real World")
OFFICEHOME_NUM_CLASSES = 65
OFFICEHOME_DEFAULT_SIZE = 32
_IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png"}


# --------------------------------------------------------------------------- helpers


def _fetch_all(files: Sequence[RemoteFile], mirrors: Sequence[str], raw_dir: Path) -> list[Path]:
    return [fetch(f, mirrors, raw_dir) for f in files]


def _extracted(archive: Path, raw_dir: Path, members: Sequence[str] | None = None,
               tag: str = "") -> Path:
    """Extract ``archive`` once into a directory named after its content hash, and reuse it.

    The directory appears only complete (:func:`safe_extract`), and its name carries the
    archive's SHA-256, so a different archive never reuses a stale extraction.
    """
    digest = sha256_file(archive)[:16]
    target = raw_dir / f"{archive.name}.{digest}{tag}.d"
    if not target.is_dir():
        try:
            safe_extract(archive, target, members=members)
        except ARCHIVE_ERRORS as exc:  # e.g. a damaged copy trusted before archives were read
            record = raw_dir / f"{archive.name}.sha256"
            fix = (f"its hash was recorded in {record} when it was first used: delete {record}"
                   f" and {archive}, place a complete copy and rerun" if record.exists()
                   else f"replace {archive} with a complete copy and rerun")
            raise ArchiveMissingError(f"{archive} does not read to its end "
                                      f"({type(exc).__name__}: {exc}); {fix}") from exc
    return target


def _checksum_text(file: RemoteFile, path: Path) -> str:
    if file.sha256:
        return f"sha256 {file.sha256}"
    if file.content_sha256:
        return f"decompressed-content sha256 {file.content_sha256}"
    return (f"no official checksum is known: the SHA-256 of the file you place is recorded in "
            f"{path}.sha256 on first use and checked on every later run")


def _obtain_placed(dataset: str, file: RemoteFile, mirrors: Sequence[str], raw_dir: Path,
                   howto: str) -> Path:
    """Return the verified archive ``raw_dir/file.name`` ("place the archive here" mode).

    A present file is verified (never deleted). An absent one is fetched from
    ``mirrors`` if any are given; otherwise, or if they all fail,
    :class:`ArchiveMissingError` says exactly where to put which file.
    """
    raw_dir.mkdir(parents=True, exist_ok=True)
    path = raw_dir / file.name
    if path.is_file():
        record = tofu_record(raw_dir, file)
        try:
            return verify_file(path, file, raw_dir)
        except DamagedArchiveError as exc:  # first use: nothing recorded
            raise ArchiveMissingError(
                f"{dataset}: {exc}; its hash was not recorded. Replace it with a complete "
                f"copy of the archive.\n{howto}") from exc
        except ChecksumError as exc:
            if file.trust_on_first_use and record.exists():
                recorded = record.read_text(encoding="utf-8").split()[0]
                raise ArchiveMissingError(
                    f"{dataset}: {path} is not the archive first used here ({exc.actual}; "
                    f"{record} records sha256 {recorded}). If {path.name} is the archive to "
                    f"use (the first copy was damaged, or another version), delete {record} "
                    f"and rerun: the archive is then read to its end and its hash recorded "
                    f"anew. Otherwise put back the archive whose hash is recorded.") from exc
            raise ArchiveMissingError(
                f"{dataset}: {path} is present but does not verify ({exc}). Replace it with "
                f"the original archive ({_checksum_text(file, path)}).") from exc
    failures = ""
    if mirrors:
        try:
            return fetch(file, mirrors, raw_dir)
        except DownloadError as exc:
            failures = f"\nMirrors tried:\n{exc}"
    raise ArchiveMissingError(
        f"{dataset}: place the archive here: {path}\n  file name: {file.name}\n  checksum: "
        f"{_checksum_text(file, path)}\n{howto}{failures}")


def _natural_key(path: Path) -> list[object]:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", str(path))]


def _save_array(path: Path, arr: np.ndarray) -> None:
    with atomic_path(path) as tmp:
        with tmp.open("wb") as fh:
            np.save(fh, np.ascontiguousarray(arr), allow_pickle=False)


# --------------------------------------------------------------------------- IDX sets


def _prepare_idx(name: str, files: Sequence[RemoteFile], mirrors: Sequence[str], raw_dir: Path,
                 out_dir: Path, *, num_classes: int, source: str) -> DatasetMeta:
    """Fetch the four IDX files (train images, train labels, test images, test labels)."""
    if len(files) != 4:
        raise ValueError(f"{name}: expected 4 files (train images, train labels, test images, "
                         f"test labels), got {len(files)}")
    p = _fetch_all(files, mirrors, raw_dir)
    x_tr, y_tr = read_idx_pair(p[0], p[1])
    x_te, y_te = read_idx_pair(p[2], p[3])
    x = np.concatenate([x_tr, x_te])
    y = np.concatenate([y_tr, y_te])
    return write_dataset(out_dir, x, y, name=name, num_classes=num_classes, max_value=255,
                         source=f"{source}; official train ({len(x_tr)}) + test ({len(x_te)}) "
                                f"pooled")


def prepare_fashion_mnist(out_dir: Path, raw_dir: Path, mirrors: Sequence[str], *,
                          files: Sequence[RemoteFile] = FASHION_MNIST_FILES) -> DatasetMeta:
    """Fashion-MNIST: 70,000 grey 28x28 images, 10 classes (7,000 each), train+test pooled."""
    return _prepare_idx("fashion_mnist", files, mirrors, Path(raw_dir), Path(out_dir),
                        num_classes=10, source="Fashion-MNIST (Xiao et al. 2017), IDX files")


def prepare_mnist(out_dir: Path, raw_dir: Path, mirrors: Sequence[str], *,
                  files: Sequence[RemoteFile] = MNIST_FILES) -> DatasetMeta:
    """MNIST: 70,000 grey 28x28 digit images, 10 classes, train+test pooled."""
    return _prepare_idx("mnist", files, mirrors, Path(raw_dir), Path(out_dir),
                        num_classes=10, source="MNIST (LeCun et al.), IDX files")


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
    (archive,) = _fetch_all(files, mirrors, raw_dir)
    with zipfile.ZipFile(archive) as zf:
        names = zf.namelist()
    parts = ("train-images-idx3", "train-labels-idx1", "test-images-idx3", "test-labels-idx1")
    members = [_zip_member_for(names, f"emnist-{split}-{p}-ubyte.gz", archive) for p in parts]
    root = _extracted(archive, raw_dir, members, tag=f".{split}")
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


# --------------------------------------------------------------------------- CIFAR


def prepare_cifar10(out_dir: Path, raw_dir: Path, mirrors: Sequence[str], *,
                    files: Sequence[RemoteFile] = CIFAR10_FILES) -> DatasetMeta:
    """CIFAR-10 binary version: 60,000 RGB 32x32 images, 10 classes, train+test pooled.

    Batches are read in the order ``data_batch_1..5.bin``, ``test_batch.bin``.
    """
    raw_dir, out_dir = Path(raw_dir), Path(out_dir)
    (archive,) = _fetch_all(files, mirrors, raw_dir)
    batch_dir = _extracted(archive, raw_dir) / "cifar-10-batches-bin"
    names = [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"]
    paths = [batch_dir / n for n in names]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise FormatError(f"{archive}: not the CIFAR-10 binary layout; missing {missing}")
    x, y = read_cifar_binaries(paths, "cifar10")
    return write_dataset(out_dir, x, y, name="cifar10", num_classes=10, max_value=255,
                         source="CIFAR-10 binary version (Krizhevsky 2009); data_batch_1..5 + "
                                "test_batch pooled")


def prepare_cifar100(out_dir: Path, raw_dir: Path, mirrors: Sequence[str], *,
                     files: Sequence[RemoteFile] = CIFAR100_FILES) -> DatasetMeta:
    """CIFAR-100 binary version: 60,000 RGB 32x32 images, 100 fine classes, pooled."""
    raw_dir, out_dir = Path(raw_dir), Path(out_dir)
    (archive,) = _fetch_all(files, mirrors, raw_dir)
    data_dir = _extracted(archive, raw_dir) / "cifar-100-binary"
    paths = [data_dir / "train.bin", data_dir / "test.bin"]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise FormatError(f"{archive}: not the CIFAR-100 binary layout; missing {missing}")
    x, y = read_cifar_binaries(paths, "cifar100")
    return write_dataset(out_dir, x, y, name="cifar100", num_classes=100, max_value=255,
                         source="CIFAR-100 binary version (Krizhevsky 2009), fine labels; "
                                "train + test pooled")


# --------------------------------------------------------------------------- FEMNIST


def _leaf_json_files(root: Path) -> list[Path]:
    """LEAF's ``all_data`` JSON files if that directory exists, else every JSON file."""
    all_data = sorted(p for p in root.rglob("all_data") if p.is_dir())
    search = all_data if all_data else [root]
    files = sorted({f for d in search for f in d.rglob("*.json")}, key=_natural_key)
    if not files:
        raise FormatError(f"{root}: no LEAF JSON files found in the FEMNIST archive")
    return files


def prepare_femnist(out_dir: Path, raw_dir: Path, mirrors: Sequence[str], *,
                    files: Sequence[RemoteFile] = FEMNIST_FILES) -> DatasetMeta:
    """FEMNIST from LEAF's ``all_data`` JSON: 28x28 grey characters, 62 classes, per writer.

    Pixels are LEAF's values (floats in [0, 1], white background = 1) times 255,
    rounded. ``writer.npy`` holds each image's writer index (its natural client) and
    ``writers.json`` the writer ids in index order (order of first appearance, files in
    natural order). The archive is placed by hand; see :data:`FEMNIST_HOWTO`.
    """
    raw_dir, out_dir = Path(raw_dir), Path(out_dir)
    archive = _obtain_placed("femnist", files[0], mirrors, raw_dir, FEMNIST_HOWTO)
    root = _extracted(archive, raw_dir)
    xs: list[np.ndarray] = []
    ys: list[np.ndarray] = []
    ws: list[np.ndarray] = []
    writers: dict[str, int] = {}
    for jf in _leaf_json_files(root):
        data = json.loads(jf.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or "users" not in data or "user_data" not in data:
            raise FormatError(f"{jf}: not a LEAF data file (needs 'users' and 'user_data')")
        for user in data["users"]:
            record = data["user_data"][user]
            px = np.asarray(record["x"], dtype=np.float64)
            lab = np.asarray(record["y"], dtype=np.int64)
            if px.ndim != 2 or px.shape[1] != 784 or len(px) != len(lab):
                raise FormatError(f"{jf}: writer {user}: x has shape {px.shape}, y {lab.shape}; "
                                  "expected (n, 784) and (n,)")
            if px.size and (px.min() < 0.0 or px.max() > 1.0):
                raise FormatError(f"{jf}: writer {user}: pixel values outside [0, 1]")
            idx = writers.setdefault(str(user), len(writers))
            xs.append(np.rint(px * 255.0).astype(np.uint8).reshape(-1, 1, 28, 28))
            ys.append(lab)
            ws.append(np.full(len(lab), idx, dtype=np.int64))
        del data
    x, y, w = np.concatenate(xs), np.concatenate(ys), np.concatenate(ws)
    out_dir.mkdir(parents=True, exist_ok=True)
    _save_array(out_dir / "writer.npy", w)
    write_text(out_dir / "writers.json", json.dumps(list(writers), indent=0) + "\n")
    return write_dataset(out_dir, x, y, name="femnist", num_classes=FEMNIST_NUM_CLASSES,
                         max_value=255,
                         source=f"FEMNIST (LEAF, Caldas et al. 2018) all_data JSON; {len(writers)} "
                                "writers (writer.npy); LEAF pixel values x255, white background")


# --------------------------------------------------------------------------- Office-Home


def _officehome_root(root: Path) -> tuple[Path, list[Path]]:
    """Find the directory holding the four domain folders; return it and their paths."""
    aliases = {"Real World": ("Real World", "Real_World", "RealWorld")}
    candidates = [root, *sorted(p for p in root.iterdir() if p.is_dir())]
    for base in candidates:
        found = []
        for domain in OFFICEHOME_DOMAINS:
            hit = next((base / a for a in aliases.get(domain, (domain,)) if (base / a).is_dir()),
                       None)
            if hit is None:
                break
            found.append(hit)
        else:
            return base, found
    raise FormatError(f"{root}: no folder holding the Office-Home domains "
                      f"{list(OFFICEHOME_DOMAINS)}")


def _load_image(path: Path, size: int) -> np.ndarray:
    from PIL import Image

    with Image.open(path) as img:
        rgb = img.convert("RGB").resize((size, size), Image.Resampling.BILINEAR)
        return np.asarray(rgb, dtype=np.uint8).transpose(2, 0, 1)


def prepare_officehome(out_dir: Path, raw_dir: Path, mirrors: Sequence[str], *,
                       files: Sequence[RemoteFile] = OFFICEHOME_FILES,
                       image_size: int = OFFICEHOME_DEFAULT_SIZE) -> DatasetMeta:
    """Office-Home: 4 domains x 65 classes of RGB photos/art, resized to ``image_size``.

    Each image is decoded with Pillow, converted to RGB and resized (aspect ratio not
    kept) to ``image_size`` x ``image_size`` with Pillow's antialiasing bilinear filter.
    Classes are the folder names in sorted order (``classes.json``); ``domain.npy``
    holds each image's domain index into :data:`OFFICEHOME_DOMAINS`. Images are
    ordered by domain, class, then file name. The archive is placed by hand.
    """
    try:
        import PIL  # noqa: F401
    except ImportError as exc:  # pragma: no cover - Pillow ships with matplotlib
        raise ImportError("Office-Home needs Pillow to decode images: pip install pillow") from exc
    if image_size < 1:
        raise ValueError(f"image_size must be positive, got {image_size}")
    raw_dir, out_dir = Path(raw_dir), Path(out_dir)
    archive = _obtain_placed("officehome", files[0], mirrors, raw_dir, OFFICEHOME_HOWTO)
    _, domain_dirs = _officehome_root(_extracted(archive, raw_dir))
    class_sets = [sorted(p.name for p in d.iterdir() if p.is_dir()) for d in domain_dirs]
    classes = class_sets[0]
    if any(c != classes for c in class_sets) or len(classes) != OFFICEHOME_NUM_CLASSES:
        raise FormatError(f"{archive}: expected the same {OFFICEHOME_NUM_CLASSES} class folders "
                          f"in every domain, got {[len(c) for c in class_sets]}")
    xs: list[np.ndarray] = []
    ys: list[int] = []
    ds: list[int] = []
    for d_idx, d_dir in enumerate(domain_dirs):
        for c_idx, cls in enumerate(classes):
            images = sorted(p for p in (d_dir / cls).iterdir()
                            if p.is_file() and p.suffix.lower() in _IMAGE_SUFFIXES
                            and not p.name.startswith("."))
            for img in images:
                xs.append(_load_image(img, image_size))
                ys.append(c_idx)
                ds.append(d_idx)
    if not xs:
        raise FormatError(f"{archive}: no images found")
    out_dir.mkdir(parents=True, exist_ok=True)
    _save_array(out_dir / "domain.npy", np.asarray(ds, dtype=np.int64))
    write_text(out_dir / "classes.json", json.dumps(classes, indent=0) + "\n")
    return write_dataset(out_dir, np.stack(xs), np.asarray(ys, dtype=np.int64),
                         name="officehome", num_classes=OFFICEHOME_NUM_CLASSES, max_value=255,
                         source=f"Office-Home (Venkateswara et al. 2017), 4 domains (domain.npy:"
                                f" {', '.join(OFFICEHOME_DOMAINS)}), resized to "
                                f"{image_size}x{image_size} bilinear")


# --------------------------------------------------------------------------- registry

register_dataset(DatasetSource(
    name="fashion_mnist",
    description="Fashion-MNIST: 70,000 real 28x28 grey clothing images, 10 classes; official "
                "train+test pooled. Local Debian copy or official hosts.",
    prepare=prepare_fashion_mnist,
    default_mirrors=FASHION_MNIST_MIRRORS,
    num_samples=70_000,
    num_classes=10,
))
register_dataset(DatasetSource(
    name="mnist",
    description="MNIST: 70,000 real 28x28 handwritten digits, 10 classes; train+test pooled.",
    prepare=prepare_mnist,
    default_mirrors=MNIST_MIRRORS,
    num_samples=70_000,
    num_classes=10,
))
register_dataset(DatasetSource(
    name="emnist",
    description="EMNIST balanced: 131,600 real 28x28 handwritten characters, 47 classes; "
                "train+test pooled.",
    prepare=prepare_emnist,
    default_mirrors=EMNIST_MIRRORS,
    num_samples=131_600,
    num_classes=47,
))
register_dataset(DatasetSource(
    name="cifar10",
    description="CIFAR-10 (binary version): 60,000 real 32x32 colour images, 10 classes; "
                "train+test pooled.",
    prepare=prepare_cifar10,
    default_mirrors=CIFAR_MIRRORS,
    num_samples=60_000,
    num_classes=10,
))
register_dataset(DatasetSource(
    name="cifar100",
    description="CIFAR-100 (binary version): 60,000 real 32x32 colour images, 100 fine classes; "
                "train+test pooled.",
    prepare=prepare_cifar100,
    default_mirrors=CIFAR_MIRRORS,
    num_samples=60_000,
    num_classes=100,
))
register_dataset(DatasetSource(
    name="femnist",
    description="FEMNIST (LEAF): handwritten characters by writer (natural clients), 62 classes; "
                "archive built with LEAF and placed by hand (writer.npy).",
    prepare=prepare_femnist,
    num_classes=FEMNIST_NUM_CLASSES,
))
register_dataset(DatasetSource(
    name="officehome",
    description="Office-Home: 4 domains x 65 classes, resized to 32x32; archive placed by hand "
                "(domain.npy).",
    prepare=prepare_officehome,
    num_classes=OFFICEHOME_NUM_CLASSES,
))
