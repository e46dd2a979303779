"""What the figures share: wrapping, grids, colours, picking a run, fitting, saving."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from _figure_helpers import (
    assert_figure_files,
    assert_texts_on_canvas,
    make_run,
    texts_off_canvas,
    weights_aggregate,
)
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from pflrepro.reporting.figures import common
from pflrepro.reporting.figures.common import (
    NO_GROUP_COLOUR,
    LegendSpec,
    check_client,
    finish,
    first_run_rows,
    grid,
    group_colours,
    new_figure,
    run_groups,
    wrap,
)


def test_wrap_breaks_after_dashes_and_keeps_short_labels() -> None:
    assert wrap("short") == "short"
    long = "label_groups-clients8-test_fraction0.2-max_samples0-groups4"
    lines = wrap(long, 30).splitlines()
    assert "".join(lines) == long and all(len(line) <= 30 for line in lines)
    assert lines[0].endswith("-")


def test_grid_holds_every_panel() -> None:
    assert [grid(n) for n in (1, 2, 3, 4, 7)] == [(1, 1), (1, 2), (1, 3), (2, 3), (3, 3)]
    assert grid(5, 2) == (3, 2)


def test_group_colours_grey_for_unknown_and_stable() -> None:
    colours = group_colours([2, -1, 0, 2])
    assert set(colours) == {-1, 0, 2} and colours[-1] == NO_GROUP_COLOUR
    assert colours[0] != colours[2]
    assert group_colours([0, 2]) == colours


def test_check_client() -> None:
    assert check_client(np.int64(3), "x") == 3
    for bad in (-1, True, 1.0, "0"):
        with pytest.raises(ValueError, match="x: client must be"):
            check_client(bad, "x")


def test_first_run_is_lowest_split_then_train_seed() -> None:
    agg = weights_aggregate()
    fed = agg[(agg["method"] == "federico") & (agg["partition"].str.endswith("groups2"))]
    run, rows = first_run_rows(fed, "what", "federico", "p")
    assert run["split_seed"] == 0 and set(rows["split_seed"]) == {0}
    mixed = pd.concat([fed, make_run({0: [0.5] * 3}, n_test=(1, 1, 1), split_seed=5,
                                     partition=fed["partition"].iloc[0]).assign(params="other")])
    with pytest.raises(ValueError, match="what: method 'federico', partition 'p' mixes"):
        first_run_rows(mixed, "what", "federico", "p")


def test_run_groups_one_row_per_client_and_run() -> None:
    groups = run_groups(weights_aggregate())
    assert len(groups) == 6 * 3  # 6 runs x 3 clients
    assert set(groups["group"]) == {-1, 0, 1}


def _one_panel(width: float = 3.0) -> Figure:
    fig = new_figure(width, 2.0)
    ax = fig.subplots()
    ax.plot([0, 1], [0, 1])
    ax.set_ylabel("a y label")
    return fig


def test_finish_fits_a_legend_wider_than_the_figure(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    saved: list[Figure] = []
    monkeypatch.setattr(common, "save_figure", lambda fig, pdf, png: saved.append(fig))
    names = [f"a method called number {k}" for k in range(7)]
    handles = [Line2D([], [], color="k") for _ in names]
    title = "a legend title that is much wider than a narrow figure can hold on one line"
    fig = _one_panel()
    finish(fig, tmp_path / "f.pdf", tmp_path / "f.png", [LegendSpec(handles, names, title)])
    (legend,) = fig.legends
    assert legend.get_title().get_text() != title and "\n" in legend.get_title().get_text()
    assert legend._ncols < 6  # fewer columns than asked for, as the width holds
    assert fig.get_size_inches()[1] > 2.0  # taller by the legend: the panel keeps its size
    assert_texts_on_canvas(fig)
    # one entry wider than the figure: the figure grows
    wide = "an entry so long that no figure three inches wide could show it in one line"
    fig = _one_panel()
    finish(fig, tmp_path / "f.pdf", tmp_path / "f.png",
           [LegendSpec([Line2D([], [])], [wide], "t"),
            LegendSpec([Line2D([], [])] * 12, [f"side {k}" for k in range(12)], "side",
                       loc="outside right upper")])
    assert fig.get_size_inches()[0] > 3.0
    assert_texts_on_canvas(fig)


def test_the_check_sees_text_off_the_canvas() -> None:
    fig = new_figure(2.0, 2.0)
    ax = fig.subplots()
    ax.set_title("a title far too long to fit on a figure only two inches wide")
    assert any("far too long" in t for t in texts_off_canvas(fig))
    with pytest.raises(AssertionError, match="far too long"):
        assert_texts_on_canvas(fig)


def test_save_is_atomic_and_reproducible(tmp_path: Path) -> None:
    digests = []
    for k in range(2):
        fig = _one_panel()
        pdf, png = tmp_path / f"s{k}.pdf", tmp_path / "sub" / f"s{k}.png"
        finish(fig, pdf, png, [LegendSpec([Line2D([], [])], ["a"], "t")])
        assert_figure_files(pdf, png)
        digests.append([hashlib.sha256(p.read_bytes()).hexdigest() for p in (pdf, png)])
    assert digests[0] == digests[1]
