import os
import stat
from pathlib import Path

import pandas as pd
import pytest

from pflrepro.io import FILE_MODE, atomic_path, write_parquet, write_text


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
