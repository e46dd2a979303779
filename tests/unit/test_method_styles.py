"""Method colours, line styles and coinciding curves (pflrepro.reporting.method_styles)."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import seaborn as sns

from pflrepro.reporting.method_styles import (
    MIN_DISTANCE,
    MOST_METHODS,
    coincide_note,
    coinciding,
    lab,
    method_palette,
    method_styles,
)


def test_lab_of_white_black_and_red() -> None:
    assert np.allclose(lab(np.array([1.0, 1.0, 1.0])), [100.0, 0.0, 0.0], atol=0.1)
    assert np.allclose(lab(np.array([0.0, 0.0, 0.0])), [0.0, 0.0, 0.0], atol=0.1)
    # sRGB red: L* 53.2, a* 80.1, b* 67.2 (the CIELAB tables' value)
    assert np.allclose(lab(np.array([1.0, 0.0, 0.0])), [53.2, 80.1, 67.2], atol=0.3)


def test_nineteen_colours_stay_apart_and_the_colour_blind_palette_comes_first() -> None:
    colours = method_palette(MOST_METHODS)
    assert len(colours) == MOST_METHODS
    distances = [float(np.linalg.norm(lab(np.array(a)) - lab(np.array(b))))
                 for a, b in itertools.combinations(colours, 2)]
    assert min(distances) >= MIN_DISTANCE
    base = [tuple(c) for c in sns.color_palette("colorblind")]
    assert colours[0] == base[0] and colours[1] == base[1]
    # the base palette's two pinks (#cc78bc, #fbafe4) are not both kept
    assert not {base[4], base[6]} <= set(colours)


def test_styles_differ_between_neighbours() -> None:
    styles = method_styles([f"m{i}" for i in range(8)])
    for a, b in itertools.pairwise(styles.values()):
        assert a.linestyle != b.linestyle and a.marker != b.marker and a.colour != b.colour


def _stats(curves: dict[str, list[float]]) -> pd.DataFrame:
    return pd.DataFrame([{"partition": "p", "method": m, "round": r, "mean": v}
                         for m, values in curves.items() for r, v in enumerate(values)])


def test_coinciding_curves_are_grouped_and_named() -> None:
    # within COINCIDE_POINTS (0.5) at every round: fedprox of fedavg; local is 0.6 off once
    stats = _stats({"fedavg": [10.0, 20.0, 30.0], "fedprox": [10.0, 20.4, 30.0],
                    "fedavg_ft": [11.0, 21.0, 31.0], "fedprox_ft": [11.0, 21.0, 31.0],
                    "local": [10.0, 20.0, 30.6]})
    groups = coinciding(stats, ["fedavg", "fedavg_ft", "fedprox", "fedprox_ft", "local"])
    assert groups == [["fedavg", "fedprox"], ["fedavg_ft", "fedprox_ft"]]
    note = coincide_note(groups, {"fedavg": "FedAvg", "fedprox": "FedProx"})
    assert note.endswith("FedAvg = FedProx; fedavg_ft = fedprox_ft")
    assert coincide_note([], {}) == ""
