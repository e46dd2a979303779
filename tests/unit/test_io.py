import os
import stat
from pathlib import Path

import pandas as pd
import pytest

from pflrepro.io import (
    FILE_MODE,
    CorruptFileError,
    atomic_digested_path,
    atomic_path,
    digest_path,
    parquet_errors,
    read_verified,
    recorded_digest,
    sha256_file,
    write_parquet,
    write_text,
)


def test_write_text_creates_parents_and_leaves_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b.txt"
    write_text(target, "hello")
    assert target.read_text() == "hello"
    assert [p.name for p in target.parent.iterdir()] == ["b.txt"]


def test_failure_leaves_old_file_untouched_and_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    target.write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            tmp.write_text("half-writ")
            raise RuntimeError("job died")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_failure_without_previous_file_leaves_nothing(tmp_path: Path) -> None:
    target = tmp_path / "new.parquet"
    with pytest.raises(KeyboardInterrupt):
        with atomic_path(target) as tmp:
            tmp.write_bytes(b"PAR1")
            raise KeyboardInterrupt
    assert list(tmp_path.iterdir()) == []


def test_write_parquet_round_trip(tmp_path: Path) -> None:
    frame = pd.DataFrame({"a": [1, 2], "b": ["x", "y"]})
    write_parquet(frame, tmp_path / "f.parquet")
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "f.parquet"), frame,
                                  check_dtype=False)


def test_outputs_get_the_umask_mode_not_mkstemps_0600(tmp_path: Path) -> None:
    mask = os.umask(0)
    os.umask(mask)
    assert FILE_MODE == 0o666 & ~mask
    target = tmp_path / "table.md"
    write_text(target, "x")
    assert stat.S_IMODE(target.stat().st_mode) == FILE_MODE
    write_text(target, "y")  # replacing an output keeps it so
    assert stat.S_IMODE(target.stat().st_mode) == FILE_MODE


# ------------------------------------------------------------------ digests on read
def _parquet(path: Path) -> Path:
    write_parquet(pd.DataFrame({"a": range(1000), "b": ["x"] * 1000}), path)
    return path


def test_digested_output_records_its_sha256(tmp_path: Path) -> None:
    path = _parquet(tmp_path / "run.parquet")
    assert digest_path(path).read_text() == f"{sha256_file(path)}  run.parquet\n"
    assert recorded_digest(path) == sha256_file(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.parquet", "run.parquet.sha256"]
    frame = read_verified(path, pd.read_parquet, parquet_errors())
    assert len(frame) == 1000


def test_failed_digested_write_keeps_the_old_file_and_its_record(tmp_path: Path) -> None:
    path = _parquet(tmp_path / "run.parquet")
    before = digest_path(path).read_text()
    with pytest.raises(RuntimeError):
        with atomic_digested_path(path) as tmp:
            tmp.write_bytes(b"half")
            raise RuntimeError("job died")
    assert digest_path(path).read_text() == before
    assert read_verified(path, pd.read_parquet, parquet_errors()) is not None


@pytest.mark.parametrize("damage", ["truncate", "flip"])
def test_damaged_file_is_set_aside_and_named(tmp_path: Path, damage: str) -> None:
    path = _parquet(tmp_path / "run.parquet")
    data = bytearray(path.read_bytes())
    if damage == "truncate":
        del data[len(data) // 2:]
    else:  # bytes flipped inside the data pages: a Parquet reader may not notice
        data[len(data) // 3] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptFileError) as info:
        read_verified(path, pd.read_parquet, parquet_errors())
    text = str(info.value)
    assert text.startswith(f"{path} is damaged: its SHA-256 differs from the one recorded in "
                           "run.parquet.sha256; set aside as run.parquet.corrupt-1. Fix: rerun "
                           "snakemake")
    aside = tmp_path / "run.parquet.corrupt-1"
    assert aside.read_bytes() == bytes(data)
    assert not path.exists() and not digest_path(path).exists()  # Snakemake rebuilds it
    _parquet(path)  # a second damaged copy goes beside the first
    path.write_bytes(b"PAR1")
    with pytest.raises(CorruptFileError, match="corrupt-2"):
        read_verified(path, pd.read_parquet, parquet_errors())


def test_file_without_record_is_read_or_set_aside_when_unreadable(tmp_path: Path) -> None:
    path = _parquet(tmp_path / "old.parquet")
    digest_path(path).unlink()  # written before outputs carried records
    assert len(read_verified(path, pd.read_parquet, parquet_errors())) == 1000
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(CorruptFileError, match=r"cannot be read \(ArrowInvalid"):
        read_verified(path, pd.read_parquet, parquet_errors())
    assert not path.exists() and (tmp_path / "old.parquet.corrupt-1").exists()


def test_verified_file_that_fails_to_parse_is_kept(tmp_path: Path) -> None:
    path = _parquet(tmp_path / "run.parquet")

    def broken_reader(p: Path) -> None:
        raise ValueError("reader bug")

    with pytest.raises(ValueError, match="reader bug"):
        read_verified(path, broken_reader, (ValueError,))
    assert path.exists() and digest_path(path).exists()


def test_missing_file_is_not_damage(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_verified(tmp_path / "none.parquet", pd.read_parquet, parquet_errors())
    assert list(tmp_path.iterdir()) == []
