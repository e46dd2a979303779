"""The tuning figure (pflrepro.reporting.tuning): partitions' labels, one legend, the style."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from _figure_helpers import captured_figures, texts

from pflrepro.reporting.figures.common import STYLE
from pflrepro.reporting.tuning import line_labels, plot_tuning
from pflrepro.tuning import Grid

LONG = ("practical-clients8-test_fraction0.2-max_samples0-groups2-dominant_share0.8-"
        "samples_per_client0")


def _table() -> pd.DataFrame:
    rows = []
    for partition in (LONG, "pathological-clients8"):
        for split in (0, 1) if partition == LONG else (0,):
            for sigma, prox, score in ((1e-5, 0.1, 0.8), (1e-3, 0.1, 0.9), (1e-5, 1.0, 0.7),
                                       (1e-3, 1.0, 0.85)):
                rows.append({"partition": partition, "split": split,
                             "point": f"sigma{sigma}_prox{prox}", "value_sigma": sigma,
                             "value_prox": prox, "score": score,
                             "selected": (sigma, prox) == (1e-3, 0.1)})
    return pd.DataFrame(rows)


def test_line_labels_name_the_split_only_where_a_partition_has_several() -> None:
    assert line_labels(_table(), {LONG: "practical"}) == {
        ("pathological-clients8", 0): "pathological-clients8",
        (LONG, 0): "practical, split 0", (LONG, 1): "practical, split 1"}


def test_one_legend_of_labels_and_no_raw_ids(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    figures = captured_figures(monkeypatch)
    grids = [Grid("sigma", (1e-5, 1e-3), log=True), Grid("prox", (0.1, 1.0))]
    plot_tuning(_table(), grids, str(tmp_path / "t.pdf"), str(tmp_path / "t.png"),
                title="Tuning FedAMP on e",
                labels={LONG: "practical", "pathological-clients8": "pathological"})
    fig = figures[0]
    assert (tmp_path / "t.png").stat().st_size > 0
    assert len(fig.legends) == 1 and all(ax.get_legend() is None for ax in fig.axes)
    assert [t.get_text() for t in fig.legends[0].get_texts()] == [
        "pathological", "practical, split 0", "practical, split 1", "selected value"]
    shown = texts(fig)
    assert LONG not in shown and "Tuning FedAMP on e" in shown
    # the shared style's font, and the y label once (the panels share the y axis)
    title = fig._suptitle
    assert title.get_fontname() == STYLE["font.sans-serif"][0]
    assert title.get_fontsize() >= fig.axes[0].xaxis.label.get_fontsize()  # not tiny
    assert [ax.get_ylabel() for ax in fig.axes] == ["validation accuracy (%)", ""]
    # the selected value of each line is ringed: one ring per line and panel
    rings = [ln for ax in fig.axes for ln in ax.get_lines() if ln.get_markersize() == 10]
    assert len(rings) == 3 * len(grids)
