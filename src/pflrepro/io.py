"""Atomic file writing: every output appears whole or not at all."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # only annotations: importing this module needs no pandas
    import pandas as pd


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` on success.

    On an exception the temporary file is removed and ``path`` is left untouched,
    so a failing job never leaves a half-written output behind.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.replace(tmp_path, target)
    except BaseException:
        tmp_path.unlink(missing_ok=True)
        raise


def write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` to ``path`` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_parquet(frame: pd.DataFrame, path: str | os.PathLike[str]) -> None:
    """Write ``frame`` to Parquet atomically, without the pandas index."""
    with atomic_path(path) as tmp:
        frame.to_parquet(tmp, index=False, engine="pyarrow")


def write_csv(frame: pd.DataFrame, path: str | os.PathLike[str]) -> None:
    """Write ``frame`` to CSV atomically, without the index."""
    with atomic_path(path) as tmp:
        frame.to_csv(tmp, index=False)
