"""Atomic file writing: every output appears whole or not at all."""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # only annotations: importing this module needs no pandas
    import pandas as pd


def _read_umask() -> int:
    """The process's umask (read once, at import, by setting and restoring it)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


#: Outputs get the permissions a plain ``open(path, "w")`` would give them.
FILE_MODE = 0o666 & ~_read_umask()


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` on success.

    On an exception the temporary file is removed and ``path`` is left untouched,
    so a failing job never leaves a half-written output behind. The output gets the
    mode a plain ``open`` would give it (:data:`FILE_MODE`), not ``mkstemp``'s 0600,
    so others on a shared cluster can read the results as usual.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.chmod(tmp_path, FILE_MODE)
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


def sha256_file(path: str | os.PathLike[str]) -> str:
    """SHA-256 (hex) of a file's bytes, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
