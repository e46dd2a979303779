"""The data commands of pflrepro.cli.data: prepare (with --checksum)."""

from __future__ import annotations

from pathlib import Path

from _source_helpers import tiny_mnist_mirror

from pflrepro.cli import main


def test_prepare_takes_the_checksums_of_a_copy(tmp_path: Path) -> None:
    sums = tiny_mnist_mirror(tmp_path / "mirror")
    base = ["prepare", "--dataset", "mnist", "--raw", str(tmp_path / "raw"),
            "--mirror", str(tmp_path / "mirror")]
    assert main([*base, "--out", str(tmp_path / "refused")]) == 1  # the official hashes
    words = [w for name, sha in sums.items() for w in ("--checksum", f"{name}={sha}")]
    assert main([*base, "--out", str(tmp_path / "out"), *words]) == 0
    assert (tmp_path / "out" / "meta.json").is_file()
