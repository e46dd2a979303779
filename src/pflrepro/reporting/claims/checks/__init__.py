"""Claims checked against an aggregate: per-run numbers, margins, bootstrap verdicts.

:func:`evaluate_claims` reads the runs each check needs from the aggregate
(:class:`.data.Data`), computes the check's terms (per-run values paired by seed
pair), their margins and a paired percentile bootstrap interval
(:func:`.logic.decide`), and returns one row per claim and experiment
(:data:`~pflrepro.reporting.claims.parse.COLUMNS`). The check types live in one
module per kind of quantity: :mod:`.accuracy`, :mod:`.weights`, :mod:`.gates`,
:mod:`.records`; :mod:`.evaluate` dispatches to them. The rules (margins,
quantifiers, verdicts): the package docstring, :mod:`pflrepro.reporting.claims`.
"""

from pflrepro.reporting.claims.checks.evaluate import evaluate_claims
from pflrepro.reporting.claims.checks.logic import (
    LEVEL,
    PERCENT,
    RESAMPLES,
    Verdict,
    combine,
    decide,
)

__all__ = ["LEVEL", "PERCENT", "RESAMPLES", "Verdict", "combine", "decide", "evaluate_claims"]
