"""A config's own SHA-256 for raw files (pflrepro.data.checksums)."""

from __future__ import annotations

import pytest

from pflrepro.data.checksums import checksum_args, parse_checksum_args, parse_checksums

SHA = "ab" * 32


def test_parse_keeps_known_files_lowercased() -> None:
    out = parse_checksums({"cifar10": {"cifar-10-binary.tar.gz": SHA.upper()}})
    assert out == {"cifar10": {"cifar-10-binary.tar.gz": SHA}}


@pytest.mark.parametrize(("section", "message"), [
    ({"nope": {}}, "unknown data set"),
    ({"cifar10": ["x"]}, "must map file names"),
    ({"cifar10": {"other.tar.gz": SHA}}, "not one of cifar10's files"),
    ({"cifar10": {"cifar-10-binary.tar.gz": "abc"}}, "64 hex digits"),
])
def test_bad_entries_name_their_key(section: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_checksums(section)


def test_arguments_round_trip() -> None:
    sums = {"b.gz": SHA, "a.gz": "cd" * 32}
    words = checksum_args(sums)
    assert words == ["--checksum", f"a.gz={'cd' * 32}", "--checksum", f"b.gz={SHA}"]
    assert parse_checksum_args(words[1::2]) == sums
    with pytest.raises(ValueError, match="FILE=SHA256"):
        parse_checksum_args(["a.gz"])
