"""How a figure draws its methods: colour, line style and marker per method, and which coincide.

Colours (:func:`method_palette`): seaborn's colour-blind safe palette first, leaving
out its colours too light on a white background or too close to an earlier one (its
two pinks), then colours picked one at a time from a grid of hues, each the farthest
(CIELAB distance) from those already chosen, so the first :data:`MOST_METHODS`
colours are at least :data:`MIN_DISTANCE` apart. A method's colour, line style and
marker follow from its name alone (:func:`method_styles`), never from which other
methods a figure shows: the methods of :data:`DECLARED` own the first colours, any
other name (a config's variant, a new method) takes a colour of the rest of the
palette by a hash of its name. Line styles and markers cycle with periods coprime to
each other, and markers are staggered along the curve, so curves drawn on top of
each other still show each method's markers.
:func:`coinciding` names the methods whose curves lie within :data:`COINCIDE_POINTS`
of another's at every round: a figure says so in a note.
"""

from __future__ import annotations

import colorsys
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pandas as pd

#: Palette the method colours start from (seaborn's colour-blind safe one).
BASE_PALETTE = "colorblind"
#: The methods with a colour of their own, in palette order. Append only: a method's
#: colour never moves when another is added.
DECLARED = ("local", "fedavg", "federico", "fedavg_plus", "clustered_fl", "fedem",
            "fedfomo", "fedamp", "heurfedamp", "fedprox", "fedprox_ft", "scaffold", "apfl",
            "ditto", "per_fedavg", "hypcluster", "perfedckt", "feddf", "fedmix", "majority")
#: Colours :func:`method_palette` keeps at least MIN_DISTANCE apart: one per declared method.
MOST_METHODS = len(DECLARED)
#: Colours in all: the declared methods' and those other names are hashed onto.
PALETTE_SIZE = 48
#: Least CIELAB distance (ΔE*ab) between two method colours, up to MOST_METHODS methods.
MIN_DISTANCE = 20.0
#: Lightness (L*) range of a method colour: visible as a line on white, not black.
LIGHTNESS = (25.0, 80.0)
LINE_STYLES = ("-", "--", "-.", ":")
MARKERS = ("o", "s", "^", "D", "v", "P", "X")
#: Curves whose means differ by at most this many percentage points at every round coincide
#: (half a point: less than a line width on a 0-100 % axis of a printed panel).
COINCIDE_POINTS = 0.5


def lab(rgb: np.ndarray) -> np.ndarray:
    """CIELAB (D65) of sRGB colours in [0, 1] (last axis: R, G, B)."""
    rgb = np.asarray(rgb, dtype=float)
    linear = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    to_xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722],
                       [0.0193, 0.1192, 0.9505]])
    xyz = linear @ to_xyz.T / np.array([0.95047, 1.0, 1.08883])
    f = np.where(xyz > 0.008856, np.cbrt(xyz), 7.787 * xyz + 16 / 116)
    return np.stack([116 * f[..., 1] - 16, 500 * (f[..., 0] - f[..., 1]),
                     200 * (f[..., 1] - f[..., 2])], axis=-1)


def _usable(colour: np.ndarray) -> bool:
    return LIGHTNESS[0] <= float(lab(colour)[0]) <= LIGHTNESS[1]


@lru_cache(maxsize=1)
def _palette() -> tuple[tuple[float, float, float], ...]:
    import seaborn as sns

    chosen: list[np.ndarray] = []
    for colour in np.asarray(sns.color_palette(BASE_PALETTE), dtype=float):
        if _usable(colour) and all(np.linalg.norm(lab(colour) - lab(c)) >= 1.5 * MIN_DISTANCE
                                   for c in chosen):
            chosen.append(colour)
    grid = np.array([colorsys.hls_to_rgb(h / 72, light, sat) for h in range(72)
                     for light in (0.3, 0.45, 0.6) for sat in (0.55, 0.8, 1.0)])
    grid = grid[[_usable(c) for c in grid]]
    grid_lab = lab(grid)
    nearest = np.min(np.linalg.norm(grid_lab[:, None] - lab(np.array(chosen))[None], axis=-1),
                     axis=1)
    while len(chosen) < PALETTE_SIZE:
        k = int(np.argmax(nearest))
        chosen.append(grid[k])
        nearest = np.minimum(nearest, np.linalg.norm(grid_lab - grid_lab[k], axis=-1))
    return tuple(tuple(float(v) for v in c) for c in chosen)


def method_palette(n: int) -> list[tuple[float, float, float]]:
    """The first ``n`` palette colours (RGB in [0, 1]); beyond :data:`PALETTE_SIZE` they repeat."""
    colours = _palette()
    return [colours[i % len(colours)] for i in range(n)]


