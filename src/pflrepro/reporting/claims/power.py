"""Seed pairs for the headline claims: how many a verdict needs, within a stated cap.

A claim marked ``headline: true`` in the claims file backs a number the README and the
report lead with. Its row gets a *power* cell that says whether its experiments have as
many (split, training) seed pairs as a verdict needs at the spread observed:

* the rule (:func:`pairs_to_decide`): a row's bootstrap interval has half-width ``h``
  at ``n`` pairs and shrinks as ``1 / sqrt(n)``, so it clears the threshold once
  ``n' > n (h / |margin|)^2``, the margin and the spread staying as measured;
* the cap (the file's ``power: {cap, reason}``): the most seed pairs the scale's time
  budget gives one headline experiment;
* a headline row that is inconclusive, whose rule asks for at most ``cap`` pairs and
  that has fewer is *underpowered* (:data:`UNDERPOWERED` opens its cell): its
  experiments should get the pairs the rule asks for. A row the rule would decide only
  above the cap, or never (a margin of 0), keeps its pairs and says so.

This module imports nothing of the package.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: The opening of the power cell of a headline row that needs more seed pairs.
UNDERPOWERED = "underpowered"


@dataclass(frozen=True)
class Power:
    """The claims file's ``power`` block: the cap on a headline experiment's seed pairs."""

    cap: int
    reason: str


def parse_power(raw: Any, where: str, error: type[Exception] = ValueError) -> Power:
    """``{cap: int >= 2, reason: text}``; ``error`` naming the key otherwise."""
    if not isinstance(raw, Mapping) or set(raw) != {"cap", "reason"}:
        keys = sorted(raw) if isinstance(raw, Mapping) else type(raw).__name__
        raise error(f"{where}: expected the keys 'cap' and 'reason', got {keys}")
    cap, reason = raw["cap"], raw["reason"]
    if isinstance(cap, bool) or not isinstance(cap, int) or cap < 2:
        raise error(f"{where}.cap: expected a whole number of seed pairs >= 2 (a "
                         f"verdict needs an interval), got {cap!r}")
    if not isinstance(reason, str) or not reason.strip():
        raise error(f"{where}.reason: expected a non-empty text, got {reason!r}")
    return Power(cap=cap, reason=reason.strip())


def pairs_to_decide(margin: float, low: float, high: float, n: int) -> int | None:
    """Seed pairs at which the interval clears the threshold, at the spread observed.

    ``max(n + 1, floor(n (h / |margin|)^2) + 1)`` with ``h`` the interval's half-width;
    ``None`` when no number of pairs decides it (a margin of 0, or no interval).
    """
    half = (high - low) / 2
    if n < 2 or margin == 0 or not math.isfinite(half) or not math.isfinite(margin):
        return None
    return max(n + 1, math.floor(n * (half / abs(margin)) ** 2) + 1)


def power_status(verdict: str, margin: float, low: float, high: float, n: int,
                 cap: int) -> tuple[int | None, str]:
    """(pairs the rule asks for, the row's power cell) of a headline row."""
    if verdict in ("holds", "fails"):
        return None, f"decided at n = {n}"
    if verdict != "inconclusive":
        return None, f"{verdict}: seed pairs do not decide it"
    need = pairs_to_decide(margin, low, high, n)
    if need is None:
        why = "one run per cell" if n < 2 else "a margin of 0"
        return None, f"at n = {n}, {why}: no number of seed pairs decides it"
    if need > cap:
        return need, (f"at n = {n}, about {need} seed pairs would decide it, above the "
                      f"cap of {cap}")
    return need, (f"{UNDERPOWERED}: about {need} seed pairs would decide it (n = {n}, "
                  f"cap {cap})")
