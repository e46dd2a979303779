"""Terms, margins, bootstrap verdicts and the helpers every check type shares.

A check's *terms* (:class:`Term`: per-run values paired by seed pair and a margin
function) are combined over columns and comparisons (:func:`combine`) and decided
by a paired percentile bootstrap (:func:`decide`); the rules: the package docstring,
:mod:`pflrepro.reporting.claims`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pflrepro.reporting.claims.checks.data import Data, Runs
from pflrepro.reporting.claims.parse import Check
from pflrepro.reporting.claims.power import pairs_to_decide

if TYPE_CHECKING:
    import numpy as np


#: Level of the confidence intervals and number of bootstrap resamples.
LEVEL = 0.95
RESAMPLES = 2000
#: Values this close to a bound are at it (float rounding of a sum of equal shares).
AT_BOUND = 1e-9
#: The range of an accuracy in percent: its floor and ceiling.
PERCENT = (0.0, 100.0)


@dataclass
class Term:
    """One comparison of a check (e.g. one method vs one baseline in one column).

    ``values`` holds per-run numbers (runs in the design's seed order × ``k``) and
    ``margin`` maps their means over runs (``... × k``) to the signed margin, so the
    point margin is ``margin(values.mean(0))`` and a bootstrap resample of the runs
    gives ``margin(values[idx].mean(-2))``. Without values the term is ``missing``
    (a cell with no designed run), ``incomplete`` (fewer runs than designed) or
    ``undecidable`` (complete data on which the check is not defined), with reasons.
    ``tie``: the term's tie tolerance when the data set it (one test row of an accuracy
    column); ``bounds``: the (floor, ceiling) of its values (``None``: unbounded), e.g.
    :data:`PERCENT` for accuracies.
    """

    experiment: str = ""
    values: np.ndarray | None = None
    margin: Any = None
    gap: str = ""
    reason: str = ""
    tie: float | None = None
    bounds: tuple[float | None, float | None] | None = None


def runs_term(experiment: str, cells: Sequence[tuple[str, Runs]],
               seeds: Sequence[tuple[int, int]], margin: Any,
               convert: Any = None, **extra: Any) -> Term:
    """A term over cells (name, per-run values); a gap when a cell lacks designed runs.

    ``convert`` maps a cell's per-run value to a tuple of numbers (default: the value);
    ``extra``: the term's ``tie`` and ``bounds``.
    """
    import numpy as np

    lacking = []
    for name, runs in cells:
        got = sum(s in runs for s in seeds)
        if got < len(seeds):
            lacking.append((name, got))
    if lacking:
        gap = "missing" if any(got == 0 for _, got in lacking) else "incomplete"
        reason = "; ".join(f"{name}: {got} of {len(seeds)} runs" for name, got in lacking)
        return Term(experiment=experiment, gap=gap, reason=reason)
    convert = convert or (lambda v: (v,))
    rows = [[x for _, runs in cells for x in convert(runs[s])] for s in seeds]
    return Term(experiment=experiment, values=np.asarray(rows, dtype=float), margin=margin,
                **extra)


def _reduce(stack: np.ndarray, quantifier: str) -> np.ndarray:
    if quantifier == "mean":
        return stack.mean(axis=0)
    return stack.min(axis=0) if quantifier == "all" else stack.max(axis=0)


def combine(groups: Sequence[Sequence[np.ndarray]], quantifier: str) -> np.ndarray:
    """The margin of a check from its terms' margins (arrays of equal shape).

    Within a group (the columns of one comparison, e.g. one method vs one baseline):
    the worst column under ``all``, the best under ``any``, the mean over the columns
    under ``mean``; across groups the worst.
    """
    import numpy as np

    if not groups or any(len(g) == 0 for g in groups):
        raise ValueError("combine: a check without terms")
    per_group = [_reduce(np.stack([np.asarray(t, dtype=float) for t in g]), quantifier)
                 for g in groups]
    return np.stack(per_group).min(axis=0)


def fewer_than(m: np.ndarray) -> np.ndarray:
    """Margin of "fewer (``m[..., 0]``) than (``m[..., 1]``)" for whole counts per run.

    ``used < total`` on integers is ``used <= total - 1``: the margin ``total - used - 1``
    is at least zero exactly when the claim holds, so a count equal to its bound (every
    component used) is a failure by one, never a tie at the threshold.
    """
    return m[..., 1] - m[..., 0] - 1


@dataclass
class Verdict:
    """A row's verdict: one of :data:`VERDICTS`, its margin, n, interval and reason."""

    verdict: str
    margin: float = float("nan")
    n: int = 0
    ci_low: float = float("nan")
    ci_high: float = float("nan")
    reason: str = ""


def _holds(margin: float, strict: bool) -> bool:
    return margin > 0 if strict else margin >= 0


def _at_bound(terms: Sequence[Term]) -> str:
    """``ceiling`` / ``floor`` when every value of every term is at its bound; else ``""``."""
    if not terms or any(t.bounds is None or t.values is None for t in terms):
        return ""
    for side, name in ((1, "ceiling"), (0, "floor")):
        bounds = [t.bounds[side] for t in terms]  # type: ignore[index]
        if all(b is not None and (abs(t.values - b) <= AT_BOUND).all()  # type: ignore[operator]
               for t, b in zip(terms, bounds, strict=True)):
            shown = "/".join(dict.fromkeys(f"{b:g}" for b in bounds))
            return (f"{name}: every compared value is {shown} in every run, so no "
                    "difference can show")
    return ""


