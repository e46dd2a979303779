"""Helpers the data-set sources share (pflrepro.data.rawfiles)."""

from __future__ import annotations

import tarfile
from pathlib import Path

import numpy as np
import pytest

from pflrepro.data.download import RemoteFile
from pflrepro.data.rawfiles import (
    ArchiveMissingError,
    checksum_text,
    extracted,
    fetch_all,
    natural_key,
    obtain_placed,
    save_array,
)


def test_natural_key_orders_digit_runs_as_numbers() -> None:
    paths = [Path("d/all_data_10.json"), Path("d/all_data_2.json"), Path("d/all_data_1.json")]
    assert [p.name for p in sorted(paths, key=natural_key)] == [
        "all_data_1.json", "all_data_2.json", "all_data_10.json"]


def test_checksum_text_says_how_a_file_is_verified() -> None:
    path = Path("raw/a.tar.gz")
    assert checksum_text(RemoteFile("a.tar.gz", sha256="ab" * 32), path) == "sha256 " + "ab" * 32
    assert checksum_text(RemoteFile("a.tar.gz", sha256=None, content_sha256="cd" * 32),
                         path) == "decompressed-content sha256 " + "cd" * 32
    text = checksum_text(RemoteFile("a.tar.gz", sha256=None), path)
    assert text.startswith("no official checksum") and "raw/a.tar.gz.sha256" in text


def test_fetch_all_then_extract_once(tmp_path: Path) -> None:
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (tmp_path / "member.txt").write_text("hello\n")
    archive = mirror / "a.tar.gz"
    with tarfile.open(archive, "w:gz") as tf:
        tf.add(tmp_path / "member.txt", arcname="top/member.txt")
    raw = tmp_path / "raw"
    (got,) = fetch_all([RemoteFile("a.tar.gz", sha256=None)], [str(mirror)], raw)
    assert got == raw / "a.tar.gz" and got.read_bytes() == archive.read_bytes()
    first = extracted(got, raw)
    assert (first / "top/member.txt").read_text() == "hello\n"
    (first / "top/member.txt").write_text("changed\n")
    assert extracted(got, raw) == first  # reused, not extracted again
    assert (first / "top/member.txt").read_text() == "changed\n"


def test_obtain_placed_names_the_place_and_the_howto(tmp_path: Path) -> None:
    with pytest.raises(ArchiveMissingError) as info:
        obtain_placed("toy", RemoteFile("toy.zip", sha256=None), (), tmp_path / "raw",
                      "Build it with X.")
    text = str(info.value)
    assert f"place the archive here: {tmp_path / 'raw' / 'toy.zip'}" in text
    assert text.endswith("Build it with X.")


def test_save_array_round_trips(tmp_path: Path) -> None:
    save_array(tmp_path / "w.npy", np.array([3, 1, 2], dtype=np.int64))
    np.testing.assert_array_equal(np.load(tmp_path / "w.npy"), [3, 1, 2])


def _tar_gz(path: Path, members: dict[str, bytes], link: str | None = None) -> Path:
    import io

    with tarfile.open(path, "w:gz") as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
        if link is not None:
            info = tarfile.TarInfo(link)
            info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
            tf.addfile(info)
    return path


def test_a_refused_archive_never_sticks(tmp_path: Path) -> None:
    # a hostile archive was recorded (trust on first use) before extraction refused it;
    # every later run re-verified the kept copy and failed without contacting the mirror
    mirror, raw = tmp_path / "mirror", tmp_path / "raw"
    mirror.mkdir()
    name = "data.tar.gz"
    _tar_gz(mirror / name, {"a.txt": b"a"}, link="evil")
    file = RemoteFile(name, sha256=None)
    (archive,) = fetch_all([file], [str(mirror)], raw)
    with pytest.raises(ArchiveMissingError, match="links are refused.*set aside as "
                       "data.tar.gz.corrupt-1 with its recorded hash.*fetches it again"):
        extracted(archive, raw)
    assert not (raw / name).exists() and not (raw / f"{name}.sha256").exists()
    _tar_gz(mirror / name, {"a.txt": b"good"})  # the mirror is good again
    (archive,) = fetch_all([file], [str(mirror)], raw)
    assert (extracted(archive, raw) / "a.txt").read_bytes() == b"good"


def test_a_decompression_bomb_is_refused_before_extraction(tmp_path: Path) -> None:
    from pflrepro.data.download.extract import ArchiveTooLargeError, safe_extract

    bomb = _tar_gz(tmp_path / "bomb.tar.gz", {"zeros.bin": bytes(4 << 20)})
    assert bomb.stat().st_size < 40_000  # 4 MiB of zeros in a few KB
    with pytest.raises(ArchiveTooLargeError, match="times allowed .a decompression bomb"):
        safe_extract(bomb, tmp_path / "out", ratio_floor=1 << 20)
    with pytest.raises(ArchiveTooLargeError, match="more than the 1000000 allowed"):
        safe_extract(bomb, tmp_path / "out", max_bytes=1_000_000)
    assert not (tmp_path / "out").exists()
    assert list(tmp_path.glob(".out.*")) == []  # nothing written is left
    assert (safe_extract(bomb, tmp_path / "out") / "zeros.bin").stat().st_size == 4 << 20


def test_a_garbled_first_use_record_is_named(tmp_path: Path) -> None:
    # a non-UTF-8 record gave a decode error naming no file, on every run
    mirror, raw = tmp_path / "mirror", tmp_path / "raw"
    mirror.mkdir()
    _tar_gz(mirror / "data.tar.gz", {"a.txt": b"a"})
    file = RemoteFile("data.tar.gz", sha256=None)
    fetch_all([file], [str(mirror)], raw)
    record = raw / "data.tar.gz.sha256"
    record.write_bytes(b"\xff\xfe garbage")
    with pytest.raises(Exception, match=f"{record} is not a first-use record .not UTF-8 "
                                        f"text.; delete {record}") as info:
        fetch_all([file], [str(mirror)], raw)
    assert "garbage" not in str(info.value)
