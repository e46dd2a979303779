"""Client-weight checks: weight_mass, group_contrast, weight_compare, components_used.

Each reads the final-round (or every round's) client x peer matrices of a method's
recorded ``weight`` rows and reduces a run to a statistic; a statistic that is not
defined on a run (``None``) makes the column undecidable.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pflrepro.reporting.claims.checks.data import Data, Runs, WeightRun
from pflrepro.reporting.claims.checks.logic import (
    Outcome,
    Term,
    columns,
    num,
    runs_term,
)
from pflrepro.reporting.claims.parse import OPS, Check


def _same_mass(run: WeightRun) -> float | None:
    """Mean over clients of the share of its peer weight (itself excluded) on its distribution.

    A client with no weight on any peer (identity weights: no collaboration) has share
    0: it puts nothing on a same-distribution peer. ``None`` without distribution ids.
    """
    import numpy as np

    final = run.final
    shares = []
    for i, client in enumerate(run.clients):
        group = run.groups.get(int(client), -1)
        if group < 0:
            continue
        others = np.array([p != client for p in run.peers])
        same = np.array([run.groups.get(int(p), -1) == group for p in run.peers]) & others
        total = final[i][others].sum()
        shares.append(final[i][same].sum() / total if total > 0 else 0.0)
    return float(np.mean(shares)) if shares else None


def _contrast(run: WeightRun) -> tuple[float, float] | None:
    import numpy as np

    final = run.final
    within, across = [], []
    for i, client in enumerate(run.clients):
        gi = run.groups.get(int(client), -1)
        for j, peer in enumerate(run.peers):
            gj = run.groups.get(int(peer), -1)
            if gi < 0 or gj < 0 or peer == client:
                continue
            (within if gi == gj else across).append(final[i, j])
    if not within or not across:
        return None
    return float(np.mean(within)), float(np.mean(across))


def _peak(run: WeightRun) -> float | None:
    import numpy as np

    totals = run.final.sum(axis=1)
    if (totals <= 0).any():
        return None
    return float(np.mean(run.final.max(axis=1) / totals))


def _variation(run: WeightRun) -> float | None:
    import numpy as np

    if len(run.rounds) < 2:
        return None
    return float(np.abs(np.diff(run.values, axis=0)).mean(axis=(1, 2)).sum())


def _used(run: WeightRun) -> tuple[float, int] | None:
    import numpy as np

    distributions = len({g for c, g in run.groups.items() if g >= 0 and c in set(run.clients)})
    if distributions == 0:
        return None
    return float(len(np.unique(run.final.argmax(axis=1)))), distributions




#: Why a weight statistic is undefined for a run.
UNDEFINED = {
    "weight_mass": "no client with a distribution id",
    "group_contrast": "no two clients of one distribution, or none of two",
    "peak": "a zero weight row",
    "variation": "weights of a single round",
    "components_used": "no distribution ids",
    "gate_alignment": "no two clients of one distribution, or none of two",
}
#: A peak weight this close to 1 is one-hot.
_ONE_HOT = 1e-9


def weight_check(check: Check, data: Data, experiments: Sequence[str]) -> Outcome:
    """The weight checks of this module (see its docstring), per column."""
    import numpy as np

    cols, gaps, unknown = columns(data, experiments, check)
    several = len(experiments) > 1

    def column(method: str | None, col: tuple[str, str], stat: Any) -> tuple[Runs, str]:
        """Per-run values of ``stat`` in a column by seed pair ({} and a reason: none)."""
        if method not in data.design[col[0]].methods:
            return {}, f"{method} is not in {col[0]}"
        got = data.weight_runs(col[0], method or "")
        if isinstance(got, str):
            return {}, got
        items = got.get(col[1])
        if not items:
            return {}, f"no weight rows of {method}"
        return {s: stat(r) for s, r in items.items()}, ""

    def term(col: tuple[str, str], cells: list[tuple[str, Runs]], margin: Any,
             undefined: str, convert: Any = None) -> Term:
        seeds = data.seeds(col[0])
        complete = all(s in runs for _, runs in cells for s in seeds)
        if complete and any(runs[s] is None for _, runs in cells for s in seeds):
            return Term(experiment=col[0], gap="undecidable",
                         reason=f"{data.label(col[0], col[1], several)}: {undefined}")
        return runs_term(col[0], cells, seeds, margin, convert)

    def mean(runs: Runs, col: tuple[str, str], at: int | None = None) -> float | None:
        got = [v if at is None else v[at] for s, v in runs.items()
               if s in data.seeds(col[0]) and v is not None]
        return float(np.mean(got)) if got else None

    terms: list[Term] = []
    texts: list[str] = []
    for col in cols:
        where = data.label(col[0], col[1], several)
        if check.type == "weight_compare":
            stat = _peak if check.statistic == "peak" else _variation
            undefined = UNDEFINED[check.statistic or ""]
            (va, ra), (vb, rb) = (column(m, col, stat) for m in (check.a, check.b))
            sign = OPS[check.op or ">"][0]
            t = term(col, [(f"{check.a} {where}", va), (f"{check.b} {where}", vb)],
                     lambda m, s=sign: s * (m[..., 0] - m[..., 1]), undefined)
            xa, xb = mean(va, col), mean(vb, col)
            if not t.gap and check.statistic == "peak" and sign > 0:
                # a peak is at most 1 (one-hot): b already there leaves a no room above
                assert t.values is not None  # runs x (a, b)
                if (t.values[:, 1] >= 1 - _ONE_HOT).all():
                    t = Term(experiment=col[0], gap="undecidable",
                              reason=f"{where}: the peak weight of {check.b} is already 1 "
                              f"(one-hot) in every run, so {check.a}'s cannot be higher")
            terms.append(t)
            reasons = "; ".join(r for r in dict.fromkeys((ra, rb)) if r)
            texts.append(f"{where}: {num(xa)} vs {num(xb)}" + (f" ({reasons})" if reasons else ""))
            continue
        stat = {"weight_mass": _same_mass, "group_contrast": _contrast,
                "components_used": _used}[check.type]
        values, reason = column(check.method, col, stat)
        name = f"{check.method} {where}"
        undefined = UNDEFINED[check.type]
        if check.type == "weight_mass":
            threshold = float(check.threshold or 0.0)
            terms.append(term(col, [(name, values)], lambda m, t=threshold: m[..., 0] - t,
                              undefined))
            texts.append(f"{where}: {num(mean(values, col))}" + (f" ({reason})" if reason else ""))
        elif check.type == "group_contrast":
            ratio = float(check.min_ratio or 1.0)
            terms.append(term(col, [(name, values)],
                              lambda m, r=ratio: m[..., 0] - r * m[..., 1], undefined,
                              convert=lambda v: v))
            within, across = mean(values, col, 0), mean(values, col, 1)
            shown = ("n/a" if within is None or across is None
                     else "inf" if across == 0 else f"{within / across:.3g}")
            texts.append(f"{where}: within {num(within)} vs across {num(across)}, ratio {shown}"
                         + (f" ({reason})" if reason else ""))
        else:  # components_used
            terms.append(term(col, [(name, values)], lambda m: m[..., 1] - m[..., 0],
                              undefined, convert=lambda v: v))
            used, dists = mean(values, col, 0), mean(values, col, 1)
            texts.append(f"{where}: {num(used)} components used for {num(dists)} distributions"
                         + (f" ({reason})" if reason else ""))
    if check.type == "weight_mass":
        head = (f"{check.method} share of peer weight on same-distribution peers "
                f"(threshold {check.threshold:g})")
    elif check.type == "weight_compare":
        head = f"{check.statistic} weight {check.a} vs {check.b}"
    elif check.type == "group_contrast":
        head = f"{check.method} weight (min ratio {check.min_ratio:g})"
    else:
        head = f"{check.method} weight"
    return Outcome(head=head, groups=[terms + gaps], items=[*texts, *unknown])

