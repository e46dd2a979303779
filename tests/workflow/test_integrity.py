"""A damaged partition under ``--keep-going`` (issue 27, item 8).

The job that found the partition damaged renamed it away, so the next job declaring
it as input failed in Snakemake's own input check ("Missing files after 5 seconds"),
which aborts the whole scheduler: no ``onerror``, no partial table. Now the damaged
file stays, dated 1970 (1 s): every job reading it fails naming it, the others finish, the
partial table is written, and the next Snakemake rebuilds the partition.

Tier ``workflow_full`` (``pytest -m workflow_full``; ``.ci/run`` runs it, plain ``pytest``
deselects it): this file builds tiny projects of its own.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from _wf import TINY, new_workdir, planned_jobs, snakemake

from pflrepro.store.io import DAMAGED_MTIME

pytestmark = [pytest.mark.workflow, pytest.mark.workflow_full]


def test_damaged_partition_under_keep_going_leaves_a_partial_table(tmp_path: Path) -> None:
    config = yaml.safe_load(TINY.read_text())
    tiny = config["experiments"]["tiny"]
    config["methods"] = {m: config["methods"][m] for m in ("local", "fedavg")}
    tiny.update(methods=["local", "fedavg"], train_seeds=[0])
    tiny.pop("public")
    work = new_workdir(tmp_path / "wf", config)
    snakemake(work)
    partition = sorted((work / "results/partitions/digits").rglob("split0.parquet"))[0]
    data = bytearray(partition.read_bytes())
    data[len(data) // 3] ^= 0x01
    partition.write_bytes(bytes(data))  # newer than the runs: its readers rerun
    proc = snakemake(work, "--keep-going", check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert "Missing files after" not in out, out
    assert f"{partition.relative_to(work)} is damaged" in out, out
    md = (work / "results/partial/tiny.md").read_text()
    assert "PARTIAL: tiny, 2 of 4 runs" in md, md
    assert partition.stat().st_mtime == DAMAGED_MTIME
    assert partition.with_name("split0.parquet.corrupt-1").read_bytes() == bytes(data)
    rebuilt = {(rule, wc.get("partition")) for rule, wc in planned_jobs(snakemake(work, "-n"))}
    assert ("partition", partition.parent.name) in rebuilt, rebuilt
    # the successful rerun removes the partial table it made stale (it stayed, unrecorded)
    done = snakemake(work)
    assert not (work / "results/partial/tiny.md").exists()
    assert not (work / "results/partial/tiny.csv").exists()
    assert "removed the partial table results/partial/tiny.md" in done.stdout + done.stderr


# A damaged x.npy / meta.json was set aside (or x.npy removed) with "rerun snakemake",
# then snakemake said "Nothing to be done": nothing needed the missing array, so
# prepare_data never ran and the damaged set stayed; a deleted meta.json was not found.
def _damage_keep_mtime(data: Path, damage: str) -> None:
    import os

    if damage == "deleted_meta":
        (data / "meta.json").unlink()
        return
    if damage == "flip_x":
        path = data / "x.npy"
        raw = bytearray(path.read_bytes())
        raw[-1] ^= 0x01
    elif damage == "garbage_meta":
        path, raw = data / "meta.json", bytearray(os.urandom(64))
    else:  # the campaign's edit: mean 0.9, std 0.0376
        path = data / "meta.json"
        text = path.read_text()
        raw = bytearray((text[:text.index('"mean"')] + '"mean": [0.9], "std": [0.0376], '
                         + text[text.index('"max_value"'):]).encode())
    stat = path.stat()
    path.write_bytes(bytes(raw))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def test_damaged_prepared_data_is_prepared_again(tmp_path: Path) -> None:
    from pflrepro.inspect.verify import verify

    work = new_workdir(tmp_path / "wf")
    snakemake(work, "--until", "partition")
    data = work / "results/data/digits"
    for damage in ("flip_x", "garbage_meta", "edited_meta_stats", "deleted_meta"):
        _damage_keep_mtime(data, damage)
        _, findings = verify(work / "results")
        assert [f.path for f in findings] == [data], (damage, findings)
        dry = snakemake(work, "-n", "--until", "partition")
        planned = {rule for rule, _ in planned_jobs(dry)}
        assert {"prepare_data", "partition"} <= planned, (damage, planned)
        snakemake(work, "--until", "partition")
        assert verify(work / "results")[1] == [], damage
