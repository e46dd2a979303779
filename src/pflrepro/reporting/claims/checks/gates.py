"""FedMix's gates: ``gate_alignment`` over the recorded per-client mean gates (``gate_mass``)."""

from __future__ import annotations

from collections.abc import Sequence

from pflrepro.reporting.claims.checks.data import Data, Runs, WeightRun
from pflrepro.reporting.claims.checks.logic import (
    Outcome,
    Term,
    columns,
    mean_of,
    num,
    runs_term,
)
from pflrepro.reporting.claims.checks.weights import UNDEFINED
from pflrepro.reporting.claims.parse import OPS, Check


def _alignment(run: WeightRun) -> float | None:
    """Gate alignment of a run (``None`` without both kinds of client pair).

    The mean similarity ``1 - |g_i - g_j|_1 / 2`` of the final gates (rows normalised
    to sum 1) of two clients of one distribution minus that of two clients of
    different ones.
    """
    import numpy as np

    final = run.final
    totals = final.sum(axis=1, keepdims=True)
    if (totals <= 0).any():
        return None
    gates = final / totals
    within, across = [], []
    for i, ci in enumerate(run.clients):
        gi = run.groups.get(int(ci), -1)
        for j in range(i + 1, len(run.clients)):
            gj = run.groups.get(int(run.clients[j]), -1)
            if gi < 0 or gj < 0:
                continue
            sim = 1.0 - 0.5 * float(np.abs(gates[i] - gates[j]).sum())
            (within if gi == gj else across).append(sim)
    if not within or not across:
        return None
    return float(np.mean(within) - np.mean(across))



def gate_check(check: Check, data: Data, experiments: Sequence[str]) -> Outcome:
    """``gate_alignment``: a's gate alignment ``op`` b's, per column (see the module doc)."""
    from pflrepro.algorithms.fedmix import GATE_MASS

    cols, gaps, unknown = columns(data, experiments, check)
    several = len(experiments) > 1
    sign = OPS[check.op or ">"][0]
    terms: list[Term] = []
    texts: list[str] = []
    for col in cols:
        where = data.label(col[0], col[1], several)
        cells: list[tuple[str, Runs]] = []
        reasons: list[str] = []
        for method in (check.a, check.b):
            runs: Runs = {}
            if method not in data.design[col[0]].methods:
                reasons.append(f"{method} is not in {col[0]}")
            else:
                got = data.weight_runs(col[0], method or "", GATE_MASS)
                if isinstance(got, str):
                    reasons.append(got)
                else:
                    runs = {s: _alignment(r) for s, r in got.get(col[1], {}).items()}
                    if not runs:
                        reasons.append(f"no {GATE_MASS} rows of {method}")
            cells.append((f"{method} {where}", runs))
        seeds = data.seeds(col[0])
        complete = all(s in runs for _, runs in cells for s in seeds)
        if complete and any(runs[s] is None for _, runs in cells for s in seeds):
            terms.append(Term(experiment=col[0], gap="undecidable",
                               reason=f"{where}: {UNDEFINED['gate_alignment']}"))
        else:
            terms.append(runs_term(col[0], cells, seeds,
                                    lambda m, s=sign: s * (m[..., 0] - m[..., 1])))
        xa, xb = (mean_of({k: v for k, v in runs.items() if v is not None}, seeds)
                  for _, runs in cells)
        texts.append(f"{where}: {num(xa)} vs {num(xb)}"
                     + (f" ({'; '.join(reasons)})" if reasons else ""))
    return Outcome(head=f"gate alignment {check.a} vs {check.b}", groups=[terms + gaps],
                    items=[*texts, *unknown])

