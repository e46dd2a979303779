"""Checks on other recorded quantities: traffic, recorded matrices' peaks, cluster ids.

``communication_ratio`` (the runs' traffic), ``record_peak`` (how concentrated the
rows of a recorded matrix are, e.g. FedMix's q) and ``clusters_used`` (Clustered
FL's final cluster ids against the number of distributions).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pflrepro.reporting.claims.checks.data import Data, Runs
from pflrepro.reporting.claims.checks.logic import (
    Outcome,
    Term,
    columns,
    fewer_than,
    mean_of,
    num,
    runs_term,
)
from pflrepro.reporting.claims.parse import Check

if TYPE_CHECKING:
    import numpy as np


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



def record_peak_check(check: Check, data: Data, experiments: Sequence[str]) -> Outcome:
    """``record_peak``: the mean over rows of a recorded matrix's largest share >= threshold.

    A row is one client's (``weight``, ``gate_mass``) or one class's
    (``expert_posterior``: FedMix's q(z | y = c)) distribution over peers or experts at
    the final round, normalised to sum 1; e.g. q rows near one-hot: each class has its
    expert (the experts specialise), near 1/K: no specialisation.
    """
    cols, gaps, unknown = columns(data, experiments, check)
    several = len(experiments) > 1
    method, record = check.method or "", check.record or ""
    threshold = float(check.threshold or 0.0)
    terms: list[Term] = []
    texts: list[str] = []
    for col in cols:
        where = data.label(col[0], col[1], several)
        got = (data.weight_runs(col[0], method, record)
               if method in data.design[col[0]].methods else f"{method} is not in {col[0]}")
        reason = got if isinstance(got, str) else ""
        values: Runs = {} if isinstance(got, str) else {
            s: _row_peak(r.final) for s, r in got.get(col[1], {}).items()}
        seeds = data.seeds(col[0])
        if all(s in values for s in seeds) and any(values[s] is None for s in seeds):
            terms.append(Term(experiment=col[0], gap="undecidable",
                              reason=f"{where}: a {record} row sums to zero"))
        else:
            terms.append(runs_term(col[0], [(f"{method} {where}", values)], seeds,
                                   lambda m: m[..., 0] - threshold))
        shown = mean_of({s: v for s, v in values.items() if v is not None}, seeds)
        texts.append(f"{where}: {num(shown)}" + (f" ({reason})" if reason else ""))
    return Outcome(head=f"{method} mean largest share of a final {record} row "
                   f"(threshold {threshold:g})", groups=[terms + gaps],
                   items=[*texts, *unknown])


def _row_peak(matrix: np.ndarray) -> float | None:
    import numpy as np

    totals = matrix.sum(axis=1)
    if (totals <= 0).any():
        return None
    return float(np.mean(matrix.max(axis=1) / totals))


def clusters_check(check: Check, data: Data, experiments: Sequence[str]) -> Outcome:
    """``clusters_used``: fewer distinct final cluster ids than distributions, per column.

    Reads the per-client ``cluster`` rows (Clustered FL's cluster id of each client)
    of the last round; the distributions are the distinct non-negative group ids of
    the run's clients. Margin: distributions - clusters (> 0 holds).
    """
    from pflrepro.store.results import CLUSTER

    cols, gaps, unknown = columns(data, experiments, check)
    several = len(experiments) > 1
    method = check.method or ""
    terms: list[Term] = []
    texts: list[str] = []
    for col in cols:
        where = data.label(col[0], col[1], several)
        got = (data.final_client_values(col[0], method, CLUSTER)
               if method in data.design[col[0]].methods else f"{method} is not in {col[0]}")
        reason = got if isinstance(got, str) else ""
        values: Runs = {}
        for seed, ids in ({} if isinstance(got, str) else got.get(col[1], {})).items():
            known = data.groups_of(col[0], method, col[1], seed)
            dists = len({g for c, g in known.items() if g >= 0 and c in ids})
            values[seed] = (float(len(set(ids.values()))), float(dists)) if dists else None
        seeds = data.seeds(col[0])
        if all(s in values for s in seeds) and any(values[s] is None for s in seeds):
            terms.append(Term(experiment=col[0], gap="undecidable",
                              reason=f"{where}: no distribution ids"))
        else:
            terms.append(runs_term(col[0], [(f"{method} {where}", values)], seeds,
                                   fewer_than, convert=lambda v: v))
        pairs = [values[s] for s in seeds if values.get(s) is not None]
        used = mean_of({i: p[0] for i, p in enumerate(pairs)}, list(range(len(pairs))))
        dists = mean_of({i: p[1] for i, p in enumerate(pairs)}, list(range(len(pairs))))
        texts.append(f"{where}: {num(used)} clusters at the end for {num(dists)} "
                     "distributions" + (f" ({reason})" if reason else ""))
    return Outcome(head=f"{method} final clusters", groups=[terms + gaps],
                   items=[*texts, *unknown])
