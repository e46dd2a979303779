"""The light CLI commands, the config check and a workflow parse import no torch
(seconds per job); the algorithm registry reads the methods' declarations from their
source (tests/unit/test_declarations.py).

Each check runs in a fresh interpreter and looks at ``sys.modules`` afterwards, so an
import of torch anywhere on the path (the algorithm registry, seeding, the data
schemes) fails it.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pflrepro.algorithms import ALGORITHMS, get_algorithm
from pflrepro.store.io import write_parquet
from pflrepro.store.results import MetricLog, aggregate

REPO = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "sklearn", "matplotlib")


def _loaded_after(code: str, tmp_path: Path) -> list[str]:
    """Run ``code`` in a fresh Python; the heavy modules it left in ``sys.modules``."""
    script = textwrap.dedent(code) + textwrap.dedent(f"""
        import sys
        print(",".join(m for m in {HEAVY!r} if m in sys.modules))
    """)
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True,
                          text=True, check=False, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    last = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    return [m for m in last.split(",") if m]


def test_config_and_workflow_import_no_torch(tmp_path: Path) -> None:
    assert _loaded_after("import pflrepro.config, pflrepro.pipeline.workflow, "
                         "pflrepro.config.schema",
                         tmp_path) == []


def test_workflow_parse_of_the_paper_grid_imports_no_torch(tmp_path: Path) -> None:
    """What common.smk does for every job of config.yaml: parse, targets, run specs."""
    code = f"""
        import yaml
        from types import SimpleNamespace
        import pflrepro.config as C
        import pflrepro.pipeline.workflow as W

        cfg = C.parse(yaml.safe_load(open({str(REPO / "config.yaml")!r})))
        assert W.all_targets(cfg)
        for name in cfg.experiments:
            for key in cfg.runs(name):
                W.run_spec_json(cfg, SimpleNamespace(**vars(key)))
        for dataset, partition, split in cfg.partitions():
            W.partition_code(cfg, SimpleNamespace(dataset=dataset, partition=partition))
    """
    assert _loaded_after(code, tmp_path) == []


@pytest.mark.parametrize("config", ["config.yaml", "config/demo.yaml"])
def test_check_config_imports_no_torch(config: str) -> None:
    """``pflrepro check-config`` as a user runs it; ``-X importtime`` lists every import."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "pflrepro", "check-config",
                           config], cwd=REPO, capture_output=True, text=True, check=False,
                          timeout=300)
    assert proc.returncode == 0 and ": valid (" in proc.stdout, proc.stderr[-3000:]
    imported = [line.rpartition("|")[2].strip() for line in proc.stderr.splitlines()
                if line.startswith("import time:")]
    assert "pflrepro.config.schema" in imported  # the listing is there to be read
    assert [m for m in imported if m.split(".")[0] in HEAVY] == []


def _run_table(path: Path, seed: int) -> Path:
    log = MetricLog()
    log.add_per_client(0, "n_test", [10, 20])
    for rnd in range(3):
        log.add_per_client(rnd, "test_accuracy", np.random.default_rng(seed + rnd).random(2))
    log.add_matrix(1, "weight", np.eye(2))
    config = {"experiment": "e", "dataset": "digits", "partition": f"p{seed}",
              "method": "fedavg", "algorithm": "fedavg", "params": "[]", "split_seed": 0,
              "train_seed": seed, "client_training": "loop", "package_version": "0",
              "git_revision": "abc"}
    write_parquet(log.to_frame(config), path)  # with its digest record (issue 27, item 3)
    return path


def test_cli_aggregate_imports_no_torch(tmp_path: Path) -> None:
    runs = [_run_table(tmp_path / f"r{i}.parquet", i) for i in range(2)]
    code = f"""
        from pflrepro.cli import main
        assert main(["aggregate", "--out", "agg.parquet", *{[str(r) for r in runs]!r}]) == 0
    """
    assert _loaded_after(code, tmp_path) == []
    assert (tmp_path / "agg.parquet").is_file()


def test_aggregate_keeps_rows_order_and_dtypes(tmp_path: Path) -> None:
    runs = [_run_table(tmp_path / f"r{i}.parquet", i) for i in range(3)]
    expected = pd.concat([pd.read_parquet(r) for r in runs], ignore_index=True)
    out = tmp_path / "a" / "agg.parquet"
    assert aggregate(runs, out) == len(expected)
    pd.testing.assert_frame_equal(pd.read_parquet(out), expected)
    # the second stage: aggregates of aggregates, same table, same bytes every time
    twice = tmp_path / "twice.parquet"
    assert aggregate([out, out], twice) == 2 * len(expected)
    pd.testing.assert_frame_equal(pd.read_parquet(twice),
                                  pd.concat([expected, expected], ignore_index=True))
    again = tmp_path / "again.parquet"
    aggregate([out, out], again)
    assert again.read_bytes() == twice.read_bytes()
    with pytest.raises(ValueError, match="no input"):
        aggregate([], tmp_path / "none.parquet")
    assert not (tmp_path / "none.parquet").exists()


def test_training_imports_the_algorithm_and_torch(tmp_path: Path) -> None:
    assert "torch" in _loaded_after("""
        from pflrepro.algorithms import get_algorithm
        get_algorithm("fedavg")
    """, tmp_path)


def test_unknown_algorithm() -> None:
    with pytest.raises(ValueError, match="unknown algorithm"):
        get_algorithm("nope")
    with pytest.raises(KeyError):
        ALGORITHMS["nope"]


def test_code_digest_follows_algorithm_imports_without_importing() -> None:
    from pflrepro.config.codedigest import _algorithm_files, code_digest

    names = [p.name for p in _algorithm_files("pflrepro.algorithms.fedprox_ft")]
    assert names[0] == "fedprox_ft.py"
    assert set(names) == {"fedprox_ft.py", "fedavg_plus.py", "fedprox.py", "fedavg.py"}
    assert [p.name for p in _algorithm_files("pflrepro.algorithms.local")] == ["local.py"]
    assert code_digest("fedprox_ft") != code_digest("fedprox")
