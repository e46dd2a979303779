"""store.damage: Snakemake's unreadable records moved out of its way."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from pflrepro.store.damage import DAMAGED_RECORDS, set_aside_unreadable_records

SNAKEFILE = """
import sys
from pflrepro.store.damage import set_aside_unreadable_records
for moved in set_aside_unreadable_records("."):
    print(f"moved {moved}", file=sys.stderr)
rule all:
    input: "b.txt"
rule a:
    output: "a.txt"
    shell: "echo a > {output}"
rule b:
    input: "a.txt"
    output: "b.txt"
    shell: "cat {input} > {output}"
"""


def _snakemake(work: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "snakemake", "-c1", "--snakefile",
                           str(work / "Snakefile")], cwd=work, capture_output=True, text=True,
                          timeout=120, check=False)


def test_records_that_are_no_json_are_moved_and_named(tmp_path: Path) -> None:
    metadata = tmp_path / ".snakemake" / "metadata"
    (metadata / "@deep").mkdir(parents=True)
    (metadata / "good").write_text('{"rule": "a"}')
    (metadata / "@deep" / "binary").write_bytes(b"\xcf\x80\x00garbage")
    (metadata / "list").write_text("[1, 2]")
    moved = set_aside_unreadable_records(tmp_path)
    assert sorted(p.relative_to(tmp_path / DAMAGED_RECORDS).as_posix() for p in moved) == [
        "@deep/binary", "list"]
    assert (metadata / "good").exists() and not (metadata / "list").exists()
    assert (tmp_path / DAMAGED_RECORDS / "@deep" / "binary").read_bytes().endswith(b"garbage")
    assert set_aside_unreadable_records(tmp_path) == []  # nothing left to move


def test_snakemake_runs_again_after_a_garbled_record(tmp_path: Path) -> None:
    # binary garbage in .snakemake/metadata failed every run with a traceback naming no file
    (tmp_path / "Snakefile").write_text(SNAKEFILE)
    assert _snakemake(tmp_path).returncode == 0
    records = sorted((tmp_path / ".snakemake" / "metadata").iterdir())
    assert len(records) == 2
    records[0].write_bytes(bytes(range(200, 256)))
    (tmp_path / "a.txt").touch()
    again = _snakemake(tmp_path)
    assert again.returncode == 0, again.stderr
    assert f"moved {DAMAGED_RECORDS / records[0].name}" in again.stderr
