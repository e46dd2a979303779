"""Evaluate claims: dispatch each check to its module, decide, one row per claim and experiment."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pflrepro.config import SCALES
from pflrepro.reporting.claims.checks.accuracy import (
    accuracy_check,
    across_check,
    trend_check,
)
from pflrepro.reporting.claims.checks.data import Data
from pflrepro.reporting.claims.checks.logic import LEVEL, Outcome, Term, Verdict, decide
from pflrepro.reporting.claims.checks.records import (
    clusters_check,
    communication_check,
    record_peak_check,
)
from pflrepro.reporting.claims.checks.weights import distance_check, weight_check
from pflrepro.reporting.claims.parse import COLUMNS, Check, Claim, Design, row_groups
from pflrepro.reporting.claims.power import power_status

if TYPE_CHECKING:
    import pandas as pd


#: The function of each check type that is not a weight check of :func:`weight_check`.
_CHECKS = {"compare": accuracy_check, "above_all": accuracy_check,
           "within": accuracy_check, "trend": trend_check,
           "across_experiments": across_check, "communication_across": across_check,
           "communication_ratio": communication_check, "record_peak": record_peak_check,
           "clusters_used": clusters_check, "weight_distance": distance_check}


def _evaluate(check: Check, data: Data, experiments: Sequence[str],
              planned: bool) -> Outcome:
    if check.type == "unchecked":  # no check: missing when planned, else undecidable
        reason = f"not checkable: {check.reason}"
        gap = Term(experiment=experiments[0], gap="missing" if planned else "undecidable",
                   reason=reason)
        return Outcome(head="not checked", groups=[[gap]], items=[])
    return _CHECKS.get(check.type, weight_check)(check, data, experiments)


def evaluate_claims(claims: Sequence[Claim], agg: pd.DataFrame | None, scale: str, *,
                    design: Mapping[str, Design],
                    labels: Mapping[str, str] | None = None,
                    experiment_labels: Mapping[str, str] | None = None) -> pd.DataFrame:
    """Evaluate ``claims`` at ``scale`` against an aggregate; one row per :func:`row_keys`.

    A claim naming no experiment at ``scale`` gives no row there (see the module
    docstring).

    ``agg`` is a concatenation of aggregated run tables (several experiments), or
    ``None`` when there are none (every claim is then missing). ``design`` (experiment
    -> :class:`Design`, from the config: :func:`design_of`) says which columns, cells
    and runs each check needs; an experiment not in it is missing. ``labels``
    (partition id -> display label) and ``experiment_labels`` name the columns in the
    numbers text. Returns a frame with :data:`COLUMNS`; ``margin``, ``ci_low`` and
    ``ci_high`` are NaN when not decided from data; ``basis`` is the claim's
    (:data:`~pflrepro.reporting.claims.parse.BASES`); a headline claim's rows get
    ``pairs_needed`` and ``power`` (:func:`~pflrepro.reporting.claims.power.power_status`),
    the others NaN and an empty text. Raises ``ValueError`` for an
    unknown scale or inconsistent results (as the tables do: e.g. runs of different
    settings in one cell).
    """
    import pandas as pd

    from pflrepro.seeding import NO_CLIENT, SETUP_ROUND, numpy_generator

    if scale not in SCALES:
        raise ValueError(f"claims: unknown scale {scale!r}; expected one of {list(SCALES)}")
    data = Data(agg, dict(design), dict(labels or {}), dict(experiment_labels or {}))
    rows = []
    for claim in claims:
        check = claim.check
        for group in row_groups(claim, scale):
            base = {"id": claim.id, "paper": claim.paper, "where": claim.where,
                    "claim": claim.claim, "experiment": " + ".join(group),
                    "predicate": check.describe(), "unit": check.unit, "level": LEVEL}
            outcome = _evaluate(check, data, group, claim.planned)
            # the resamples of a row depend only on the claim and its experiments
            rng = numpy_generator(0, SETUP_ROUND, NO_CLIENT,
                                  f"claims bootstrap {claim.id} {base['experiment']}")
            verdict = decide(outcome.groups, check.quantifier, check.strict, claim.tie, rng)
            numbers = f"{outcome.head}: " + "; ".join(dict.fromkeys(outcome.items))
            if check.type == "unchecked":  # the reason is the whole text
                numbers = verdict.reason
            elif verdict.verdict not in ("holds", "fails") and verdict.reason:
                numbers += f" [{verdict.verdict}: {verdict.reason}]"
            if claim.planned and verdict.verdict == "missing":
                numbers = f"planned experiment; {numbers}"
            if claim.by_design:  # the arithmetic that fixes the outcome, first
                numbers = f"by design: {claim.by_design}; {numbers}"
            elif claim.selected_by:
                numbers = f"selection: {claim.selected_by}; {numbers}"
            rows.append({**base, **_verdict_cells(verdict), "numbers": numbers,
                         "basis": claim.basis, **_power_cells(verdict, claim.pair_cap)})
    return pd.DataFrame(rows, columns=list(COLUMNS))


def _power_cells(v: Verdict, cap: int | None) -> dict[str, Any]:
    """A headline row's seed pairs against the rule (``power_status``); blank otherwise."""
    if cap is None:
        return {"pairs_needed": float("nan"), "power": ""}
    need, text = power_status(v.verdict, v.margin, v.ci_low, v.ci_high, v.n, cap)
    return {"pairs_needed": float("nan") if need is None else float(need), "power": text}


def _verdict_cells(v: Verdict) -> dict[str, Any]:
    return {"verdict": v.verdict, "margin": v.margin, "n": v.n, "ci_low": v.ci_low,
            "ci_high": v.ci_high}