@dataclass(frozen=True)
class MethodStyle:
    """How one method's curve is drawn (``Line2D`` keyword arguments: :meth:`line`)."""

    colour: tuple[float, float, float]
    linestyle: str
    marker: str
    #: Index of the first marked point; markers then every ``marker_step`` points.
    marker_start: int

    def line(self, points: int, marker_step: int) -> dict[str, object]:
        """Keyword arguments of ``Axes.plot`` for a curve of ``points`` points."""
        step = max(1, min(marker_step, points))
        return dict(color=self.colour, linestyle=self.linestyle, marker=self.marker, ms=3.5,
                    markevery=(self.marker_start % step, step))

    def legend_line(self) -> dict[str, object]:
        """Keyword arguments of a legend handle (``Line2D([], [], ...)``)."""
        return dict(color=self.colour, linestyle=self.linestyle, marker=self.marker, ms=4,
                    lw=1.6)


def _preferred_slot(name: str) -> int:
    """The palette position ``name`` asks for: its declared one, else one its hash picks."""
    if name in DECLARED:
        return DECLARED.index(name)
    digest = int(hashlib.sha256(name.encode()).hexdigest()[:8], 16)
    return len(DECLARED) + digest % (PALETTE_SIZE - len(DECLARED))


def method_slots(methods: Sequence[str]) -> dict[str, int]:
    """Each method's palette position, from its name (:data:`DECLARED`, else a hash).

    Two undeclared names that hash to the same position in one figure are told apart:
    in name order, a later one takes the next free position of the undeclared range, so
    a method's position depends on no other method unless the two collide.
    """
    slots = {m: _preferred_slot(m) for m in methods if m in DECLARED}
    used = set(slots.values())
    spare = PALETTE_SIZE - len(DECLARED)
    for name in sorted(m for m in dict.fromkeys(methods) if m not in DECLARED):
        slot = _preferred_slot(name)
        for _ in range(spare):
            if slot not in used:
                break
            slot = len(DECLARED) + (slot - len(DECLARED) + 1) % spare
        slots[name] = slot
        used.add(slot)
    return slots


def method_styles(methods: Sequence[str]) -> dict[str, MethodStyle]:
    """Each method's colour, line style and marker, from its name (:func:`method_slots`).

    Only where a figure's curves begin their markers follows the position in ``methods``
    (staggered, so curves on top of each other show every marker).
    """
    colours = method_palette(PALETTE_SIZE)
    slots = method_slots(methods)
    return {m: MethodStyle(colour=colours[slots[m]],
                           linestyle=LINE_STYLES[slots[m] % len(LINE_STYLES)],
                           marker=MARKERS[slots[m] % len(MARKERS)], marker_start=i)
            for i, m in enumerate(methods)}


def marker_step(methods: int, points: int) -> int:
    """Points between two markers of a curve: room for every method's marker in turn."""
    return max(1, min(points, max(methods, points // 6)))


def coinciding(stats: pd.DataFrame, methods: Sequence[str],
               tolerance: float = COINCIDE_POINTS) -> list[list[str]]:
    """Groups of ``methods`` whose mean curves coincide in every panel they share.

    ``stats``: rows ``partition, method, round, mean`` (percent). Two methods coincide
    when they have curves in the same panels, at the same rounds, and their means differ
    by at most ``tolerance`` percentage points everywhere. Groups follow the order of
    ``methods``; methods that coincide with none are left out.
    """
    curves: dict[str, pd.Series] = {}
    for method in methods:
        rows = stats[stats["method"] == method]
        if not rows.empty:
            curves[method] = rows.set_index(["partition", "round"])["mean"].sort_index()
    groups: list[list[str]] = []
    placed: set[str] = set()
    for i, first in enumerate(methods):
        if first in placed or first not in curves:
            continue
        group = [first]
        for other in methods[i + 1:]:
            if other in placed or other not in curves:
                continue
            a, b = curves[first], curves[other]
            if a.index.equals(b.index) and bool(np.all(np.abs(a.to_numpy() - b.to_numpy())
                                                       <= tolerance)):
                group.append(other)
        if len(group) > 1:
            groups.append(group)
            placed.update(group)
    return groups


def coincide_note(groups: Sequence[Sequence[str]], names: Mapping[str, str],
                  tolerance: float = COINCIDE_POINTS) -> str:
    """The figure's note on curves drawn on top of each other; ``""`` when none are."""
    if not groups:
        return ""
    text = "; ".join(" = ".join(names.get(m, m) for m in g) for g in groups)
    return (f"Curves on top of each other (means within {tolerance:g} points at every "
            f"round): {text}")
