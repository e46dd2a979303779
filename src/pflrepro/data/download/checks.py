"""Checksums of fetched files.

Official hashes, content hashes of re-compressed copies, records of first use, and
archives read to their end before they are trusted.
"""

from __future__ import annotations

import bz2
import gzip
import hashlib
import logging
import lzma
import tarfile
import zipfile
import zlib
from pathlib import Path
from typing import IO

from pflrepro.data.download.remote import (
    _CHUNK,
    _GZIP_MAGIC,
    ChecksumError,
    DamagedArchiveError,
    RemoteFile,
)
from pflrepro.store.io import sha256_file, write_text

log = logging.getLogger(__name__)


def content_sha256_file(path: Path) -> str | None:
    """SHA-256 of the gunzipped content (of the bytes themselves if not gzip).

    Returns ``None`` for a damaged or truncated gzip stream.
    """
    with path.open("rb") as raw:
        is_gzip = raw.read(2) == _GZIP_MAGIC
    h = hashlib.sha256()
    try:
        with (gzip.open(path, "rb") if is_gzip else path.open("rb")) as fh:
            for block in iter(lambda: fh.read(_CHUNK), b""):
                h.update(block)
    except (OSError, EOFError, zlib.error):
        return None
    return h.hexdigest()


def _tofu_record(dest_dir: Path, name: str) -> Path:
    return dest_dir / f"{name}.sha256"


def recorded_sha256(record: Path) -> str:
    """The SHA-256 a first-use record holds; a one-line error naming it when it holds none.

    The record is read only when it is a regular file; its text is never quoted.
    """
    fix = (f"delete {record} (and the archive beside it, unless you trust it) and rerun: "
           "the archive is then fetched or checked anew")
    if not record.is_file() or record.is_symlink():
        raise DamagedArchiveError(f"{record} is not a first-use record (not a regular "
                                  f"file); {fix}")
    try:
        fields = record.read_bytes().decode("utf-8").split()
    except UnicodeDecodeError:
        raise DamagedArchiveError(f"{record} is not a first-use record (not UTF-8 "
                                  f"text); {fix}") from None
    digest = fields[0].lower() if fields else ""
    if len(digest) != 64 or not all(c in "0123456789abcdef" for c in digest):
        raise DamagedArchiveError(f"{record} does not hold a SHA-256; {fix}")
    return digest


def tofu_record(dest_dir: Path, file: RemoteFile) -> Path:
    """Where the hash of a trust-on-first-use ``file`` is recorded: ``<name>.sha256``."""
    return _tofu_record(Path(dest_dir), file.name)


#: What reading a truncated or corrupt archive raises (besides ``OSError``s such as
#: ``gzip.BadGzipFile``, which also stand for I/O failures).
ARCHIVE_ERRORS: tuple[type[BaseException], ...] = (
    zipfile.BadZipFile, tarfile.TarError, zlib.error, lzma.LZMAError, EOFError,
    gzip.BadGzipFile)
_TAR_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz")


def _drain(stream: IO[bytes]) -> None:
    while stream.read(_CHUNK):
        pass


def _decompressed(path: Path) -> IO[bytes]:
    """``path`` opened for reading, through gzip, bzip2 or xz by its magic bytes."""
    with path.open("rb") as fh:
        head = fh.read(6)
    if head.startswith(_GZIP_MAGIC):
        return gzip.open(path, "rb")
    if head.startswith(b"BZh"):
        return bz2.open(path, "rb")
    if head.startswith(b"\xfd7zXZ\x00"):
        return lzma.open(path, "rb")
    return path.open("rb")


