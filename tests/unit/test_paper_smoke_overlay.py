"""The paper-scale smoke tier's overlay and generated archives (tests/workflow/_paper_smoke.py).

The overlay must shrink the paper grid without changing its design, and every generated
archive must prepare, through a loopback mirror and its own checksum, to the data set's
real class count and image shape.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from _paper_smoke import (
    FEDDF_BUDGET,
    MARK,
    OVERLAY,
    SMOKE_KEYS,
    merge,
    mirrors_overlay,
    overlay,
    overlay_text,
    paper_experiments,
    serve,
    write_archives,
)

from pflrepro.config import parse
from pflrepro.data.datasets import prepare_dataset

REPO = Path(__file__).resolve().parents[2]
RAW = yaml.safe_load((REPO / "config.yaml").read_text())
#: What each generated data set must prepare to: classes and image shape (C, H, W).
REAL = {"mnist": (10, (1, 28, 28)), "emnist": (47, (1, 28, 28)), "cifar10": (10, (3, 32, 32)),
        "cifar100": (100, (3, 32, 32)), "femnist": (62, (1, 28, 28)),
        "officehome": (65, (3, 32, 32))}


def test_the_committed_overlay_is_generated_from_config_yaml() -> None:
    assert OVERLAY.read_text() == overlay_text(RAW), \
        "config/paper_smoke.yaml is stale: run python tests/workflow/_paper_smoke.py"


def _without(mapping: dict, *keys: str) -> dict:
    return {k: v for k, v in mapping.items() if k not in keys}


def test_the_overlay_keeps_every_experiment_and_its_design() -> None:
    merged = merge(RAW, overlay(RAW))
    paper = paper_experiments(RAW)
    assert set(paper_experiments(merged)) == set(paper)
    for name, exp in paper.items():
        new = merged["experiments"][name]
        assert _without(new, *SMOKE_KEYS) == _without(exp, *SMOKE_KEYS), name
        # labels included: config/paper_numbers.csv names partitions by label
        assert [_without(p, "max_samples") for p in new["partitions"]] == \
            [_without(p, "max_samples") for p in exp["partitions"]], name
        assert MARK in new["label"] and MARK in new["description"], name
        assert _without(new["training"], "rounds") == _without(exp.get("training", {}),
                                                               "rounds"), name
        assert new["training"]["rounds"] <= 2
        assert len(new["split_seeds"]) == len(new["train_seeds"]) == 1
        if "tune" in exp:
            assert _without(new["tune"], "rounds") == _without(exp["tune"], "rounds"), name
            assert new["tune"]["rounds"] == 1
        if "public" in exp:
            assert new["public"]["dataset"] == exp["public"]["dataset"]
    for name, method in RAW["methods"].items():
        changed = set(FEDDF_BUDGET) if method["algorithm"] == "feddf" else set()
        assert _without(merged["methods"][name], *changed) == _without(method, *changed)
    parse(merged)  # a valid config


@pytest.mark.paper_smoke  # a minute: every archive generated and prepared
def test_generated_archives_prepare_over_loopback_to_the_real_classes_and_shape(
        tmp_path: Path) -> None:
    sums = write_archives(tmp_path / "archives")
    assert set(sums) == set(REAL)
    with serve(tmp_path / "archives") as url:
        data = mirrors_overlay(url, sums)["data"]
        for name, (classes, shape) in REAL.items():
            meta = prepare_dataset(name, tmp_path / "out" / name, tmp_path / "raw" / name,
                                   data["mirrors"][name], data["checksums"].get(name))
            assert meta.num_classes == classes, name
            assert tuple(meta.shape) == shape, name
            assert meta.size >= 2 * classes, name


def test_a_mirror_with_other_bytes_than_the_overlays_checksum_is_refused(
        tmp_path: Path) -> None:
    sums = write_archives(tmp_path / "archives", only=("mnist",))
    with serve(tmp_path / "archives") as url:
        wrong = {name: "0" * 64 for name in sums["mnist"]}
        with pytest.raises(Exception, match="checksum|sha256|SHA-256"):
            prepare_dataset("mnist", tmp_path / "out", tmp_path / "raw", [f"{url}mnist/"],
                            wrong)


def test_every_paper_table_caption_carries_the_mark() -> None:
    merged = merge(RAW, overlay(RAW))
    paper = set(paper_experiments(RAW))
    for name, table in merged["tables"].items():
        if set(table["experiments"]) <= paper:
            assert MARK in table["caption"], name
