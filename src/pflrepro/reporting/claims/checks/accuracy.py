"""Accuracy checks, and the two checks that pair the runs of two experiments.

``compare``, ``above_all``, ``within``, ``trend``, ``across_experiments``; and
``communication_across`` (traffic, paired across experiments as accuracy is).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pflrepro.reporting.claims.checks.data import Data, Runs
from pflrepro.reporting.claims.checks.logic import (
    PERCENT,
    Outcome,
    Term,
    columns,
    mean_of,
    num,
    pct,
    runs_term,
)
from pflrepro.reporting.claims.parse import OPS, Check

if TYPE_CHECKING:
    import numpy as np


def accuracy_check(check: Check, data: Data, experiments: Sequence[str]) -> Outcome:
    """``compare``, ``above_all`` and ``within``: methods against methods, per column."""
    cols, gaps, unknown = columns(data, experiments, check)
    several = len(experiments) > 1
    sign, _ = OPS[check.op or ">"]

    def runs(method: str, col: tuple[str, str]) -> Runs:
        if method not in data.design[col[0]].methods:
            return {}
        return data.accuracy_runs(col[0], col[1], method, check.metric or "",
                                  check.round_fraction)

    def acc(method: str, col: tuple[str, str]) -> float | None:
        return mean_of(runs(method, col), data.seeds(col[0]))

    def label(col: tuple[str, str]) -> str:
        return data.label(col[0], col[1], several)

    def scale(col: tuple[str, str]) -> dict:
        """An accuracy term's tie (one test row of the column) and bounds (0 and 100 %)."""
        return {"tie": data.test_row(*col), "bounds": PERCENT}

    if check.type in ("compare", "above_all"):
        firsts = (check.a,) if check.type == "compare" else check.methods
        seconds = (check.b,) if check.type == "compare" else check.baselines
        slack = -check.tolerance if OPS[check.op or ">"][1] else check.tolerance

        def margin(m: np.ndarray) -> np.ndarray:
            return sign * (m[..., 0] - m[..., 1]) + slack
    else:  # within
        firsts, seconds = check.methods, (check.reference,)

        def margin(m: np.ndarray) -> np.ndarray:
            import numpy as np

            return check.tolerance - np.abs(m[..., 0] - m[..., 1])

    groups = []
    if check.pool == "mean":  # the methods' mean against the baselines' mean, per column
        k = len(firsts)

        def pooled(m: np.ndarray) -> np.ndarray:
            return sign * (m[..., :k].mean(axis=-1) - m[..., k:].mean(axis=-1)) + slack

        groups.append([runs_term(c[0], [(f"{name} {label(c)}", runs(name, c))
                                        for name in (*firsts, *seconds) if name],
                                 data.seeds(c[0]), pooled, **scale(c)) for c in cols] + gaps)
    pairs = ([] if check.pool == "mean"
             else [(f, s) for f in firsts for s in seconds if f and s])
    for first, second in pairs:
        groups.append([runs_term(c[0], [(f"{first} {label(c)}", runs(first, c)),
                                        (f"{second} {label(c)}", runs(second, c))],
                                 data.seeds(c[0]), margin, **scale(c)) for c in cols] + gaps)
    items: list[str] = []
    if check.pool == "mean":
        head = f"mean of {'/'.join(firsts)} vs mean of {', '.join(seconds)}"
        for col in cols:
            shown = []
            for names in (firsts, seconds):
                got = [v for m in names if m and (v := acc(m, col)) is not None]
                shown.append(pct(sum(got) / len(got)) if len(got) == len(names) else "n/a")
            items.append(f"{label(col)} {shown[0]} vs {shown[1]}")
    elif check.type == "above_all" and check.quantifier == "any":
        head = f"{'/'.join(firsts)} vs each of {', '.join(seconds)}, best column"
        for first in firsts:
            for second in seconds:
                known = [(a - b, c) for c in cols
                         if (a := acc(first, c)) is not None and (b := acc(second, c)) is not None]
                if known:
                    m, c = max(known, key=lambda mc: mc[0])
                    items.append(f"{second} {label(c)} {m:+.1f}")
    elif check.type == "above_all":
        head = f"{'/'.join(firsts)} vs best of {', '.join(seconds)}"
        for col in cols:
            known = [(v, b) for b in seconds if (v := acc(b, col)) is not None]
            best = f"{pct(max(known)[0])} ({max(known)[1]})" if known else "n/a"
            items.append(f"{label(col)} {'/'.join(pct(acc(m, col)) for m in firsts)} "
                         f"vs {best}")
    else:
        head = f"{'/'.join(firsts)} vs {seconds[0]}"
        for col in cols:
            items.append(f"{label(col)} {'/'.join(pct(acc(m, col)) for m in firsts)} "
                         f"vs {pct(acc(seconds[0], col))}")
    if check.quantifier == "mean":
        for first in firsts:
            for second in seconds:
                known = [a - b for c in cols
                         if (a := acc(first, c)) is not None and (b := acc(second, c)) is not None]
                if known:
                    items.append(f"{first} - {second} mean over {len(known)} columns "
                                 f"{sum(known) / len(known):+.1f}")
    items += [f"no runs of {m}" for m in (*firsts, *seconds)
              if cols and all(acc(m, c) is None for c in cols)]
    return Outcome(head=head, groups=groups, items=items + unknown)


