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

from pflrepro.data.download.checks import (  # noqa: F401
    ARCHIVE_ERRORS,
    check_file,
    check_readable,
    content_sha256_file,
    tofu_record,
    verify_file,
)
from pflrepro.data.download.extract import safe_extract  # noqa: F401
from pflrepro.data.download.mirrors import fetch, set_limits  # noqa: F401
from pflrepro.data.download.remote import (  # noqa: F401
    ChecksumError,
    DamagedArchiveError,
    DownloadError,
    Limits,
    RemoteFile,
    TooSlowError,
    UnsafeArchiveError,
)
