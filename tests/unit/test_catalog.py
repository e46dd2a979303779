"""The catalog of real data sets: end to end on the Debian Fashion-MNIST and on small
archives built here in the real layouts (served over loopback HTTP or a local mirror)."""

from __future__ import annotations

import functools
import gzip
import hashlib
import io
import json
import struct
import tarfile
import threading
import time
import zipfile
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from pflrepro.data import catalog
from pflrepro.data.datasets import DATASETS
from pflrepro.data.download import RemoteFile
from pflrepro.data.store import load_dataset

DEBIAN_FASHION = Path("/usr/share/datasets/fashion-mnist")


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def spec_for(path: Path) -> RemoteFile:
    return RemoteFile(path.name, sha(path), path.stat().st_size)


class _QuietHandler(SimpleHTTPRequestHandler):
    timeout = 5

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@pytest.fixture
def http_dir(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A loopback HTTP server serving the files of a fresh directory; stops itself."""
    root = tmp_path / "www"
    root.mkdir()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0),
                                functools.partial(_QuietHandler, directory=str(root)))
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    watchdog = threading.Timer(60.0, httpd.shutdown)
    watchdog.daemon = True
    thread.start()
    watchdog.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/", root
    finally:
        watchdog.cancel()
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


def test_registry_has_the_real_sets() -> None:
    for name in ("fashion_mnist", "mnist", "emnist", "cifar10", "cifar100", "femnist",
                 "officehome"):
        assert name in DATASETS
    assert DATASETS["cifar10"].prepare is catalog.prepare_cifar10
    assert str(DEBIAN_FASHION) in DATASETS["fashion_mnist"].default_mirrors


@pytest.mark.skipif(not DEBIAN_FASHION.is_dir(),
                    reason=f"{DEBIAN_FASHION} missing: apt-get install dataset-fashion-mnist")
def test_fashion_mnist_from_debian(tmp_path: Path) -> None:
    start = time.perf_counter()
    meta = catalog.prepare_fashion_mnist(tmp_path / "out", tmp_path / "raw",
                                         [str(DEBIAN_FASHION)])
    elapsed = time.perf_counter() - start
    ds = load_dataset(tmp_path / "out", verify=True)
    assert meta.size == 70_000 and ds.x.shape == (70_000, 1, 28, 28)
    assert meta.shape == (1, 28, 28) and meta.num_classes == 10
    np.testing.assert_array_equal(np.bincount(ds.y, minlength=10), [7_000] * 10)
    assert ds.x.dtype == np.uint8 and int(ds.x.max()) == 255
    # the Debian files are re-compressed: they verify by their decompressed content
    for f in catalog.FASHION_MNIST_FILES:
        assert (tmp_path / "raw" / f.name).is_file()
    assert elapsed < 30


def idx(arr: np.ndarray) -> bytes:
    return bytes([0, 0, 8, arr.ndim]) + struct.pack(f">{arr.ndim}I", *arr.shape) + arr.tobytes()


def test_mnist_layout_via_local_mirror(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    xtr = rng.integers(0, 256, (5, 28, 28), dtype=np.uint8)
    xte = rng.integers(0, 256, (3, 28, 28), dtype=np.uint8)
    ytr, yte = np.array([0, 1, 2, 3, 9], np.uint8), np.array([4, 5, 6], np.uint8)
    contents = [idx(xtr), idx(ytr), idx(xte), idx(yte)]
    files = []
    for f, data in zip(catalog.MNIST_FILES, contents, strict=True):
        (mirror / f.name).write_bytes(gzip.compress(data))
        files.append(spec_for(mirror / f.name))
    meta = catalog.prepare_mnist(tmp_path / "out", tmp_path / "raw", [str(mirror)], files=files)
    ds = load_dataset(tmp_path / "out")
    assert meta.size == 8
    np.testing.assert_array_equal(ds.x[:, 0], np.concatenate([xtr, xte]))  # train then test
    np.testing.assert_array_equal(ds.y, [0, 1, 2, 3, 9, 4, 5, 6])


def cifar10_archive(path: Path, per_batch: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """Write a small archive in the real CIFAR-10 binary layout; return its pooled arrays."""
    rng = np.random.default_rng(1)
    names = [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"]
    xs, ys = [], []
    with tarfile.open(path, "w:gz") as tf:
        for name in names:
            x = rng.integers(0, 256, (per_batch, 3, 32, 32), dtype=np.uint8)
            y = rng.integers(0, 10, per_batch).astype(np.uint8)
            data = b"".join(bytes([y[i]]) + x[i].tobytes() for i in range(per_batch))
            info = tarfile.TarInfo(f"cifar-10-batches-bin/{name}")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
            xs.append(x)
            ys.append(y)
        meta = b"airplane\nautomobile\n"
        info = tarfile.TarInfo("cifar-10-batches-bin/batches.meta.txt")
        info.size = len(meta)
        tf.addfile(info, io.BytesIO(meta))
    return np.concatenate(xs), np.concatenate(ys).astype(np.int64)


def test_cifar10_over_loopback_http(tmp_path: Path, http_dir: tuple[str, Path]) -> None:
    url, root = http_dir
    archive = root / "cifar-10-binary.tar.gz"
    x, y = cifar10_archive(archive)
    files = [spec_for(archive)]
    raw = tmp_path / "raw"
    meta = catalog.prepare_cifar10(tmp_path / "out", raw, [url], files=files)
    ds = load_dataset(tmp_path / "out", verify=True)
    assert meta.size == 12 and meta.shape == (3, 32, 32) and meta.num_classes == 10
    np.testing.assert_array_equal(ds.x, x)
    np.testing.assert_array_equal(ds.y, y)
    # offline rerun: the archive and its extraction are reused, the server is not needed
    archive.unlink()
    meta2 = catalog.prepare_cifar10(tmp_path / "out2", raw, [url], files=files)
    assert meta2.x_sha256 == meta.x_sha256


def test_cifar10_wrong_layout(tmp_path: Path) -> None:
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    archive = mirror / "cifar-10-binary.tar.gz"
    with tarfile.open(archive, "w:gz") as tf:
        info = tarfile.TarInfo("something/else.bin")
        tf.addfile(info, io.BytesIO(b""))
    with pytest.raises(ValueError, match="CIFAR-10 binary layout"):
        catalog.prepare_cifar10(tmp_path / "out", tmp_path / "raw", [str(mirror)],
                                files=[spec_for(archive)])


def test_cifar100_fine_labels(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    archive = mirror / "cifar-100-binary.tar.gz"
    xs, fine = [], []
    with tarfile.open(archive, "w:gz") as tf:
        for name, n in (("train.bin", 3), ("test.bin", 2)):
            x = rng.integers(0, 256, (n, 3, 32, 32), dtype=np.uint8)
            f = rng.integers(0, 100, n)
            data = b"".join(bytes([f[i] // 5, f[i]]) + x[i].tobytes() for i in range(n))
            info = tarfile.TarInfo(f"cifar-100-binary/{name}")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
            xs.append(x)
            fine.append(f)
    meta = catalog.prepare_cifar100(tmp_path / "out", tmp_path / "raw", [mirror.as_uri()],
                                    files=[spec_for(archive)])
    ds = load_dataset(tmp_path / "out")
    assert meta.num_classes == 100 and meta.size == 5
    np.testing.assert_array_equal(ds.x, np.concatenate(xs))
    np.testing.assert_array_equal(ds.y, np.concatenate(fine))


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
    meta = catalog.prepare_emnist(tmp_path / "out", tmp_path / "raw", [str(mirror)],
                                  files=[spec_for(archive)], split=split)
    ds = load_dataset(tmp_path / "out")
    assert meta.num_classes == catalog.EMNIST_SPLITS[split]
    np.testing.assert_array_equal(ds.x[:, 0], upright)
    np.testing.assert_array_equal(ds.y, [0, 1, 2, 3])


def test_femnist_asks_for_the_archive(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    with pytest.raises(catalog.ArchiveMissingError) as info:
        DATASETS["femnist"].prepare(tmp_path / "out", raw, ())
    text = str(info.value)
    assert str(raw / "femnist_all_data.tar.gz") in text
    assert "no official checksum" in text and "femnist_all_data.tar.gz.sha256" in text
    assert "preprocess.sh" in text


def leaf_json(users: dict[str, tuple[np.ndarray, list[int]]]) -> bytes:
    return json.dumps({
        "users": list(users),
        "num_samples": [len(v[1]) for v in users.values()],
        "user_data": {u: {"x": (x / 255.0).tolist(), "y": y} for u, (x, y) in users.items()},
    }).encode()


def test_femnist_from_placed_archive(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    a = rng.integers(0, 256, (2, 784)).astype(np.float64)
    b = rng.integers(0, 256, (3, 784)).astype(np.float64)
    c = rng.integers(0, 256, (1, 784)).astype(np.float64)
    raw = tmp_path / "raw"
    raw.mkdir()
    archive = raw / "femnist_all_data.tar.gz"
    with tarfile.open(archive, "w:gz") as tf:
        for name, payload in (
            ("all_data/all_data_10.json", leaf_json({"f0003_10": (c, [61])})),
            ("all_data/all_data_2.json", leaf_json({"f0001_02": (a, [0, 5]),
                                                    "f0002_07": (b, [7, 8, 9])})),
        ):
            info = tarfile.TarInfo(name)
            info.size = len(payload)
            tf.addfile(info, io.BytesIO(payload))
    meta = catalog.prepare_femnist(tmp_path / "out", raw, ())
    ds = load_dataset(tmp_path / "out")
    assert meta.num_classes == 62 and meta.size == 6 and meta.shape == (1, 28, 28)
    # natural file order: all_data_2 before all_data_10
    np.testing.assert_array_equal(ds.y, [0, 5, 7, 8, 9, 61])
    np.testing.assert_array_equal(ds.x.reshape(6, 784), np.concatenate([a, b, c]))
    writer = np.load(tmp_path / "out" / "writer.npy")
    np.testing.assert_array_equal(writer, [0, 0, 1, 1, 1, 2])
    assert json.loads((tmp_path / "out" / "writers.json").read_text()) == [
        "f0001_02", "f0002_07", "f0003_10"]
    assert (raw / "femnist_all_data.tar.gz.sha256").read_text().split()[0] == sha(archive)
    # a different archive later does not verify against the recorded hash, and is kept;
    # the message names the record to delete if the new archive is the one to use
    archive.write_bytes(archive.read_bytes() + b"\0" * 512)
    record = raw / "femnist_all_data.tar.gz.sha256"
    with pytest.raises(catalog.ArchiveMissingError, match="is not the archive first used") as info:
        catalog.prepare_femnist(tmp_path / "out2", raw, ())
    assert f"delete {record} and rerun" in str(info.value)
    assert archive.exists()
    record.unlink()  # the fix it names: the new archive is read, recorded and used
    catalog.prepare_femnist(tmp_path / "out3", raw, ())
    assert record.read_text().split()[0] == sha(archive)


def _femnist_archive(path: Path) -> Path:
    """A placed FEMNIST archive of one LEAF file: 200 random 28x28 images of one writer."""
    x = np.random.default_rng(7).integers(0, 256, (200, 784)).astype(np.float64)
    payload = leaf_json({"f0001_01": (x, [1] * 200)})
    with tarfile.open(path, "w:gz") as tf:
        info = tarfile.TarInfo("all_data/all_data_0.json")
        info.size = len(payload)
        tf.addfile(info, io.BytesIO(payload))
    return path


def test_truncated_first_femnist_archive_is_refused_not_recorded(tmp_path: Path) -> None:
    # issue 17, item 6: the first archive seen was trusted as it was, so a truncated one
    # stayed "verified" forever (an uncaught EOFError on every run)
    raw = tmp_path / "raw"
    raw.mkdir()
    archive = _femnist_archive(raw / "femnist_all_data.tar.gz")
    good = archive.read_bytes()
    archive.write_bytes(good[: len(good) // 2])
    with pytest.raises(catalog.ArchiveMissingError, match="does not read to its end") as info:
        catalog.prepare_femnist(tmp_path / "out", raw, ())
    assert str(archive) in str(info.value) and "hash was not recorded" in str(info.value)
    assert not (raw / "femnist_all_data.tar.gz.sha256").exists()
    archive.write_bytes(good)  # the complete archive, placed afterwards, is used
    assert catalog.prepare_femnist(tmp_path / "out", raw, ()).size == 200
    assert (raw / "femnist_all_data.tar.gz.sha256").read_text().split()[0] == sha(archive)


def test_damaged_archive_trusted_earlier_names_the_record(tmp_path: Path) -> None:
    # a record written for a truncated archive before archives were read to their end:
    # extraction fails with the record named, not with a bare EOFError
    raw = tmp_path / "raw"
    raw.mkdir()
    archive = _femnist_archive(raw / "femnist_all_data.tar.gz")
    archive.write_bytes(archive.read_bytes()[:-300])
    record = raw / "femnist_all_data.tar.gz.sha256"
    record.write_text(f"{sha(archive)}  {archive.name}\n")
    with pytest.raises(catalog.ArchiveMissingError) as info:
        catalog.prepare_femnist(tmp_path / "out", raw, ())
    text = str(info.value)
    assert f"{archive} does not read to its end" in text and f"delete {record}" in text


def test_truncated_officehome_zip_is_refused(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    raw.mkdir()
    archive = raw / "OfficeHomeDataset_10072016.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("OfficeHomeDataset_10072016/Art/Alarm_Clock/00001.jpg", b"x" * 5000)
    archive.write_bytes(archive.read_bytes()[:3000])
    with pytest.raises(catalog.ArchiveMissingError, match="does not read to its end"):
        catalog.prepare_officehome(tmp_path / "out", raw, ())
    assert not (raw / "OfficeHomeDataset_10072016.zip.sha256").exists()


def test_officehome_asks_for_the_archive(tmp_path: Path) -> None:
    with pytest.raises(catalog.ArchiveMissingError) as info:
        catalog.prepare_officehome(tmp_path / "out", tmp_path / "raw", ())
    text = str(info.value)
    assert str(tmp_path / "raw" / "OfficeHomeDataset_10072016.zip") in text
    assert "hemanthdv.org" in text


def test_officehome_from_placed_archive(tmp_path: Path) -> None:
    from PIL import Image

    rng = np.random.default_rng(5)
    raw = tmp_path / "raw"
    raw.mkdir()
    classes = sorted(f"Class_{i:02d}" for i in range(catalog.OFFICEHOME_NUM_CLASSES))
    with zipfile.ZipFile(raw / "OfficeHomeDataset_10072016.zip", "w") as zf:
        zf.writestr("OfficeHomeDataset_10072016/ImageInfo.csv", "not an image\n")
        for domain in catalog.OFFICEHOME_DOMAINS:
            for cls in classes:
                buf = io.BytesIO()
                pixels = rng.integers(0, 256, (6, 10, 3), dtype=np.uint8)
                fmt = "JPEG" if domain == "Art" else "PNG"
                Image.fromarray(pixels).save(buf, format=fmt)
                ext = "jpg" if fmt == "JPEG" else "png"
                zf.writestr(f"OfficeHomeDataset_10072016/{domain}/{cls}/00001.{ext}",
                            buf.getvalue())
    meta = catalog.prepare_officehome(tmp_path / "out", raw, (), image_size=8)
    ds = load_dataset(tmp_path / "out")
    assert meta.size == 4 * 65 and meta.shape == (3, 8, 8) and meta.num_classes == 65
    domain = np.load(tmp_path / "out" / "domain.npy")
    np.testing.assert_array_equal(np.bincount(domain), [65] * 4)
    np.testing.assert_array_equal(ds.y[:65], np.arange(65))
    assert json.loads((tmp_path / "out" / "classes.json").read_text()) == classes
