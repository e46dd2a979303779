"""A tuning grid: the values tried for one key, its points' names, its edges.

The parts of :mod:`pflrepro.tuning` that the shared-training block
(:mod:`pflrepro.tuning.shared`) and the tuning table
(:mod:`pflrepro.reporting.tuning`) read too, kept apart so that none of them imports
another in a circle.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np


class TuneError(ValueError):
    """A ``tune:`` block that cannot be run; the message names the key."""


@dataclass(frozen=True)
class Grid:
    """The values tried for one key; ``log``: log-spaced (plotted on a log axis)."""

    key: str
    values: tuple[float, ...]
    log: bool = False


def _clean(value: float) -> float:
    """``value`` to 12 significant digits (``1e-05``, not ``1.0000000000000004e-05``)."""
    return float(f"{value:.12g}")


def parse_grid(key: str, spec: Any, where: str) -> Grid:
    """A grid from a list of numbers or ``{log: [lo, hi], num: n}`` (n >= 2, 0 < lo < hi).

    >>> parse_grid("sigma", {"log": [1e-3, 1e-1], "num": 3}, "x").values
    (0.001, 0.01, 0.1)
    """
    if isinstance(spec, Mapping):
        unknown = sorted(set(spec) - {"log", "num"})
        bounds, num = spec.get("log"), spec.get("num")
        if unknown or not isinstance(bounds, list | tuple) or len(bounds) != 2 \
                or isinstance(num, bool) or not isinstance(num, int) or num < 2:
            raise TuneError(f"{where}: a log range is {{log: [lo, hi], num: n}} with n >= 2, "
                            f"got {dict(spec)!r}")
        lo, hi = (float(b) for b in bounds)
        if not (0 < lo < hi and math.isfinite(hi)):
            raise TuneError(f"{where}.log: needs 0 < lo < hi, got {list(bounds)}")
        values = tuple(_clean(v) for v in np.logspace(math.log10(lo), math.log10(hi), num))
        return Grid(key, values, log=True)
    if not isinstance(spec, list | tuple) or not spec:
        raise TuneError(f"{where}: a grid is a non-empty list of numbers or "
                        f"{{log: [lo, hi], num: n}}, got {spec!r}")
    values = []
    for v in spec:
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
            raise TuneError(f"{where}: grid values must be finite numbers, got {v!r}")
        values.append(_clean(float(v)))
    if len(set(values)) != len(values):
        raise TuneError(f"{where}: a value is listed twice in {list(spec)}")
    return Grid(key, tuple(values), log=False)


def point_id(point: Mapping[str, float]) -> str:
    """A path-safe name of a grid point, e.g. ``sigma1e-05_prox1``."""
    return "_".join(f"{k}{v:.12g}" for k, v in point.items())


def edge(grid: Grid, value: float) -> str:
    """``" (the grid's lowest value)"`` / ``highest``, or ``""`` inside the grid.

    A selection at an edge says the best value may lie outside the grid. A lowest value
    of 0 is not an edge: every tuned key is non-negative, so nothing lies below it.
    """
    if len(grid.values) < 2:
        return ""
    if value == min(grid.values) and value != 0:
        return " (the grid's lowest value)"
    if value == max(grid.values):
        return " (the grid's highest value)"
    return ""
