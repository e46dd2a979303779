"""What the data-set sources (:mod:`pflrepro.data.sources`) share: raw files and archives.

Fetching a manifest (:func:`fetch_all`, through :func:`pflrepro.data.download.fetch`:
verified, resumable, offline once fetched), extracting an archive once
(:func:`extracted`), archives placed by hand (:func:`obtain_placed`, trust on first
use), the four-file IDX layout (:func:`prepare_idx`) and the extra per-sample arrays
written beside ``x.npy`` (:func:`save_array`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from pflrepro.data.download import (
    ARCHIVE_ERRORS,
    ChecksumError,
    DamagedArchiveError,
    DownloadError,
    RemoteFile,
    UnsafeArchiveError,
    fetch,
    safe_extract,
    tofu_record,
    verify_file,
)
from pflrepro.data.download.checks import recorded_sha256
from pflrepro.data.formats import read_idx_pair
from pflrepro.data.store import DatasetMeta, write_dataset
from pflrepro.store.io import atomic_path, set_aside, sha256_file


class ArchiveMissingError(FileNotFoundError):
    """A data set whose archive must be placed by hand is absent (or does not verify)."""



def fetch_all(files: Sequence[RemoteFile], mirrors: Sequence[str], raw_dir: Path) -> list[Path]:
    """Fetch every file of a manifest into ``raw_dir`` (:func:`fetch`); their paths."""
    return [fetch(f, mirrors, raw_dir) for f in files]


def extracted(archive: Path, raw_dir: Path, members: Sequence[str] | None = None,
               tag: str = "") -> Path:
    """Extract ``archive`` once into a directory named after its content hash, and reuse it.

    The directory appears only complete (:func:`safe_extract`), and its name carries the
    archive's SHA-256, so a different archive never reuses a stale extraction.
    """
    digest = sha256_file(archive)[:16]
    target = raw_dir / f"{archive.name}.{digest}{tag}.d"
    if not target.is_dir():
        try:
            safe_extract(archive, target, members=members)
        except (*ARCHIVE_ERRORS, UnsafeArchiveError) as exc:
            why = (str(exc) if isinstance(exc, UnsafeArchiveError)
                   else f"{archive} does not read to its end ({type(exc).__name__}: {exc})")
            raise ArchiveMissingError(f"{why}; {set_aside_archive(archive, raw_dir)}") from exc
    return target


def set_aside_archive(archive: Path, raw_dir: Path) -> str:
    """Set a refused archive and its first-use record aside; say what happens next.

    A refused archive is never kept where the next run would verify it again: with its
    recorded hash gone too, the next run fetches it anew (or asks for it to be placed).
    """
    aside = set_aside(archive)
    record = raw_dir / f"{archive.name}.sha256"
    kept = f" with its recorded hash (as {set_aside(record).name})" if record.exists() else ""
    return (f"set aside as {aside.name}{kept}: the next run fetches it again from the "
            f"mirrors, or asks for a good copy at {archive}")


def checksum_text(file: RemoteFile, path: Path) -> str:
    """How ``file`` is verified, in words (the error of a missing placed archive)."""
    if file.sha256:
        return f"sha256 {file.sha256}"
    if file.content_sha256:
        return f"decompressed-content sha256 {file.content_sha256}"
    return (f"no official checksum is known: the SHA-256 of the file you place is recorded in "
            f"{path}.sha256 on first use and checked on every later run")


def obtain_placed(dataset: str, file: RemoteFile, mirrors: Sequence[str], raw_dir: Path,
                   howto: str) -> Path:
    """Return the verified archive ``raw_dir/file.name`` ("place the archive here" mode).

    A present file is verified (never deleted). An absent one is fetched from
    ``mirrors`` if any are given; otherwise, or if they all fail,
    :class:`ArchiveMissingError` says exactly where to put which file.
    """
    raw_dir.mkdir(parents=True, exist_ok=True)
    path = raw_dir / file.name
    if path.is_file():
        record = tofu_record(raw_dir, file)
        try:
            return verify_file(path, file, raw_dir)
        except DamagedArchiveError as exc:  # first use: nothing recorded
            raise ArchiveMissingError(
                f"{dataset}: {exc}; its hash was not recorded. Replace it with a complete "
                f"copy of the archive.\n{howto}") from exc
        except ChecksumError as exc:
            if file.trust_on_first_use and record.exists():
                recorded = recorded_sha256(record)
                raise ArchiveMissingError(
                    f"{dataset}: {path} is not the archive first used here ({exc.actual}; "
                    f"{record} records sha256 {recorded}). If {path.name} is the archive to "
                    f"use (the first copy was damaged, or another version), delete {record} "
                    f"and rerun: the archive is then read to its end and its hash recorded "
                    f"anew. Otherwise put back the archive whose hash is recorded.") from exc
            raise ArchiveMissingError(
                f"{dataset}: {path} is present but does not verify ({exc}). Replace it with "
                f"the original archive ({checksum_text(file, path)}).") from exc
    failures = ""
    if mirrors:
        try:
            return fetch(file, mirrors, raw_dir)
        except DownloadError as exc:
            failures = f"\nMirrors tried:\n{exc}"
    raise ArchiveMissingError(
        f"{dataset}: place the archive here: {path}\n  file name: {file.name}\n  checksum: "
        f"{checksum_text(file, path)}\n{howto}{failures}")


def natural_key(path: Path) -> list[object]:
    """Sort key: ``path`` with its digit runs as numbers (``2.json`` before ``10.json``)."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", str(path))]


def save_array(path: Path, arr: np.ndarray) -> None:
    """Write ``arr`` to ``path`` as ``.npy``, atomically, without pickles."""
    with atomic_path(path) as tmp:
        with tmp.open("wb") as fh:
            np.save(fh, np.ascontiguousarray(arr), allow_pickle=False)


def prepare_idx(name: str, files: Sequence[RemoteFile], mirrors: Sequence[str], raw_dir: Path,
                 out_dir: Path, *, num_classes: int, source: str) -> DatasetMeta:
    """Fetch the four IDX files (train images, train labels, test images, test labels)."""
    if len(files) != 4:
        raise ValueError(f"{name}: expected 4 files (train images, train labels, test images, "
                         f"test labels), got {len(files)}")
    p = fetch_all(files, mirrors, raw_dir)
    x_tr, y_tr = read_idx_pair(p[0], p[1])
    x_te, y_te = read_idx_pair(p[2], p[3])
    x = np.concatenate([x_tr, x_te])
    y = np.concatenate([y_tr, y_te])
    return write_dataset(out_dir, x, y, name=name, num_classes=num_classes, max_value=255,
                         source=f"{source}; official train ({len(x_tr)}) + test ({len(x_te)}) "
                                f"pooled")
