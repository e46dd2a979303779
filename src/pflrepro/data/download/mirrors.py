"""Fetching a file from an ordered list of mirrors.

Resumable HTTP, file URLs and local directories; each copy is verified before it
replaces the final file.
"""

from __future__ import annotations

import http.client
import logging
import os
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO
from urllib.error import HTTPError, URLError
from urllib.parse import quote, unquote, urlparse
from urllib.request import Request, url2pathname, urlopen

from pflrepro.data.download.checks import _record_first_use, check_file
from pflrepro.data.download.remote import (
    _CHUNK,
    _USER_AGENT,
    ChecksumError,
    DamagedArchiveError,
    DownloadError,
    Limits,
    RemoteFile,
    TooSlowError,
    _Incomplete,
)
from pflrepro.store.targets import check_output_target

log = logging.getLogger(__name__)


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


#: The limits every fetch applies unless given its own (``pflrepro prepare`` sets them
#: from its options, the config's ``data: download:``).
LIMITS = Limits()


def set_limits(limits: Limits) -> None:
    """Make ``limits`` the default of every later :func:`fetch` in this process."""
    global LIMITS  # noqa: PLW0603 (one process prepares one data set)
    LIMITS = limits


def _check_pace(url: str, received: int, started: float, limits: Limits) -> None:
    """Raise :class:`TooSlowError` past the deadline or below the minimum rate."""
    elapsed = time.monotonic() - started
    how = ("raise data: download: deadline_s / min_rate in the config, or pflrepro prepare "
           "--deadline / --min-rate")
    if elapsed > limits.deadline_s:
        raise TooSlowError(f"{url}: gave up after {elapsed:.0f} s, the deadline, with "
                           f"{received} bytes received ({how})")
    if elapsed > limits.grace_s and received < limits.min_rate * elapsed:
        raise TooSlowError(f"{url}: {received} bytes in {elapsed:.0f} s, below the minimum "
                           f"rate of {limits.min_rate:g} bytes/s ({how})")


def _write_body(resp: http.client.HTTPResponse | BinaryIO, fh: BinaryIO,
                expected: int | None, url: str, started: float = 0.0,
                limits: Limits | None = None) -> None:
    written = 0
    limits = Limits() if limits is None else limits
    started = started or time.monotonic()
    try:
        while True:
            _check_pace(url, written, started, limits)
            # read1: whatever arrived (up to a chunk), so that a trickle is measured
            block = (resp.read1(_CHUNK) if hasattr(resp, "read1") else resp.read(_CHUNK))
            if not block:
                break
            fh.write(block)
            written += len(block)
    except (http.client.IncompleteRead, ConnectionError, TimeoutError) as exc:
        fh.flush()
        _check_pace(url, written, started, limits)  # a read cut short by the deadline
        raise _Incomplete(f"{url}: transfer interrupted after {written} bytes ({exc!r})") from exc
    if expected is not None and written < expected:
        raise _Incomplete(f"{url}: connection closed after {written} of {expected} bytes")


def _http_download(url: str, part: Path, timeout: float, started: float = 0.0,
                   limits: Limits | None = None) -> bool:
    """Download ``url`` into ``part``, resuming an existing ``part``; return whether resumed.

    The socket timeout (each connect and read) is ``timeout`` or the time left before
    the deadline, whichever is shorter: a server that sends its headers and then
    nothing is given up at the deadline, not a socket timeout per read later.
    """
    start = part.stat().st_size if part.exists() else 0
    limits = Limits() if limits is None else limits
    started = started or time.monotonic()
    _check_pace(url, start, started, limits)  # past the deadline: no new request
    left = limits.deadline_s - (time.monotonic() - started)
    headers = {"User-Agent": _USER_AGENT, "Accept-Encoding": "identity"}
    if start:
        headers["Range"] = f"bytes={start}-"
    try:
        resp = urlopen(Request(url, headers=headers), timeout=min(timeout, max(left, 0.01)))
    except HTTPError as exc:
        if exc.code == 416 and start:
            # Nothing beyond our partial file: it may already be whole; let the caller check.
            exc.close()
            return True
        raise
    except (URLError, TimeoutError):  # no answer before the deadline: say so
        _check_pace(url, start, started, limits)
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
                return _http_download(url, part, timeout, started, limits)
        elif start:
            log.info("%s: server ignored the Range request; downloading from the start", url)
        length = resp.headers.get("Content-Length")
        expected = int(length) if length and length.isdigit() else None
        with part.open(mode) as fh:
            _write_body(resp, fh, expected, url, started, limits)
    return resumed


def _from_mirror(file: RemoteFile, mirror: str, dest_dir: Path, *, timeout: float,
                 attempts: int, limits: Limits | None = None) -> Path:
    """Fetch ``file`` from one mirror into ``dest_dir``; raise on any failure."""
    part = dest_dir / f"{file.name}.part"
    final = dest_dir / file.name
    for path in (part, final):  # a download is written only as a regular file
        check_output_target(path)
    kind = _mirror_kind(mirror)
    where = mirror
    started = time.monotonic()  # the limits' clock: every attempt from this mirror
    for attempt in range(1, attempts + 1):
        resumed = False
        if kind == "http":
            where = _http_url(mirror, file.name)
            try:
                resumed = _http_download(where, part, timeout, started, limits)
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
          attempts: int = 3, limits: Limits | None = None) -> Path:
    """Bring ``file`` into ``dest_dir`` from the first mirror that yields a verified copy.

    Returns the path of the verified file ``dest_dir / file.name``. If that file is
    already present and verifies, no mirror is contacted. ``timeout`` bounds each
    network operation (seconds); ``limits`` (default: :data:`LIMITS`, which ``pflrepro
    prepare`` sets) bound each mirror's transfer as a whole; ``attempts`` is how often
    one HTTP mirror is retried (resuming) after an interrupted transfer. Raises
    :class:`DownloadError` listing every mirror's failure when none succeeds.
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
            return _from_mirror(file, mirror, dest_dir, timeout=timeout, attempts=attempts,
                                limits=limits if limits is not None else LIMITS)
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