def decide(groups: Sequence[Sequence[Term]], quantifier: str, strict: bool,
           tie: float | None, rng: np.random.Generator) -> Verdict:
    """The verdict of a check's terms (see the package docstring).

    ``tie``: the tie tolerance of the check's unit (``None``: the terms' own, one test
    row of their columns); a margin or bound closer to zero than it counts as zero.
    """
    import numpy as np

    terms = [t for g in groups for t in g]
    if not terms or any(len(g) == 0 for g in groups):
        return Verdict("missing", reason="no column to compare")
    for gap in ("missing", "incomplete", "undecidable"):
        reasons = [t.reason for t in terms if t.gap == gap]
        if reasons:
            return Verdict(gap, reason="; ".join(dict.fromkeys(reasons)))
    # the coarsest resolution among the terms (e.g. the column with the fewest test rows)
    tie = max([tie or 0.0, *(t.tie for t in terms if t.tie is not None)])

    def zero(x: np.ndarray) -> np.ndarray:
        return np.where(np.abs(x) < tie, 0.0, x)

    n = min(int(t.values.shape[0]) for t in terms)  # type: ignore[union-attr]
    point = combine([[t.margin(t.values.mean(axis=0)) for t in g] for g in groups],
                    quantifier)
    # paired bootstrap: one resample of the seed pairs per experiment, shared by every
    # term of that experiment (so method a and method b keep their pairing)
    draws = {}
    for t in terms:
        if t.experiment not in draws:
            size = int(t.values.shape[0])  # type: ignore[union-attr]
            draws[t.experiment] = rng.integers(0, size, size=(RESAMPLES, size))
    boot = combine([[t.margin(t.values[draws[t.experiment]].mean(axis=1))  # type: ignore[index]
                     for t in g] for g in groups], quantifier)
    low, high = np.quantile(boot, [(1 - LEVEL) / 2, (1 + LEVEL) / 2])
    margin, low, high = (float(zero(np.asarray(x))) for x in (point, low, high))
    out = Verdict("inconclusive", margin=margin, n=n, ci_low=low, ci_high=high)
    bound = _at_bound(terms)
    if bound:
        out.verdict, out.reason = "undecidable", bound
    elif n < 2:
        out.reason = f"n = {n}: one run per cell, no interval"
    elif _holds(low, strict):
        out.verdict = "holds"
    elif high < 0:
        out.verdict = "fails"
    elif strict and low == high == 0:
        out.verdict = "undecidable"
        out.reason = (f"tie: the margin and its whole interval are within {tie:.3g} of 0 "
                      "(the tie tolerance), and the predicate is strict")
    else:
        out.reason = (f"the {LEVEL:.0%} interval of the margin contains the threshold; "
                      f"{pairs_needed(margin, low, high, n)}")
    return out


def pairs_needed(margin: float, low: float, high: float, n: int) -> str:
    """How many seed pairs would decide an inconclusive row, at the spread observed.

    The rule is :func:`~pflrepro.reporting.claims.power.pairs_to_decide`'s; a margin of
    0 is decided by no number of pairs.
    """
    need = pairs_to_decide(margin, low, high, n)
    if need is None:
        return "at a margin of 0 no number of seed pairs decides it"
    return f"at the observed spread about {need} seed pairs would decide it (n = {n})"


@dataclass
class Outcome:
    """The terms of a check (grouped) and its numbers: a head and one item per column."""

    head: str
    groups: list[list[Term]]
    items: list[str]


def columns(data: Data, experiments: Sequence[str],
             check: Check) -> tuple[list[tuple[str, str]], list[Term], list[str]]:
    """Columns (experiment, partition) a check reads; a gap term and reason per unknown one.

    The columns are the design's partitions (so an absent column is missing, never
    skipped); with ``distributions``, those whose runs have that many distributions:
    a column without runs has no known number, so the check is missing.
    """
    cols: list[tuple[str, str]] = []
    gaps: list[Term] = []
    reasons: list[str] = []

    def gap(experiment: str, text: str) -> None:
        gaps.append(Term(experiment=experiment, gap="missing", reason=text))
        reasons.append(text)

    for experiment in experiments:
        if experiment not in data.design:
            gap(experiment, f"{experiment} is not in the config")
            continue
        if data.frame(experiment) is None:
            gap(experiment, f"no results for {experiment}")
            continue
        parts = list(data.design[experiment].partitions)
        if check.distributions:
            unknown = [p for p in parts if data.distributions(experiment, p) == 0]
            for p in unknown:
                gap(experiment, f"{experiment}: {p} has no runs with distribution ids")
            parts = [p for p in parts
                     if data.distributions(experiment, p) in check.distributions]
            if not parts and not unknown:
                wanted = "/".join(str(d) for d in check.distributions)
                gaps.append(Term(experiment=experiment, gap="undecidable",
                                  reason=f"{experiment}: no column with {wanted} "
                                  "distributions"))
                reasons.append(gaps[-1].reason)
        cols += [(experiment, p) for p in parts]
    return cols, gaps, reasons


def pct(value: float | None) -> str:
    """An accuracy in percent with one decimal, ``n/a`` for none."""
    return "n/a" if value is None else f"{value:.1f}"


def num(value: float | None) -> str:
    """A number with three significant digits, ``n/a`` for none."""
    return "n/a" if value is None else f"{value:.3g}"


def mean_of(runs: Runs, seeds: Sequence[tuple[int, int]]) -> float | None:
    """The mean of a cell's values over the seed pairs it has (``None``: none)."""
    got = [runs[s] for s in seeds if s in runs]
    return float(sum(got) / len(got)) if got else None

