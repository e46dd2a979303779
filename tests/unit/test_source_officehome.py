"""Office-Home from a placed zip: domains, classes, resizing; truncated or absent zips."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest

from pflrepro.data.rawfiles import ArchiveMissingError
from pflrepro.data.sources import officehome
from pflrepro.data.store import load_dataset


def test_truncated_officehome_zip_is_refused(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    raw.mkdir()
    archive = raw / "OfficeHomeDataset_10072016.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("OfficeHomeDataset_10072016/Art/Alarm_Clock/00001.jpg", b"x" * 5000)
    archive.write_bytes(archive.read_bytes()[:3000])
    with pytest.raises(ArchiveMissingError, match="does not read to its end"):
        officehome.prepare_officehome(tmp_path / "out", raw, ())
    assert not (raw / "OfficeHomeDataset_10072016.zip.sha256").exists()


def test_officehome_asks_for_the_archive(tmp_path: Path) -> None:
    with pytest.raises(ArchiveMissingError) as info:
        officehome.prepare_officehome(tmp_path / "out", tmp_path / "raw", ())
    text = str(info.value)
    assert str(tmp_path / "raw" / "OfficeHomeDataset_10072016.zip") in text
    assert "hemanthdv.org" in text


def test_officehome_from_placed_archive(tmp_path: Path) -> None:
    from PIL import Image

    rng = np.random.default_rng(5)
    raw = tmp_path / "raw"
    raw.mkdir()
    classes = sorted(f"Class_{i:02d}" for i in range(officehome.OFFICEHOME_NUM_CLASSES))
    with zipfile.ZipFile(raw / "OfficeHomeDataset_10072016.zip", "w") as zf:
        zf.writestr("OfficeHomeDataset_10072016/ImageInfo.csv", "not an image\n")
        for domain in officehome.OFFICEHOME_DOMAINS:
            for cls in classes:
                buf = io.BytesIO()
                pixels = rng.integers(0, 256, (6, 10, 3), dtype=np.uint8)
                fmt = "JPEG" if domain == "Art" else "PNG"
                Image.fromarray(pixels).save(buf, format=fmt)
                ext = "jpg" if fmt == "JPEG" else "png"
                zf.writestr(f"OfficeHomeDataset_10072016/{domain}/{cls}/00001.{ext}",
                            buf.getvalue())
    meta = officehome.prepare_officehome(tmp_path / "out", raw, (), image_size=8)
    ds = load_dataset(tmp_path / "out")
    assert meta.size == 4 * 65 and meta.shape == (3, 8, 8) and meta.num_classes == 65
    domain = np.load(tmp_path / "out" / "domain.npy")
    np.testing.assert_array_equal(np.bincount(domain), [65] * 4)
    np.testing.assert_array_equal(ds.y[:65], np.arange(65))
    assert json.loads((tmp_path / "out" / "classes.json").read_text()) == classes


def _wrong_archive(raw: Path) -> Path:
    """A readable zip that is not Office-Home (one domain folder only)."""
    raw.mkdir(parents=True, exist_ok=True)
    archive = raw / "OfficeHomeDataset_10072016.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("OfficeHomeDataset_10072016/Art/Alarm_Clock/00001.jpg", b"x" * 50)
    return archive


def test_a_first_use_archive_that_does_not_prepare_is_not_trusted(tmp_path: Path) -> None:
    from pflrepro.data.datasets import prepare_dataset

    raw = tmp_path / "raw"
    archive = _wrong_archive(raw)
    with pytest.raises(ArchiveMissingError) as info:
        prepare_dataset("officehome", tmp_path / "out", raw)
    text = str(info.value)
    assert "no folder holding the Office-Home domains" in text
    assert "set aside as OfficeHomeDataset_10072016.zip.corrupt-1" in text
    assert "recorded hash (as OfficeHomeDataset_10072016.zip.sha256.corrupt-1)" in text
    # neither the archive nor its hash stays where the next run would trust it
    assert not archive.exists() and not (raw / f"{archive.name}.sha256").exists()
    with pytest.raises(ArchiveMissingError, match="place the archive here"):
        prepare_dataset("officehome", tmp_path / "out", raw)


def test_an_archive_recorded_before_keeps_its_record_on_failure(tmp_path: Path) -> None:
    from pflrepro.data.datasets import prepare_dataset
    from pflrepro.data.formats import FormatError
    from pflrepro.store.io import sha256_file

    raw = tmp_path / "raw"
    archive = _wrong_archive(raw)
    record = raw / f"{archive.name}.sha256"
    record.write_text(f"{sha256_file(archive)}  {archive.name}\n")
    with pytest.raises(FormatError, match="no folder holding"):
        prepare_dataset("officehome", tmp_path / "out", raw)
    assert archive.exists() and record.exists()