def trend_check(check: Check, data: Data, experiments: Sequence[str]) -> Outcome:
    """``trend``: a method's accuracy with the most distributions against the fewest."""
    terms: list[Term] = []
    texts: list[str] = []
    method = check.method or ""
    for experiment in experiments:
        if experiment not in data.design or data.frame(experiment) is None:
            text = (f"{experiment} is not in the config" if experiment not in data.design
                    else f"no results for {experiment}")
            terms.append(Term(experiment=experiment, gap="missing", reason=text))
            texts.append(text)
            continue
        parts = data.design[experiment].partitions
        counts = {p: data.distributions(experiment, p) for p in parts}
        name = data.experiment_labels.get(experiment, experiment)
        if any(n == 0 for n in counts.values()):
            text = f"{name}: a column without runs with distribution ids"
            terms.append(Term(experiment=experiment, gap="missing", reason=text))
            texts.append(text)
            continue
        if len(set(counts.values())) < 2:
            text = f"{name}: fewer than two numbers of distributions"
            terms.append(Term(experiment=experiment, gap="undecidable", reason=text))
            texts.append(text)
            continue
        few = min(counts, key=lambda p: counts[p])
        many = max(counts, key=lambda p: counts[p])
        cells = [(f"{method} {data.label(experiment, p, False)}",
                  data.accuracy_runs(experiment, p, method, check.metric or "",
                                     check.round_fraction)
                  if method in data.design[experiment].methods else {}) for p in (few, many)]
        sign = 1.0 if check.direction == "decreasing" else -1.0
        tie = max((t for p in (few, many) if (t := data.test_row(experiment, p))),
                  default=None)
        terms.append(runs_term(experiment, cells, data.seeds(experiment),
                                lambda m, s=sign: s * (m[..., 0] - m[..., 1]), tie=tie,
                                bounds=PERCENT))
        lo, hi = (mean_of(c[1], data.seeds(experiment)) for c in cells)
        texts.append(f"{name}: {counts[few]} distributions {pct(lo)} -> "
                     f"{counts[many]} distributions {pct(hi)}")
    return Outcome(head=f"{method} {check.metric}", groups=[terms], items=texts)



def across_check(check: Check, data: Data, experiments: Sequence[str]) -> Outcome:
    """Two experiments whose runs pair by seed pair: the two checks below.

    ``across_experiments``: |method in experiments[0] - reference in experiments[1]|
    (accuracy) <= tolerance; ``communication_across``: the reference's traffic in
    experiments[1] over the method's in experiments[0] ``op`` factor.
    """
    import numpy as np

    first, second = experiments
    method, reference = check.method or "", check.reference or check.method or ""
    head = f"{method} ({first}) vs {reference} ({second})"
    if check.type == "communication_across":
        head = f"scalars communicated (total per run): {head}"
    for name in experiments:
        if name not in data.design or data.frame(name) is None:
            text = (f"{name} is not in the config" if name not in data.design
                    else f"no results for {name}")
            return Outcome(head=head, groups=[[Term(experiment=name, gap="missing",
                                                      reason=text)]], items=[text])
    seeds = data.seeds(first)
    if set(seeds) != set(data.seeds(second)):
        text = (f"{first} and {second} have different seed pairs, so their runs cannot "
                "be paired")
        return Outcome(head=head, groups=[[Term(experiment=first, gap="undecidable",
                                                  reason=text)]], items=[text])
    key = f"{first} + {second}"  # one bootstrap draw: the runs pair across experiments
    tolerance, factor = check.tolerance, float(check.factor or 1.0)
    traffic = check.type == "communication_across"
    show = num if traffic else pct

    def runs(experiment: str, name: str, partition: str) -> Runs:
        design = data.design[experiment]
        if name not in design.methods or partition not in design.partitions:
            return {}
        if traffic:
            return data.traffic_runs(experiment, partition, name)
        return data.accuracy_runs(experiment, partition, name, check.metric or "",
                                  check.round_fraction)

    def margin(m: np.ndarray) -> np.ndarray:
        if traffic:
            return m[..., 1] / m[..., 0] - factor
        return tolerance - np.abs(m[..., 0] - m[..., 1])

    terms: list[Term] = []
    texts: list[str] = []
    for part in data.design[first].partitions:
        label = data.label(first, part, False)
        cells = [(f"{method} {first} {label}", runs(first, method, part)),
                 (f"{reference} {second} {label}", runs(second, reference, part))]
        extra: dict = {}
        if not traffic:  # one test row of the coarser of the two columns; 0 to 100 %
            ties = [t for e in (first, second) if (t := data.test_row(e, part))]
            extra = {"tie": max(ties, default=None), "bounds": PERCENT}
        term = runs_term(key, cells, seeds, margin, **extra)
        if traffic and not term.gap and (term.values[:, 0] <= 0).any():  # type: ignore[index]
            term = Term(experiment=key, gap="undecidable",
                        reason=f"{label}: {method} communicated nothing in a run, so no "
                        "ratio is defined")
        terms.append(term)
        a, b = (mean_of(c[1], seeds) for c in cells)
        ratio = f" = {b / a:.4g}x" if traffic and a and b is not None else ""
        texts.append(f"{label} {show(a)} vs {show(b)}{ratio}"
                     + ("" if part in data.design[second].partitions
                        else f" ({part} is not a column of {second})"))
    return Outcome(head=head, groups=[terms], items=texts)

