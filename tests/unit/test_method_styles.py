"""Method colours, line styles and coinciding curves (pflrepro.reporting.method_styles)."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import seaborn as sns

from pflrepro.reporting.method_styles import (
    DECLARED,
    MIN_DISTANCE,
    MOST_METHODS,
    PALETTE_SIZE,
    coincide_note,
    coinciding,
    lab,
    method_palette,
    method_slots,
    method_styles,
)


def test_lab_of_white_black_and_red() -> None:
    assert np.allclose(lab(np.array([1.0, 1.0, 1.0])), [100.0, 0.0, 0.0], atol=0.1)
    assert np.allclose(lab(np.array([0.0, 0.0, 0.0])), [0.0, 0.0, 0.0], atol=0.1)
    # sRGB red: L* 53.2, a* 80.1, b* 67.2 (the CIELAB tables' value)
    assert np.allclose(lab(np.array([1.0, 0.0, 0.0])), [53.2, 80.1, 67.2], atol=0.3)


def test_the_declared_colours_stay_apart_and_the_colour_blind_palette_comes_first() -> None:
    colours = method_palette(MOST_METHODS)
    assert len(colours) == MOST_METHODS
    distances = [float(np.linalg.norm(lab(np.array(a)) - lab(np.array(b))))
                 for a, b in itertools.combinations(colours, 2)]
    assert min(distances) >= MIN_DISTANCE
    base = [tuple(c) for c in sns.color_palette("colorblind")]
    assert colours[0] == base[0] and colours[1] == base[1]
    # the base palette's two pinks (#cc78bc, #fbafe4) are not both kept
    assert not {base[4], base[6]} <= set(colours)


def test_declared_methods_differ_in_colour_style_and_marker_from_their_neighbours() -> None:
    styles = method_styles(list(DECLARED))
    assert len({s.colour for s in styles.values()}) == len(DECLARED)
    for a, b in itertools.pairwise(styles.values()):
        assert a.linestyle != b.linestyle and a.marker != b.marker and a.colour != b.colour


def test_a_methods_style_follows_from_its_name_not_from_the_others_shown() -> None:
    # adding a method to a figure moves no other method's colour, style or marker
    # (colours were by position: adding FedAvgM turned Local from orange to green)
    before = method_styles(["fedavg", "local", "federico", "fedamp_oracle"])
    after = method_styles(["fedavgm", "fedavg", "local", "federico", "fedamp_oracle"])
    for m in before:
        assert (before[m].colour, before[m].linestyle, before[m].marker) == \
            (after[m].colour, after[m].linestyle, after[m].marker), m
    assert method_styles(["local"])["local"].colour == method_palette(1)[0]
    assert method_slots(["federico"])["federico"] == DECLARED.index("federico")


def test_undeclared_names_that_collide_are_told_apart() -> None:
    names = [f"variant_{i}" for i in range(PALETTE_SIZE - len(DECLARED))]
    slots = method_slots(names)
    assert len(set(slots.values())) == len(names)
    assert all(len(DECLARED) <= v < PALETTE_SIZE for v in slots.values())
    # the same names in another order get the same positions
    assert method_slots(list(reversed(names))) == slots


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