def check_readable(path: Path, name: str | None = None) -> None:
    """Read the archive at ``path`` to its end; raise :class:`DamagedArchiveError` if it fails.

    The kind comes from ``name`` (default: the file's own name; a download in progress
    is ``<name>.part``): a ``.zip`` has every member read and CRC-checked, a tar
    (``.tar``, ``.tar.gz``/``.tgz``, ``.tar.bz2``, ``.tar.xz``) every member and then the
    rest of its compressed stream read, a ``.gz`` its whole stream (length and CRC
    checked). Any other file has nothing to check. A missing or unreadable (permissions)
    file raises as usual.
    """
    path = Path(path)
    name = (name or path.name).lower()
    try:
        if name.endswith(".zip"):
            with zipfile.ZipFile(path) as zf:
                bad = zf.testzip()
            if bad is not None:
                raise zipfile.BadZipFile(f"member {bad!r} fails its CRC check")
        elif name.endswith(_TAR_SUFFIXES):
            with _decompressed(path) as stream:
                with tarfile.open(fileobj=stream, mode="r|") as tf:
                    for info in tf:
                        member = tf.extractfile(info) if info.isreg() else None
                        if member is not None:
                            _drain(member)
                _drain(stream)  # past the tar's end: the compressed stream's own end
        elif name.endswith(".gz"):
            with gzip.open(path, "rb") as stream:
                _drain(stream)
    except (FileNotFoundError, PermissionError):
        raise
    except (*ARCHIVE_ERRORS, OSError) as exc:
        raise DamagedArchiveError(
            f"{path} does not read to its end ({type(exc).__name__}: {exc}): a truncated or "
            "damaged copy") from exc


def _expected_text(file: RemoteFile, recorded: str | None, record: Path | None = None) -> str:
    alternatives = []
    if file.sha256:
        alternatives.append(f"sha256 {file.sha256}")
    if file.content_sha256:
        alternatives.append(f"content sha256 {file.content_sha256} (decompressed)")
    if recorded:
        where = (f" in {record}; if that first copy was the wrong one, delete {record}"
                 if record is not None else "")
        alternatives.append(f"sha256 {recorded} (recorded on first use{where})")
    text = " or ".join(alternatives) or "(trust on first use)"
    if file.size is not None:
        text += f"; canonical size {file.size} bytes"
    return text


def check_file(path: Path, file: RemoteFile, record_dir: Path | None = None
               ) -> tuple[bool, str, str]:
    """Check the file at ``path`` against ``file``'s checksums; return ``(ok, expected, actual)``.

    For a trust-on-first-use file the recorded hash in ``record_dir/<name>.sha256`` is
    used (``record_dir`` defaults to the file's directory); without a record the file
    is accepted. ``expected`` and ``actual`` are human-readable descriptions.
    """
    record_dir = path.parent if record_dir is None else record_dir
    actual = sha256_file(path)
    recorded = None
    record = None
    if file.trust_on_first_use:
        record = _tofu_record(record_dir, file.name)
        if not record.exists():
            return True, "(trust on first use)", f"sha256 {actual}"
        recorded = recorded_sha256(record)
        ok = actual == recorded
    else:
        ok = file.sha256 is not None and actual == file.sha256
    actual_text = f"sha256 {actual}"
    if not ok and file.content_sha256:
        content = content_sha256_file(path)
        ok = content == file.content_sha256
        actual_text += f", content sha256 {content or '(not a complete gzip stream)'}"
    actual_text += f", {path.stat().st_size} bytes"
    return ok, _expected_text(file, recorded, record), actual_text


def verify_file(path: Path, file: RemoteFile, record_dir: Path | None = None) -> Path:
    """Raise :class:`ChecksumError` unless ``path`` verifies; record a first-use hash.

    Unlike :func:`fetch` this never deletes anything: it is meant for files a person
    placed by hand. A first-use archive that does not read to its end raises
    :class:`DamagedArchiveError` and nothing is recorded. Returns ``path``.
    """
    record_dir = path.parent if record_dir is None else record_dir
    ok, expected, actual = check_file(path, file, record_dir)
    if not ok:
        raise ChecksumError(str(path), expected, actual)
    _record_first_use(path, file, record_dir)
    return path


def _record_first_use(path: Path, file: RemoteFile, dest_dir: Path) -> None:
    """Record the hash of a first-use file, once it has read to its end (archives)."""
    record = _tofu_record(dest_dir, file.name)
    if file.trust_on_first_use and not record.exists():
        check_readable(path, file.name)  # a truncated first copy is never trusted
        digest = sha256_file(path)
        write_text(record, f"{digest}  {file.name}\n")
        log.warning("%s: no official checksum known; recorded sha256 %s in %s (trust on "
                    "first use)", file.name, digest, record)
