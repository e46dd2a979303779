"""Verified, resumable downloads from an ordered list of mirrors, and safe archive extraction.

:func:`fetch` brings one :class:`RemoteFile` into a directory. Each mirror is a base
location that holds the file under its own name: an ``http(s)://`` URL, a ``file://``
URL or a plain local directory. Mirrors are tried in order; the first one that yields
a file with the expected checksum wins.

* The download goes to ``<name>.part`` next to the final file and is renamed onto
  ``<name>`` only after its checksum has been verified, so a present ``<name>`` is
  always a verified file.
* An interrupted HTTP download keeps its ``.part``; the next attempt (in the same call,
  or a later run) asks the server for the rest with a ``Range`` request and appends
  when the server answers ``206 Partial Content``, or starts over otherwise.
* A checksum mismatch deletes the bad file and is reported with the file's name, the
  expected and the actual hash; the next mirror is then tried. When every mirror
  fails, one :class:`DownloadError` lists each mirror's failure.
* If the final file is already present and verifies, nothing is contacted, so a
  prepared raw directory works offline.

Checksums: ``sha256`` is the hash of the file's bytes. For ``.gz`` files a mirror may
hold a re-compressed copy (different gzip bytes, same content), so ``content_sha256``
(the hash of the decompressed content) is accepted as an alternative match. With
neither given the file is *trusted on first use*: the hash of the first copy is
recorded in ``<name>.sha256`` beside it and every later use is checked against it. An
archive (``.zip``, ``.tar[.gz|.bz2|.xz]``, ``.gz``) is first read to its end
(:func:`check_readable`), so a truncated or damaged first copy is refused, never
recorded; a later copy that differs from the record is reported with the record's path,
the file to delete when the first copy was the wrong one.

:func:`safe_extract` unpacks ``.tar``/``.tar.gz``/``.zip`` archives, refusing any member
that would land outside the target (absolute paths, ``..``) and any link or special
file, and extracts into a temporary directory that is renamed onto the target only
when everything succeeded.
"""

from __future__ import annotations

import bz2
import gzip
import hashlib
import http.client
import logging
import lzma
import os
import shutil
import stat
import tarfile
import tempfile
import zipfile
import zlib
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, Any, BinaryIO
from urllib.error import HTTPError, URLError
from urllib.parse import quote, unquote, urlparse
from urllib.request import Request, url2pathname, urlopen

from pflrepro.io import sha256_file, write_text

log = logging.getLogger(__name__)

_CHUNK = 1 << 20
_USER_AGENT = "pflrepro-fetch/1"
_GZIP_MAGIC = b"\x1f\x8b"


@dataclass(frozen=True)
class RemoteFile:
    """One file to fetch: its name on every mirror and how to recognise a good copy.

    ``sha256`` is the SHA-256 of the file's bytes; ``content_sha256`` (for gzip files)
    is the SHA-256 of the decompressed content and is accepted as an alternative,
    because a re-compressed mirror has different bytes but the same content. ``size``
    (bytes of the canonical file) is informational: it appears in messages, but a
    re-compressed copy may legitimately differ. With neither hash set the file is
    trusted on first use (see the module docstring).
    """

    name: str
    sha256: str | None
    size: int | None = None
    content_sha256: str | None = None

    def __post_init__(self) -> None:
        """Reject names that are not a single plain file name."""
        if not self.name or "/" in self.name or "\\" in self.name or self.name in {".", ".."}:
            raise ValueError(f"RemoteFile name must be a plain file name, got {self.name!r}")
        for label, value in (("sha256", self.sha256), ("content_sha256", self.content_sha256)):
            if value is not None and (len(value) != 64 or not _is_hex(value)):
                raise ValueError(f"{self.name}: {label} must be 64 hex digits, got {value!r}")

    @property
    def trust_on_first_use(self) -> bool:
        """Whether no checksum is known in advance for this file."""
        return self.sha256 is None and self.content_sha256 is None


