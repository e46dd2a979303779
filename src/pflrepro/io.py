"""Atomic file writing: every output appears whole or not at all; digests checked on read.

Outputs that later jobs read back (run tables, aggregates, partitions, public sets)
are written with :func:`atomic_digested_path`: a ``<file>.sha256`` record beside the
file, in ``sha256sum`` format, holds the SHA-256 of the file's bytes. A reader goes
through :func:`read_verified`, which checks the file against its record before
parsing it. A file that does not match, or (when written before files carried
records) cannot be parsed, is damaged: it is set aside as ``<file>.corrupt-<n>``, so
the output is missing and Snakemake's next run rebuilds it, and the error names the
file, why, and that fix.

The record is replaced around the file's rename: the old record is removed before
the new file is renamed into place, the new record written after. A crash in between
leaves a complete file with no record (read as one written before records existed:
accepted when it parses), never a file beside a stale record.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:  # only annotations: importing this module needs no pandas
    import pandas as pd


def _read_umask() -> int:
    """The process's umask (read once, at import, by setting and restoring it)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


#: Outputs get the permissions a plain ``open(path, "w")`` would give them.
FILE_MODE = 0o666 & ~_read_umask()
#: Suffix of the digest record written beside an output (``<file>.sha256``).
DIGEST_SUFFIX = ".sha256"
#: What to do about a damaged output: its producer reruns once it is missing.
RERUN_FIX = ("rerun snakemake: the file is now missing, so Snakemake rebuilds it and "
             "everything made from it")

T = TypeVar("T")


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
    """Write ``frame`` to Parquet atomically, without the pandas index, with its digest.

    Read it back with :func:`read_verified` (``pflrepro.results.read_table``).
    """
    with atomic_digested_path(path) as tmp:
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


# ------------------------------------------------------------------ digests on read
class CorruptFileError(ValueError):
    """A stored file that failed its digest or could not be parsed; it was set aside."""

    def __init__(self, path: Path, reason: str, aside: Path | None, fix: str) -> None:
        where = (f"set aside as {aside.name}" if aside is not None
                 else "already set aside by another job")
        super().__init__(f"{path} is damaged: {reason}; {where}. Fix: {fix}")
        self.path = path
        self.aside = aside


def digest_path(path: str | os.PathLike[str]) -> Path:
    """The digest record of ``path``: ``<path>.sha256`` beside it."""
    target = Path(path)
    return target.with_name(target.name + DIGEST_SUFFIX)


@contextlib.contextmanager
def atomic_digested_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """:func:`atomic_path` that also records the file's SHA-256 in ``<path>.sha256``.

    The old record is removed before the new file is renamed into place and the new
    one written after it, so a record never describes another version of the file.
    """
    target = Path(path)
    record = digest_path(target)
    with atomic_path(target) as tmp:
        yield tmp
        digest = sha256_file(tmp)  # read back from the page cache
        record.unlink(missing_ok=True)
    write_text(record, f"{digest}  {target.name}\n")


def recorded_digest(path: str | os.PathLike[str]) -> str | None:
    """The SHA-256 recorded for ``path`` (None when it has no record)."""
    try:
        text = digest_path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    fields = text.split()
    return fields[0].lower() if fields else ""


def set_aside(path: str | os.PathLike[str]) -> Path:
    """Rename ``path`` to the first free ``<path>.corrupt-<n>`` (n = 1, 2, ...); return it."""
    path = Path(path)
    n = 1
    while (aside := path.with_name(f"{path.name}.corrupt-{n}")).exists():
        n += 1
    path.rename(aside)
    return aside


def read_verified(path: str | os.PathLike[str], read: Callable[[Path], T],
                  parse_errors: tuple[type[BaseException], ...], *,
                  fix: str = RERUN_FIX) -> T:
    """``read(path)`` after checking ``path`` against its digest record.

    A file whose SHA-256 differs from its record (``<path>.sha256``), or one without
    a record (written before outputs carried them) that ``read`` fails on with one of
    ``parse_errors``, is damaged: it is set aside as ``<path>.corrupt-<n>`` (its record
    removed), so that the output is missing and gets rebuilt, and
    :class:`CorruptFileError` names the file, why, where it went and ``fix``. A file
    that matches its record is what its writer wrote: an error reading it passes
    through (it is not damage). A missing file or one that cannot be opened
    (permissions) raises as usual.
    """
    path = Path(path)
    expected = recorded_digest(path)
    if expected is not None:
        actual = sha256_file(path)
        if actual != expected:
            raise _damaged(path, f"its SHA-256 differs from the one recorded in "
                                 f"{digest_path(path).name}", fix)
        return read(path)
    try:
        return read(path)
    except (FileNotFoundError, PermissionError, IsADirectoryError):
        raise
    except parse_errors as exc:
        first_line = (str(exc).strip().splitlines() or [""])[0]
        raise _damaged(path, f"it cannot be read ({type(exc).__name__}: {first_line})",
                       fix) from exc


def parquet_errors() -> tuple[type[BaseException], ...]:
    """What pyarrow raises reading a file that is not a whole Parquet file.

    The ``parse_errors`` of :func:`read_verified` for Parquet readers.
    """
    import pyarrow as pa

    return (pa.ArrowException, OSError)


def _damaged(path: Path, reason: str, fix: str) -> CorruptFileError:
    """Set ``path`` aside (another job may have done so already); the error to raise."""
    try:
        aside: Path | None = set_aside(path)
    except FileNotFoundError:
        aside = None
    digest_path(path).unlink(missing_ok=True)
    return CorruptFileError(path, reason, aside, fix)
