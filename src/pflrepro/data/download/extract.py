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

#: The most an archive may unpack to, in bytes, unless its source states its own bound:
#: ten times the largest data set the sources fetch (Office-Home, about 1.1 GiB).
MAX_EXTRACTED_BYTES = 16 << 30
#: The largest ratio of unpacked to archive bytes accepted once the unpacked size passes
#: :data:`RATIO_FLOOR`: image and label archives compress by less than 10; a stream of
#: zeros (a decompression bomb) by about 1,000.
MAX_RATIO = 100.0
#: Below this many unpacked bytes the ratio is not checked (small test archives of
#: repeated bytes compress far better than any real data set, and cost nothing).
RATIO_FLOOR = 64 << 20


class ArchiveTooLargeError(UnsafeArchiveError):
    """An archive that unpacks to more than its bound (size or ratio): a likely bomb."""


def _check_bounds(sizes: list[int], archive: Path, max_bytes: int, max_ratio: float,
                  ratio_floor: int) -> None:
    """Refuse an archive whose members add up to more than the bounds, before extraction."""
    total = sum(sizes)
    if total > max_bytes:
        raise ArchiveTooLargeError(f"{archive}: its members add up to {total} bytes, more than "
                                   f"the {max_bytes} allowed; refused before extraction")
    packed = max(archive.stat().st_size, 1)
    if total > ratio_floor and total / packed > max_ratio:
        raise ArchiveTooLargeError(
            f"{archive}: {packed} bytes unpack to {total} ({total / packed:.0f} times), "
            f"more than the {max_ratio:g} times allowed (a decompression bomb?); refused "
            "before extraction")


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
                 overwrite: bool = False, max_bytes: int = MAX_EXTRACTED_BYTES,
                 max_ratio: float = MAX_RATIO, ratio_floor: int = RATIO_FLOOR) -> Path:
    """Extract ``archive`` (.tar, .tar.gz/.tgz, .zip) into the new directory ``target``.

    Every member is checked before anything is written: absolute names, ``..``
    components, symlinks, hardlinks and device/FIFO entries raise
    :class:`UnsafeArchiveError`. Extraction goes into a temporary directory beside
    ``target`` that is renamed onto it only on success, so ``target`` exists only when
    complete. ``members`` limits extraction to those member names (all must exist).
    An existing ``target`` raises :class:`FileExistsError` unless ``overwrite``.
    Files are written with mode 0644 and directories 0755 (no archive permissions,
    owners or set-id bits are applied). The members' sizes are checked against
    ``max_bytes`` and, past ``ratio_floor`` bytes, ``max_ratio`` times the archive's
    size before anything is written, and each member's bytes against its stated size
    while writing (:class:`ArchiveTooLargeError`; what was written is removed).
    Returns ``target``.
    """
    archive, target = Path(archive), Path(target)
    if target.exists() and not overwrite:
        raise FileExistsError(f"{target} already exists")
    kind = _archive_kind(archive)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".extracting",
                                dir=target.parent))
    try:
        bounds = (max_bytes, max_ratio, ratio_floor)
        if kind == "tar":
            with tarfile.open(archive, "r:*") as tf:
                _extract_all(_tar_members(tf, archive), tmp, archive, members,
                             tf.extractfile, bounds)
        else:
            with zipfile.ZipFile(archive) as zf:
                _extract_all(_zip_members(zf, archive), tmp, archive, members,
                             zf.open, bounds)
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def _size(member: _Member) -> int:
    handle = member.handle
    return int(handle.size if isinstance(handle, tarfile.TarInfo) else handle.file_size)


def _copy_bounded(src: IO[bytes], out: IO[bytes], limit: int, archive: Path,
                  name: str) -> None:
    """Copy at most ``limit`` bytes (the member's stated size); refuse a member that has more."""
    written = 0
    while block := src.read(_CHUNK):
        written += len(block)
        if written > limit:
            raise ArchiveTooLargeError(f"{archive}: member {name!r} holds more than the "
                                       f"{limit} bytes it states; refused")
        out.write(block)


def _extract_all(entries: list[_Member], root: Path, archive: Path,
                 wanted: Collection[str] | None,
                 open_member: Callable[[Any], IO[bytes] | None],
                 bounds: tuple[int, float, int]) -> None:
    selected = entries
    if wanted is not None:
        want = {str(_safe_member_path(w, archive)) for w in wanted}
        selected = [m for m in entries if str(m.rel) in want]
        missing = want - {str(m.rel) for m in selected}
        if missing:
            raise FileNotFoundError(f"{archive}: no member(s) {sorted(missing)}")
    _check_bounds([_size(m) for m in selected if not m.is_dir], archive, *bounds)
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
            _copy_bounded(src, out, _size(m), archive, str(m.rel))
        os.chmod(dest, 0o644)
