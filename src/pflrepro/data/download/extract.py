"""Safe extraction of tar and zip archives.

No member lands outside the target, no link or device is created, and a damaged
archive is named as such.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
import tarfile
import tempfile
import zipfile
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, Any

from pflrepro.data.download.checks import _TAR_SUFFIXES
from pflrepro.data.download.remote import _CHUNK, UnsafeArchiveError

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------- extraction


def _safe_member_path(name: str, archive: Path) -> PurePosixPath | None:
    """Validate a member name; return its relative path (``None`` for the root itself)."""
    if "\x00" in name or "\\" in name:
        raise UnsafeArchiveError(f"{archive}: member {name!r} has a NUL or backslash in its name")
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        raise UnsafeArchiveError(f"{archive}: member {name!r} has an absolute path")
    rel = PurePosixPath(name)
    if ".." in rel.parts:
        raise UnsafeArchiveError(f"{archive}: member {name!r} escapes the target via '..'")
    parts = [p for p in rel.parts if p not in {"", "."}]
    return PurePosixPath(*parts) if parts else None


@dataclass(frozen=True)
class _Member:
    rel: PurePosixPath
    is_dir: bool
    handle: tarfile.TarInfo | zipfile.ZipInfo


def _tar_members(tf: tarfile.TarFile, archive: Path) -> list[_Member]:
    out = []
    for info in tf.getmembers():
        rel = _safe_member_path(info.name, archive)
        if info.issym() or info.islnk():
            kind = "symlink" if info.issym() else "hardlink"
            raise UnsafeArchiveError(f"{archive}: member {info.name!r} is a {kind} "
                                     f"(to {info.linkname!r}); links are refused")
        if not (info.isreg() or info.isdir()):
            raise UnsafeArchiveError(f"{archive}: member {info.name!r} is a device, FIFO or "
                                     "other special file; only files and directories allowed")
        if rel is not None:
            out.append(_Member(rel, info.isdir(), info))
    return out


def _zip_members(zf: zipfile.ZipFile, archive: Path) -> list[_Member]:
    out = []
    for info in zf.infolist():
        rel = _safe_member_path(info.filename, archive)
        # Unix file type in the high bits of external_attr; 0 when the creator did not
        # record one (DOS-style zips, Python's writestr), in which case it is a file/dir.
        mode = info.external_attr >> 16
        if stat.S_ISLNK(mode):
            raise UnsafeArchiveError(f"{archive}: member {info.filename!r} is a symlink; "
                                     "links are refused")
        if stat.S_IFMT(mode) and not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            raise UnsafeArchiveError(f"{archive}: member {info.filename!r} is a device, FIFO "
                                     "or other special file; only files and directories allowed")
        if rel is not None:
            out.append(_Member(rel, info.is_dir(), info))
    return out


def _archive_kind(archive: Path) -> str:
    name = archive.name.lower()
    if name.endswith(".zip"):
        return "zip"
    if name.endswith(_TAR_SUFFIXES):
        return "tar"
    if zipfile.is_zipfile(archive):
        return "zip"
    if tarfile.is_tarfile(archive):
        return "tar"
    raise ValueError(f"{archive}: not a .tar, .tar.gz or .zip archive")


def safe_extract(archive: Path, target: Path, *, members: Collection[str] | None = None,
                 overwrite: bool = False) -> Path:
    """Extract ``archive`` (.tar, .tar.gz/.tgz, .zip) into the new directory ``target``.

    Every member is checked before anything is written: absolute names, ``..``
    components, symlinks, hardlinks and device/FIFO entries raise
    :class:`UnsafeArchiveError`. Extraction goes into a temporary directory beside
    ``target`` that is renamed onto it only on success, so ``target`` exists only when
    complete. ``members`` limits extraction to those member names (all must exist).
    An existing ``target`` raises :class:`FileExistsError` unless ``overwrite``.
    Files are written with mode 0644 and directories 0755 (no archive permissions,
    owners or set-id bits are applied). Returns ``target``.
    """
    archive, target = Path(archive), Path(target)
    if target.exists() and not overwrite:
        raise FileExistsError(f"{target} already exists")
    kind = _archive_kind(archive)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".extracting",
                                dir=target.parent))
    try:
        if kind == "tar":
            with tarfile.open(archive, "r:*") as tf:
                _extract_all(_tar_members(tf, archive), tmp, archive, members,
                             tf.extractfile)
        else:
            with zipfile.ZipFile(archive) as zf:
                _extract_all(_zip_members(zf, archive), tmp, archive, members,
                             zf.open)
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def _extract_all(entries: list[_Member], root: Path, archive: Path,
                 wanted: Collection[str] | None,
                 open_member: Callable[[Any], IO[bytes] | None]) -> None:
    selected = entries
    if wanted is not None:
        want = {str(_safe_member_path(w, archive)) for w in wanted}
        selected = [m for m in entries if str(m.rel) in want]
        missing = want - {str(m.rel) for m in selected}
        if missing:
            raise FileNotFoundError(f"{archive}: no member(s) {sorted(missing)}")
    root_resolved = root.resolve()
    os.chmod(root, 0o755)
    for m in selected:
        dest = root.joinpath(*m.rel.parts)
        if not dest.resolve().is_relative_to(root_resolved):  # belt and braces
            raise UnsafeArchiveError(f"{archive}: member {str(m.rel)!r} escapes the target")
        if m.is_dir:
            dest.mkdir(parents=True, exist_ok=True, mode=0o755)
            continue
        dest.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
        src = open_member(m.handle)
        if src is None:
            raise UnsafeArchiveError(f"{archive}: member {str(m.rel)!r} has no data")
        with src, dest.open("wb") as out:
            shutil.copyfileobj(src, out, _CHUNK)
        os.chmod(dest, 0o644)
