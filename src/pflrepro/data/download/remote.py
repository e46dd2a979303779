"""A file to fetch (name, size, checksums) and the errors of fetching and extracting."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

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


@dataclass(frozen=True)
class Limits:
    """How long one file's transfer may take: an overall deadline and a minimum rate.

    A server that trickles bytes keeps every read inside the socket timeout; these
    bound the transfer as a whole. The rate is judged over the transfer so far, once
    ``grace_s`` seconds have passed (a slow start is no stall). Set them in the config's
    ``data: download:`` (``pflrepro prepare --deadline --min-rate``).
    """

    #: Seconds one file may take from one mirror, its retries and resumes included (6 h).
    deadline_s: float = 6 * 3600.0
    #: Bytes per second below which a transfer is given up (1 KiB/s).
    min_rate: float = 1024.0
    #: Seconds before the rate is judged.
    grace_s: float = 60.0

    def __post_init__(self) -> None:
        for label, value in (("deadline", self.deadline_s), ("minimum rate", self.min_rate),
                             ("grace", self.grace_s)):
            if not value >= 0 or value == float("inf"):
                raise ValueError(f"download {label} must be a finite number >= 0, got {value}")


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


class TooSlowError(DownloadError):
    """A transfer that passed its deadline or fell below the minimum rate (not retried)."""


class _Incomplete(DownloadError):
    """The connection ended before the whole body arrived; the ``.part`` is kept."""


def _is_hex(text: str) -> bool:
    return all(c in "0123456789abcdefABCDEF" for c in text)