class DownloadError(RuntimeError):
    """A file could not be fetched from any mirror (or one mirror failed)."""

    def __init__(self, message: str, failures: Sequence[tuple[str, str]] = ()) -> None:
        super().__init__(message)
        self.failures: list[tuple[str, str]] = list(failures)


class ChecksumError(DownloadError):
    """A file's checksum does not match; the bad file has been deleted."""

    def __init__(self, name: str, expected: str, actual: str, where: str = "") -> None:
        loc = f" from {where}" if where else ""
        super().__init__(f"{name}{loc}: checksum mismatch: expected {expected}, got {actual}")
        self.name = name
        self.expected = expected
        self.actual = actual


class DamagedArchiveError(DownloadError):
    """An archive that does not open or read to its end (truncated or corrupt)."""


class UnsafeArchiveError(ValueError):
    """An archive member would escape the extraction target or is not a plain file/dir."""


class _Incomplete(DownloadError):
    """The connection ended before the whole body arrived; the ``.part`` is kept."""


def _is_hex(text: str) -> bool:
    return all(c in "0123456789abcdefABCDEF" for c in text)


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
        recorded = record.read_text(encoding="utf-8").split()[0].strip()
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


def _mirror_kind(mirror: str) -> str:
    scheme = urlparse(mirror).scheme.lower()
    if scheme in {"http", "https"}:
        return "http"
    if scheme == "file":
        return "file"
    if scheme and len(scheme) > 1:  # one letter would be a Windows drive
        raise DownloadError(f"unsupported mirror scheme {scheme!r} in {mirror!r}")
    return "dir"


def _local_source(mirror: str, name: str) -> Path:
    if _mirror_kind(mirror) == "file":
        parsed = urlparse(mirror)
        if parsed.netloc not in {"", "localhost"}:
            raise DownloadError(f"file:// mirror with a remote host is not supported: {mirror}")
        base = Path(url2pathname(unquote(parsed.path)))
    else:
        base = Path(mirror).expanduser()
    return base / name


def _copy_local(src: Path, part: Path) -> None:
    if not src.is_file():
        raise FileNotFoundError(f"{src} does not exist")
    with src.open("rb") as fin, part.open("wb") as fout:
        shutil.copyfileobj(fin, fout, _CHUNK)


def _http_url(mirror: str, name: str) -> str:
    return mirror.rstrip("/") + "/" + quote(name)


def _write_body(resp: http.client.HTTPResponse | BinaryIO, fh: BinaryIO,
                expected: int | None, url: str) -> None:
    written = 0
    try:
        while True:
            block = resp.read(_CHUNK)
            if not block:
                break
            fh.write(block)
            written += len(block)
    except (http.client.IncompleteRead, ConnectionError, TimeoutError) as exc:
        fh.flush()
        raise _Incomplete(f"{url}: transfer interrupted after {written} bytes ({exc!r})") from exc
    if expected is not None and written < expected:
        raise _Incomplete(f"{url}: connection closed after {written} of {expected} bytes")


def _http_download(url: str, part: Path, timeout: float) -> bool:
    """Download ``url`` into ``part``, resuming an existing ``part``; return whether resumed."""
    start = part.stat().st_size if part.exists() else 0
    headers = {"User-Agent": _USER_AGENT, "Accept-Encoding": "identity"}
    if start:
        headers["Range"] = f"bytes={start}-"
    try:
        resp = urlopen(Request(url, headers=headers), timeout=timeout)
    except HTTPError as exc:
        if exc.code == 416 and start:
            # Nothing beyond our partial file: it may already be whole; let the caller check.
            exc.close()
            return True
        raise
    with resp:
        resumed = False
        mode = "wb"
        if start and resp.status == 206:
            content_range = resp.headers.get("Content-Range", "")
            if content_range.startswith(f"bytes {start}-"):
                mode, resumed = "ab", True
            else:  # a range we did not ask for: start over with a plain request
                resp.close()
                part.unlink()
                return _http_download(url, part, timeout)
        elif start:
            log.info("%s: server ignored the Range request; downloading from the start", url)
        length = resp.headers.get("Content-Length")
        expected = int(length) if length and length.isdigit() else None
        with part.open(mode) as fh:
            _write_body(resp, fh, expected, url)
    return resumed


