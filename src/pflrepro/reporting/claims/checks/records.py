"""Checks on other recorded quantities: ``communication_ratio`` (the runs' traffic)."""

from __future__ import annotations

from collections.abc import Sequence

from pflrepro.reporting.claims.checks.data import Data, Runs
from pflrepro.reporting.claims.checks.logic import (
    Outcome,
    Term,
    columns,
    mean_of,
    num,
    runs_term,
)
from pflrepro.reporting.claims.parse import Check


def communication_check(check: Check, data: Data, experiments: Sequence[str]) -> Outcome:
    """``communication_ratio``: each baseline's traffic over the method's, per column."""
    cols, gaps, unknown = columns(data, experiments, check)
    several = len(experiments) > 1
    method, factor = check.method or "", float(check.factor or 1.0)

    def runs(name: str, col: tuple[str, str]) -> Runs:
        if name not in data.design[col[0]].methods:
            return {}
        return data.traffic_runs(col[0], col[1], name)

    groups: list[list[Term]] = []
    texts: list[str] = []
    for base in check.baselines:
        terms: list[Term] = []
        for col in cols:
            where = data.label(col[0], col[1], several)
            mine, theirs = runs(method, col), runs(base, col)
            seeds = data.seeds(col[0])
            term = runs_term(col[0], [(f"{method} {where}", mine), (f"{base} {where}", theirs)],
                              seeds, lambda m, f=factor: m[..., 1] / m[..., 0] - f)
            if not term.gap and (term.values[:, 0] <= 0).any():  # type: ignore[index]
                term = Term(experiment=col[0], gap="undecidable",
                             reason=f"{where}: {method} communicated nothing in a run, so "
                             "no ratio is defined")
            terms.append(term)
            a, b = mean_of(mine, seeds), mean_of(theirs, seeds)
            ratio = f" = {b / a:.4g}x" if a and b is not None else ""
            texts.append(f"{where}: {base} {num(b)} / {method} {num(a)}{ratio}")
        groups.append(terms + gaps)
    return Outcome(head=f"scalars communicated (total per run, factor {factor:g})",
                    groups=groups, items=[*texts, *unknown])

