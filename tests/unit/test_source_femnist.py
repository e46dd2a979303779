"""FEMNIST from a placed LEAF archive: writers, trust on first use, damaged archives."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import numpy as np
import pytest
from _source_helpers import sha

from pflrepro.data.datasets import DATASETS
from pflrepro.data.rawfiles import ArchiveMissingError
from pflrepro.data.sources import femnist
from pflrepro.data.store import load_dataset


def test_femnist_asks_for_the_archive(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    with pytest.raises(ArchiveMissingError) as info:
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
    meta = femnist.prepare_femnist(tmp_path / "out", raw, ())
    ds = load_dataset(tmp_path / "out")
    assert meta.num_classes == 62 and meta.size == 6 and meta.shape == (1, 28, 28)
    assert meta.shape == DATASETS["femnist"].image_shape  # what the config check reads
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
    with pytest.raises(ArchiveMissingError, match="is not the archive first used") as info:
        femnist.prepare_femnist(tmp_path / "out2", raw, ())
    assert f"delete {record} and rerun" in str(info.value)
    assert archive.exists()
    record.unlink()  # the fix it names: the new archive is read, recorded and used
    femnist.prepare_femnist(tmp_path / "out3", raw, ())
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
    with pytest.raises(ArchiveMissingError, match="does not read to its end") as info:
        femnist.prepare_femnist(tmp_path / "out", raw, ())
    assert str(archive) in str(info.value) and "hash was not recorded" in str(info.value)
    assert not (raw / "femnist_all_data.tar.gz.sha256").exists()
    archive.write_bytes(good)  # the complete archive, placed afterwards, is used
    assert femnist.prepare_femnist(tmp_path / "out", raw, ()).size == 200
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
    with pytest.raises(ArchiveMissingError) as info:
        femnist.prepare_femnist(tmp_path / "out", raw, ())
    text = str(info.value)
    assert f"{archive} does not read to its end" in text
    # set aside with its record: the next run fetches it again instead of failing forever
    assert "set aside as femnist_all_data.tar.gz.corrupt-1 with its recorded hash" in text
    assert not archive.exists() and not record.exists()
    assert (raw / "femnist_all_data.tar.gz.sha256.corrupt-1").exists()
