"""A config's own SHA-256 for a data set's raw files (``data.checksums``).

A user whose copy of a data set differs from the official archive (a re-packed mirror,
a site's own build) or a test serving generated archives names each file's SHA-256
here; :func:`pflrepro.data.datasets.with_checksums` then verifies the fetched file
against that hash instead of the built-in one, as strictly.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pflrepro.data.datasets import DATASETS

#: A SHA-256 in hex, as the config and ``pflrepro prepare --checksum`` take it.
SHA256_PATTERN = r"^[0-9a-fA-F]{64}$"


def parse_checksums(section: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """``data.checksums``: data set -> {file name -> SHA-256}; ValueError names the key."""
    out: dict[str, dict[str, str]] = {}
    for dataset, files in (section or {}).items():
        where = f"data.checksums.{dataset}"
        if dataset not in DATASETS:
            raise ValueError(f"{where}: unknown data set; known: {sorted(DATASETS)}")
        if not isinstance(files, Mapping):
            raise ValueError(f"{where}: must map file names to SHA-256 hashes")
        known = [f.name for f in DATASETS[dataset].files]
        for name, digest in files.items():
            if name not in known:
                raise ValueError(f"{where}.{name}: not one of {dataset}'s files {known}")
            if not isinstance(digest, str) or not re.match(SHA256_PATTERN, digest):
                raise ValueError(f"{where}.{name}: a SHA-256 is 64 hex digits, got {digest!r}")
        out[dataset] = {str(name): str(digest).lower() for name, digest in files.items()}
    return out


def checksum_args(checksums: Mapping[str, str]) -> list[str]:
    """``--checksum NAME=SHA256`` words of ``pflrepro prepare`` for one data set's files."""
    return [word for name, digest in sorted(checksums.items())
            for word in ("--checksum", f"{name}={digest}")]


def parse_checksum_args(words: list[str] | None) -> dict[str, str]:
    """``NAME=SHA256`` words (``pflrepro prepare --checksum``) as a mapping."""
    out: dict[str, str] = {}
    for word in words or ():
        name, sep, digest = word.partition("=")
        if not sep or not re.match(SHA256_PATTERN, digest):
            raise ValueError(f"--checksum {word!r}: expected FILE=SHA256 (64 hex digits)")
        out[name] = digest.lower()
    return out
