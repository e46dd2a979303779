"""The paper-scale grid of config.yaml, every experiment, run end to end on a smoke overlay.

``config/paper_smoke.yaml`` (written by ``_paper_smoke.py`` from config.yaml) shrinks the
rounds, seeds and images; the data sets other than Fashion-MNIST (Debian's real copy)
are generated archives in their real formats, served over loopback HTTP as a
``data.mirrors`` entry with their own ``data.checksums``, so download, checksum,
extraction and preparation run as for a user. The outputs are smoke-test output on
generated data, never results. Tier ``paper_smoke``: ``pytest -m paper_smoke``.
"""

from __future__ import annotations

import os
import resource
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml
from _paper_smoke import (
    MARK,
    OVERLAY,
    merge,
    mirrors_overlay,
    paper_experiments,
    serve,
    write_archives,
)
from _wf import REPO, new_workdir, snakemake

FASHION = Path("/usr/share/datasets/fashion-mnist")

pytestmark = [
    pytest.mark.workflow,
    pytest.mark.paper_smoke,
    pytest.mark.skipif(not FASHION.is_dir(), reason="needs Debian's dataset-fashion-mnist"),
]

RAW = yaml.safe_load((REPO / "config.yaml").read_text())
EXPERIMENTS = sorted(paper_experiments(RAW))


def available_mb() -> int:
    """The machine's available memory (MB): the cap on the mem_mb its jobs declare at once."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) // 1024
    raise RuntimeError("/proc/meminfo has no MemAvailable line")


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("paper_smoke")
    work = new_workdir(root / "run", RAW)
    sums = write_archives(root / "archives")
    args = ("--configfile", str(work / "config.yaml"), str(work / "config" / OVERLAY.name),
            str(work / "mirrors.yaml"))
    with serve(root / "archives") as url:
        (work / "mirrors.yaml").write_text(yaml.safe_dump(mirrors_overlay(url, sums)))
        start = time.monotonic()
        snakemake(work, *args, "--keep-going", "--resources", f"mem_mb={available_mb()}",
                  configfile=False, timeout=4 * 3600)
        wall = time.monotonic() - start
        snakemake(work, *args, "--report", str(work / "report.zip"), configfile=False,
                  timeout=1800)
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"\npaper smoke: {wall:.0f} s wall, largest job's peak RSS {peak:.0f} MiB")
    return work


def rule_all(work: Path) -> list[str]:
    """The inputs of the smoke grid's ``rule all`` (common.smk's all_targets)."""
    import pflrepro.pipeline.workflow as W
    import pflrepro.reporting.flops as FL
    from pflrepro.config import parse
    from pflrepro.reporting.claims.parse import load_claims
    from pflrepro.reporting.paper import load_paper_numbers

    cfg = parse(merge(merge(RAW, yaml.safe_load(OVERLAY.read_text())),
                      yaml.safe_load((work / "mirrors.yaml").read_text())))
    claims = load_claims(work / W.CLAIMS_FILE)
    cells = load_paper_numbers(work / W.PAPER_NUMBERS_FILE)
    return (W.all_targets(cfg, claims) + W.report_targets(cfg, claims, cells)
            + W.tune_targets(cfg) + FL.projection_targets(cfg))


def test_every_output_of_the_paper_scale_rule_all_exists_and_is_not_empty(smoke: Path) -> None:
    targets = rule_all(smoke)
    assert len(targets) > 500
    empty = [t for t in targets if not (smoke / t).is_file() or os.path.getsize(smoke / t) == 0]
    assert not empty, empty[:20]
    assert (smoke / "report.zip").stat().st_size > 0


def test_every_paper_experiment_is_in_the_smoke_grid(smoke: Path) -> None:
    targets = rule_all(smoke)
    for name in EXPERIMENTS:
        assert f"results/tables/{name}.md" in targets, name


def test_tables_and_claims_name_every_experiment(smoke: Path) -> None:
    from pflrepro.reporting.claims.parse import claim_experiments, load_claims

    tables = "\n".join(p.read_text() for p in (smoke / "results/tables").glob("*.csv"))
    for name in EXPERIMENTS:
        assert name in tables, name
    claims = (smoke / "results/tables/claims.csv").read_text()
    claimed = set(claim_experiments(load_claims(smoke / "config/claims.yaml"), "paper"))
    assert claimed & set(EXPERIMENTS)
    for name in claimed & set(EXPERIMENTS):
        assert name in claims, name


def test_the_projection_is_built(smoke: Path) -> None:
    table = pd.read_csv(smoke / "results/tables/paper-grid-projection.csv")
    assert set(EXPERIMENTS) <= set(table["experiment"].dropna())
    assert (table["gpu_hours"] > 0).all()


def test_no_table_presents_the_smoke_run_as_a_result(smoke: Path) -> None:
    for name in EXPERIMENTS:
        assert MARK in (smoke / f"results/tables/{name}.md").read_text(), name
