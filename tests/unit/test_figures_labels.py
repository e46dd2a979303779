"""Label-distribution figure: counts by hand, the files, fit, bad input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from _figure_helpers import assert_figure_files, check_fits

from pflrepro.reporting.figures.labels import label_counts, nice, plot_label_distribution


def partition_frame() -> tuple[pd.DataFrame, np.ndarray]:
    """3 clients over 12 samples of 3 classes; client 2 holds only class 2."""
    labels = np.array([0, 0, 1, 1, 1, 2, 2, 2, 2, 0, 1, 2])
    frame = pd.DataFrame({
        "client": np.array([0, 0, 0, 1, 1, 1, 2, 2, 2, 2], dtype=np.int32),
        "index": np.array([0, 1, 2, 3, 4, 9, 5, 6, 7, 8], dtype=np.int64),
        "split": pd.array(["train", "test"] * 5, dtype="string"),
        "group": np.array([0, 0, 0, 0, 0, 0, 1, 1, 1, 1], dtype=np.int32),
    })
    return frame, labels


def big_partition(clients: int, classes: int, groups: int) -> tuple[pd.DataFrame, np.ndarray]:
    """``clients`` clients holding 20 samples each of ``classes`` classes, in ``groups``."""
    rng = np.random.default_rng(0)
    labels = rng.integers(0, classes, clients * 20)
    frame = pd.DataFrame({"client": np.repeat(np.arange(clients), 20),
                          "index": np.arange(clients * 20),
                          "group": np.repeat(np.arange(clients) % groups, 20)})
    return frame, labels


def test_label_counts_by_hand() -> None:
    frame, labels = partition_frame()
    counts = label_counts(frame, labels, 4)
    assert counts.tolist() == [[2, 1, 0, 0], [1, 2, 0, 0], [0, 0, 4, 0]]


def test_nice_rounds_down_to_1_2_5() -> None:
    assert [nice(v) for v in (0.3, 1, 3, 7, 19, 20, 480)] == [1, 1, 2, 5, 10, 20, 200]


def test_plot_label_distribution(tmp_path: Path) -> None:
    frame, labels = partition_frame()
    pdf, png = tmp_path / "l.pdf", tmp_path / "l.png"
    plot_label_distribution(frame, labels, 3, pdf, png)
    assert_figure_files(pdf, png)
    plot_label_distribution(frame.drop(columns="group"), labels, 3, pdf, png, title="t")
    assert_figure_files(pdf, png)


@pytest.mark.parametrize(("clients", "classes", "groups"), [(3, 3, 1), (60, 30, 12)])
def test_fits_few_and_many_clients(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   clients: int, classes: int, groups: int) -> None:
    frame, labels = big_partition(clients, classes, groups)
    check_fits(monkeypatch, tmp_path, lambda pdf, png: plot_label_distribution(
        frame, labels, classes, pdf, png, title="a long title: " + "x" * 60))


def test_plot_label_distribution_errors(tmp_path: Path) -> None:
    frame, labels = partition_frame()
    paths = (tmp_path / "l.pdf", tmp_path / "l.png")
    with pytest.raises(ValueError, match="outside"):
        plot_label_distribution(frame, labels, 2, *paths)
    with pytest.raises(ValueError, match="indices"):
        plot_label_distribution(frame, labels[:5], 3, *paths)
    with pytest.raises(ValueError, match="lacks column"):
        plot_label_distribution(frame.drop(columns="index"), labels, 3, *paths)
    with pytest.raises(ValueError, match="empty"):
        plot_label_distribution(frame.iloc[:0], labels, 3, *paths)
    assert not any(p.exists() for p in paths)