def _from_mirror(file: RemoteFile, mirror: str, dest_dir: Path, *, timeout: float,
                 attempts: int) -> Path:
    """Fetch ``file`` from one mirror into ``dest_dir``; raise on any failure."""
    part = dest_dir / f"{file.name}.part"
    final = dest_dir / file.name
    kind = _mirror_kind(mirror)
    where = mirror
    for attempt in range(1, attempts + 1):
        resumed = False
        if kind == "http":
            where = _http_url(mirror, file.name)
            try:
                resumed = _http_download(where, part, timeout)
            except _Incomplete:
                if attempt == attempts:
                    raise
                log.warning("%s: interrupted (attempt %d/%d); resuming", where, attempt, attempts)
                continue
        else:
            src = _local_source(mirror, file.name)
            where = str(src)
            _copy_local(src, part)
        ok, expected, actual = check_file(part, file, dest_dir)
        if ok:
            try:
                _record_first_use(part, file, dest_dir)
            except DamagedArchiveError:
                part.unlink(missing_ok=True)
                raise
            os.replace(part, final)
            return final
        part.unlink(missing_ok=True)
        if resumed and attempt < attempts:
            # The partial file may have come from a mirror with different bytes; retry whole.
            log.warning("%s: resumed file did not verify; downloading it again whole", where)
            continue
        raise ChecksumError(file.name, expected, actual, where)
    raise DownloadError(f"{where}: gave up after {attempts} attempts")  # pragma: no cover


def fetch(file: RemoteFile, mirrors: Sequence[str], dest_dir: Path, *, timeout: float = 60.0,
          attempts: int = 3) -> Path:
    """Bring ``file`` into ``dest_dir`` from the first mirror that yields a verified copy.

    Returns the path of the verified file ``dest_dir / file.name``. If that file is
    already present and verifies, no mirror is contacted. ``timeout`` bounds each
    network operation (seconds); ``attempts`` is how often one HTTP mirror is retried
    (resuming) after an interrupted transfer. Raises :class:`DownloadError` listing
    every mirror's failure when none succeeds.
    """
    dest_dir = Path(dest_dir)
    dest_dir.mkdir(parents=True, exist_ok=True)
    final = dest_dir / file.name
    if final.is_file():
        ok, expected, actual = check_file(final, file, dest_dir)
        if ok:
            try:
                _record_first_use(final, file, dest_dir)
                return final
            except DamagedArchiveError as exc:
                log.warning("%s; deleting it and fetching again", exc)
        else:
            log.warning("%s: present but does not verify (expected %s, got %s); deleting it "
                        "and fetching again", final, expected, actual)
        final.unlink()
    if not mirrors:
        raise DownloadError(f"{file.name}: not present in {dest_dir} and no mirrors given")
    failures: list[tuple[str, str]] = []
    for mirror in mirrors:
        try:
            return _from_mirror(file, mirror, dest_dir, timeout=timeout, attempts=attempts)
        except (OSError, http.client.HTTPException, DownloadError, ValueError) as exc:
            reason = _describe(exc)
            log.warning("%s: mirror %s failed: %s", file.name, mirror, reason)
            failures.append((mirror, reason))
    lines = "\n".join(f"  - {m}: {r}" for m, r in failures)
    raise DownloadError(f"could not fetch {file.name} from any of {len(mirrors)} mirror(s):\n"
                        f"{lines}", failures)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, HTTPError):
        return f"HTTP {exc.code} {exc.reason}"
    if isinstance(exc, URLError):
        return f"{type(exc.reason).__name__}: {exc.reason}"
    return f"{type(exc).__name__}: {exc}"


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
