"""Run and aggregate tables read back through their digests (issue 17, item 4)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pflrepro.store.io import DAMAGED_MTIME, CorruptFileError, digest_path, write_parquet
from pflrepro.store.results import CONFIG_COLUMNS, aggregate, read_table


def _run(path: Path, seed: int) -> Path:
    """A small table with a run's columns."""
    n = 200
    frame = pd.DataFrame({
        "round": np.repeat(np.arange(n // 2, dtype=np.int32), 2),
        "client": np.tile(np.arange(2, dtype=np.int32), n // 2),
        "peer": np.full(n, -1, dtype=np.int32),
        "metric": pd.array(["test_accuracy"] * n, dtype="string"),
        "value": np.random.default_rng(seed).random(n),
    })
    for col in CONFIG_COLUMNS:
        frame[col] = (np.int64(seed) if col.endswith("_seed")
                      else pd.array([col] * n, dtype="string"))
    write_parquet(frame, path)
    return path


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 3] ^= 0x01
    path.write_bytes(bytes(data))


#: Where the workflow keeps _run's runs (damaged files there are marked for rebuilding).
RUNS = "results/runs/experiment/partition/method"


def test_aggregate_names_and_sets_aside_every_damaged_run(tmp_path: Path) -> None:
    runs = [_run(tmp_path / RUNS / f"split{i}-seed{i}.parquet", i) for i in range(3)]
    _truncate(runs[0])
    _flip(runs[2])
    out = tmp_path / "agg.parquet"
    with pytest.raises(ValueError) as info:
        aggregate(runs, out)
    text = str(info.value)
    assert "2 of 3 input(s) damaged" in text
    for damaged in (runs[0], runs[2]):
        assert f"{damaged} is damaged" in text
        assert damaged.stat().st_mtime == DAMAGED_MTIME  # stays in place, rebuilt by snakemake
        assert damaged.with_name(damaged.name + ".corrupt-1").exists()
    assert "rerun snakemake" in text
    assert runs[1].exists() and not out.exists()
    # rebuilt (what the next `snakemake` does), aggregation goes through
    for i in (0, 2):
        _run(runs[i], i)
    assert aggregate(runs, out) == 600
    assert digest_path(out).exists()


def test_read_table_checks_the_aggregate(tmp_path: Path) -> None:
    runs = [_run(tmp_path / RUNS / f"split{i}-seed{i}.parquet", i) for i in range(2)]
    out = tmp_path / "results/aggregate/experiment/method.parquet"
    aggregate(runs, out)
    expected = pd.concat([pd.read_parquet(r) for r in runs], ignore_index=True)
    pd.testing.assert_frame_equal(read_table(out), expected)
    _flip(out)
    with pytest.raises(CorruptFileError, match=rf"^{out} is damaged: its SHA-256 differs"):
        read_table(out)
    assert out.stat().st_mtime == DAMAGED_MTIME and digest_path(out).exists()


def test_aggregates_say_what_they_are_and_a_swapped_one_is_named(tmp_path: Path) -> None:
    # issue 27, item 7: an experiment aggregate replaced by a method aggregate was read
    import shutil

    import pyarrow.parquet as pq

    from pflrepro.store.io import KIND_KEY, stored_identity

    root = tmp_path / "results/aggregate"
    runs = [_run(tmp_path / f"r{i}.parquet", i) for i in range(2)]
    method_agg = root / "experiment/method.parquet"
    aggregate(runs, method_agg)
    assert stored_identity(method_agg) == {"kind": "method_aggregate",
                                           "experiment": "experiment", "method": "method"}
    experiment_agg = root / "experiment.parquet"
    aggregate([method_agg], experiment_agg)
    assert stored_identity(experiment_agg) == {"kind": "experiment_aggregate",
                                               "experiment": "experiment"}
    assert KIND_KEY in pq.read_schema(experiment_agg).metadata
    assert len(read_table(experiment_agg)) == 400
    first = experiment_agg.read_bytes()
    aggregate([method_agg], experiment_agg)
    assert experiment_agg.read_bytes() == first  # deterministic bytes
    shutil.copy(method_agg, experiment_agg)
    shutil.copy(digest_path(method_agg), digest_path(experiment_agg))
    digest_path(experiment_agg).write_text(
        digest_path(method_agg).read_text().replace("method.parquet", "experiment.parquet"))
    with pytest.raises(CorruptFileError) as info:
        read_table(experiment_agg)
    assert str(info.value).startswith(
        f"{experiment_agg} is damaged: it holds a method aggregate (experiment=experiment, "
        "method=method), but its path is that of an experiment aggregate "
        "(experiment=experiment)")
