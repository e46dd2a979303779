"""``pflrepro verify``: bit rot with the mtime unchanged is found (issue 27, item 5)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

from pflrepro.cli import main
from pflrepro.data.store import write_dataset
from pflrepro.io import DAMAGED_MTIME, digest_path, write_parquet
from pflrepro.verify import verify


def _results(tmp_path: Path) -> Path:
    results = tmp_path / "results"
    for method in ("fedavg", "local"):
        frame = pd.DataFrame({"value": [0.5], "experiment": ["tiny"], "partition": ["p"],
                              "method": [method], "split_seed": [0], "train_seed": [0]})
        write_parquet(frame, results / f"runs/tiny/p/{method}/split0-seed0.parquet")
    x = np.arange(4 * 16, dtype=np.uint8).reshape(4, 1, 4, 4)
    write_dataset(results / "data/toy", x, np.arange(4) % 2, name="toy", num_classes=2,
                  max_value=255, source="test")
    return results


def _flip_keep_mtime(path: Path) -> None:
    """One flipped bit, the modification time put back (what Snakemake cannot see)."""
    stat = path.stat()
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def test_clean_results_pass(tmp_path: Path, capsys) -> None:
    results = _results(tmp_path)
    assert verify(results) == (3, [])
    assert main(["verify", "--results", str(results)]) == 0
    assert "3 stored file(s) under" in capsys.readouterr().out


def test_bit_rot_is_found_and_marked(tmp_path: Path, capsys) -> None:
    results = _results(tmp_path)
    run = results / "runs/tiny/p/local/split0-seed0.parquet"
    _flip_keep_mtime(run)
    _flip_keep_mtime(results / "data/toy/x.npy")
    assert main(["verify", "--results", str(results)]) == 1
    out = capsys.readouterr().out
    assert f"damaged: {run}: its SHA-256 differs" in out
    assert f"damaged: {results / 'data/toy'}: {results / 'data/toy/x.npy'}: sha256" in out
    assert run.stat().st_mtime == DAMAGED_MTIME  # the next snakemake rebuilds it
    assert not (results / "data/toy/x.npy").exists()  # prepare_data reruns
    assert (results / "data/toy/x.npy.corrupt-1").exists()


def test_swapped_run_is_found(tmp_path: Path) -> None:
    results = _results(tmp_path)
    fedavg = results / "runs/tiny/p/fedavg/split0-seed0.parquet"
    local = results / "runs/tiny/p/local/split0-seed0.parquet"
    local.write_bytes(fedavg.read_bytes())
    digest_path(local).write_bytes(digest_path(fedavg).read_bytes())
    _, findings = verify(results)
    assert [(f.status, f.path) for f in findings] == [("damaged", local)]
    assert "method=fedavg, split=0, seed=0), but its path is that of a run" in findings[0].detail


def test_undigested_files_are_reported_and_adopted_only_on_request(tmp_path: Path) -> None:
    results = _results(tmp_path)
    run = results / "runs/tiny/p/local/split0-seed0.parquet"
    digest_path(run).unlink()
    _, findings = verify(results)
    assert [(f.status, f.path) for f in findings] == [("undigested", run)]
    assert not digest_path(run).exists() and run.stat().st_mtime > DAMAGED_MTIME  # left alone
    _, findings = verify(results, adopt=True)
    assert [(f.status, f.path) for f in findings] == [("adopted", run)]
    assert verify(results) == (3, [])
