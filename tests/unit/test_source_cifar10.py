"""CIFAR-10's binary layout, over loopback HTTP and offline; a wrong layout is refused."""

from __future__ import annotations

import functools
import io
import tarfile
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest
from _source_helpers import spec_for

from pflrepro.data.datasets import DATASETS
from pflrepro.data.sources import cifar10
from pflrepro.data.store import load_dataset


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
    meta = cifar10.prepare_cifar10(tmp_path / "out", raw, [url], files=files)
    ds = load_dataset(tmp_path / "out", verify=True)
    assert meta.size == 12 and meta.shape == (3, 32, 32) and meta.num_classes == 10
    assert meta.shape == DATASETS["cifar10"].image_shape  # what the config check reads
    np.testing.assert_array_equal(ds.x, x)
    np.testing.assert_array_equal(ds.y, y)
    # offline rerun: the archive and its extraction are reused, the server is not needed
    archive.unlink()
    meta2 = cifar10.prepare_cifar10(tmp_path / "out2", raw, [url], files=files)
    assert meta2.x_sha256 == meta.x_sha256


def test_cifar10_wrong_layout(tmp_path: Path) -> None:
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    archive = mirror / "cifar-10-binary.tar.gz"
    with tarfile.open(archive, "w:gz") as tf:
        info = tarfile.TarInfo("something/else.bin")
        tf.addfile(info, io.BytesIO(b""))
    with pytest.raises(ValueError, match="CIFAR-10 binary layout"):
        cifar10.prepare_cifar10(tmp_path / "out", tmp_path / "raw", [str(mirror)],
                                files=[spec_for(archive)])
