"""Synthetic run tables for the figure tests, and checks of the figures they draw."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any
from unittest import mock

import matplotlib
import matplotlib.text
import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from pflrepro.reporting.figures import common
from pflrepro.reporting.names import method_name
from pflrepro.store.results import (
    CONFIG_COLUMNS,
    GROUP,
    MODEL_DISTANCE,
    N_TEST,
    TEST_ACCURACY,
    WEIGHT,
    MetricLog,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
#: A long partition id, as the real ones are.
LONG_PARTITION = "label_groups-clients{clients}-test_fraction0.2-max_samples0-groups2-alpha0.0-{k}"


def make_run(
    accuracies: Mapping[int, Sequence[float]],
    n_test: Sequence[int],
    *,
    method: str = "federico",
    partition: str = "label_groups-clients3-groups2",
    split_seed: int = 0,
    groups: Sequence[int] | None = None,
    weights: Mapping[int, np.ndarray] | None = None,
    per_client: Mapping[str, Mapping[int, Sequence[float]]] | None = None,
    matrices: Mapping[str, Mapping[int, np.ndarray]] | None = None,
) -> pd.DataFrame:
    """One synthetic run table (same shape as the helper in _table_helpers.py).

    ``per_client`` and ``matrices`` add further metrics: name -> round -> values.
    """
    log = MetricLog()
    log.add_per_client(0, N_TEST, n_test)
    log.add_per_client(0, GROUP, groups if groups is not None else [-1] * len(n_test))
    for round_, accs in accuracies.items():
        log.add_per_client(round_, TEST_ACCURACY, accs)
    for round_, matrix in (weights or {}).items():
        log.add_matrix(round_, WEIGHT, matrix)
    for metric, rounds in (per_client or {}).items():
        for round_, values in rounds.items():
            log.add_per_client(round_, metric, values)
    for metric, rounds in (matrices or {}).items():
        for round_, matrix in rounds.items():
            log.add_matrix(round_, metric, matrix)
    config: dict[str, Any] = {
        "experiment": "fig3", "dataset": "cifar10", "partition": partition, "method": method,
        "algorithm": method, "params": "default", "split_seed": split_seed, "train_seed": 0,
        "client_training": "loop", "package_version": "0.1.0", "git_revision": "abc",
    }
    config.update({c: "default" for c in CONFIG_COLUMNS if c not in config})
    return log.to_frame(config)


def assert_figure_files(pdf: Path, png: Path) -> None:
    """Both files are real, non-trivial PDF/PNG files and no temporary file is left."""
    assert pdf.stat().st_size > 1000 and pdf.read_bytes().startswith(b"%PDF")
    assert png.stat().st_size > 1000 and png.read_bytes().startswith(PNG_MAGIC)
    assert not list(pdf.parent.glob(".*.tmp")) and not list(png.parent.glob(".*.tmp"))


W_FIRST = np.array([[0.7, 0.3, 0.0], [0.4, 0.6, 0.0], [0.0, 0.0, 1.0]])


def weights_aggregate() -> pd.DataFrame:
    """federico on two partitions (3 clients), two seeds each; fedavg without weights."""
    runs = []
    for part in ("label_groups-clients3-groups2", "label_groups-clients3-groups1"):
        for seed in (1, 0):
            runs.append(make_run(
                {0: [0.1, 0.2, 0.3], 2: [0.6, 0.7, 0.8]}, n_test=(10, 20, 30),
                partition=part, split_seed=seed, groups=[0, 0, 1],
                weights={0: np.full((3, 3), 1 / 3), 2: W_FIRST if seed == 0 else np.eye(3)}))
        runs.append(make_run({0: [0.1, 0.1, 0.1], 2: [0.5, 0.5, 0.5]}, n_test=(10, 20, 30),
                             method="fedavg", partition=part))
    return pd.concat(runs, ignore_index=True)


def grid_aggregate(partitions: int, methods: Sequence[str], clients: int = 6,
                   rounds: int = 4, seeds: int = 2) -> pd.DataFrame:
    """Every method on ``partitions`` long-named partitions, with every metric a figure draws.

    Clients fall in two distributions; each run logs accuracy, weights, model distances
    and cluster ids (client ``i`` in cluster ``i % 3`` after round 1) every round.
    """
    rng = np.random.default_rng(0)
    groups = [i % 2 for i in range(clients)]
    runs = []
    for p in range(partitions):
        for method in methods:
            for seed in range(seeds):
                w = {r: rng.dirichlet(np.ones(clients), size=clients) for r in range(rounds)}
                d = {r: np.abs(rng.normal(1.0, 0.3, (clients, clients))) for r in range(rounds)}
                runs.append(make_run(
                    {r: rng.uniform(0.3, 0.9, clients).tolist() for r in range(rounds)},
                    n_test=[10] * clients, method=method, split_seed=seed, groups=groups,
                    partition=LONG_PARTITION.format(clients=clients, k=p), weights=w,
                    matrices={MODEL_DISTANCE: d},
                    per_client={"cluster": {r: [0 if r <= 1 else i % 3 for i in range(clients)]
                                            for r in range(rounds)}}))
    return pd.concat(runs, ignore_index=True)


def many_methods(n: int) -> list[str]:
    """``n`` method names, some long (legend entries of very different widths)."""
    return [f"method_{k}" if k % 3 else f"a_method_with_a_rather_long_name_{k}"
            for k in range(n)]


def captured_figures(monkeypatch: pytest.MonkeyPatch) -> list[Figure]:
    """Keep every figure that is saved (and still save it)."""
    figures: list[Figure] = []
    real = common.save_figure

    def keep(fig: Figure, pdf: Any, png: Any) -> None:
        figures.append(fig)
        real(fig, pdf, png)

    monkeypatch.setattr(common, "save_figure", keep)
    return figures


def texts(fig: Figure) -> str:
    """All titles, axis labels and texts of a figure, one string."""
    return "\n".join(t.get_text() for t in fig.findobj(matplotlib.text.Text))


def assert_names_not_ids(fig: Figure, methods: Sequence[str],
                         labels: Mapping[str, str]) -> None:
    """The figure names each method by its paper name and each partition by its label.

    No text of the figure (titles, legend titles and entries, axis and colour bar
    labels) holds a method id that has a paper name, or a labelled partition's id.
    """
    shown = texts(fig)
    for method in methods:
        name = method_name(method)
        assert name != method, f"{method!r} has no paper name to check against"
        assert name in shown, f"{name!r} is not in the figure's texts: {shown!r}"
        assert method not in shown, f"method id {method!r} in the figure's texts: {shown!r}"
    for partition, label in labels.items():
        assert label in shown, f"label {label!r} is not in the figure's texts: {shown!r}"
        assert partition not in shown, f"partition id {partition!r} in the texts: {shown!r}"


def drawn_texts(fig: Figure) -> list[matplotlib.text.Text]:
    """Draw ``fig`` in the figures' style; every non-empty text artist that was drawn.

    Tick labels of ticks outside the view limits are text artists that are never
    drawn, so the draw calls are recorded rather than the figure's children listed.
    """
    drawn: list[matplotlib.text.Text] = []
    real = matplotlib.text.Text.draw

    def record(self: matplotlib.text.Text, renderer: Any) -> None:
        if self.get_visible() and self.get_text().strip():
            drawn.append(self)
        real(self, renderer)

    with mock.patch.object(matplotlib.text.Text, "draw", record), \
            matplotlib.rc_context(common.STYLE):
        fig.canvas.draw()
    return drawn


def texts_off_canvas(fig: Figure) -> list[str]:
    """The drawn texts (:func:`drawn_texts`) whose window extent leaves the canvas."""
    drawn = drawn_texts(fig)
    assert drawn
    renderer = fig.canvas.get_renderer()
    canvas = fig.bbox
    outside = []
    for text in drawn:
        box = text.get_window_extent(renderer)
        if (box.x0 < canvas.x0 or box.y0 < canvas.y0 or box.x1 > canvas.x1
                or box.y1 > canvas.y1):
            outside.append(f"{text.get_text()!r} at {np.round(box.extents, 1).tolist()} "
                           f"(canvas {canvas.width:.0f}x{canvas.height:.0f} px)")
    return outside


def assert_texts_on_canvas(fig: Figure) -> None:
    """Every text drawn (titles, labels, ticks, legend entries and titles) is on the canvas.

    Checked at the figure's resolution and at the PNG's: hinted text does not scale
    exactly with the resolution.
    """
    dpi = fig.dpi
    try:
        for resolution in (dpi, common.STYLE["savefig.dpi"]):
            fig.set_dpi(resolution)
            outside = texts_off_canvas(fig)
            assert not outside, f"at {resolution} dpi: " + "; ".join(outside)
    finally:
        fig.set_dpi(dpi)


def check_fits(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
               draw: Callable[[Path, Path], object]) -> Figure:
    """Call ``draw(pdf, png)``, check the files, and that every text lies on the canvas."""
    figures = captured_figures(monkeypatch)
    pdf, png = tmp_path / "fit.pdf", tmp_path / "fit.png"
    draw(pdf, png)
    assert_figure_files(pdf, png)
    assert len(figures) == 1
    assert_texts_on_canvas(figures[0])
    return figures[0]
