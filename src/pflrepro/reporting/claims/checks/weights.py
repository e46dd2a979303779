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
    fewer_than,
    num,
    runs_term,
)
from pflrepro.reporting.claims.parse import OPS, Check


def _mates(run: WeightRun) -> dict[int, int]:
    """Client id -> number of other clients of its distribution (clients with an id only)."""
    groups = {int(c): run.groups.get(int(c), -1) for c in run.clients}
    return {c: sum(1 for d, h in groups.items() if h == g and d != c)
            for c, g in groups.items() if g >= 0}


def _same_mass(run: WeightRun) -> float | None:
    """Mean over clients of the share of its peer weight (itself excluded) on its distribution.

    Only clients with a group-mate count: a client alone in its distribution has no
    same-distribution peer to put weight on (FedeRiCo's Fig. 3: client 0 uses only
    itself), so its share says nothing about the claim; its self weight is the
    ``self_weight`` check. A client with a group-mate but no weight on any peer
    (identity weights: no collaboration) has share 0. ``None`` without such a client.
    """
    import numpy as np

    final = run.final
    mates = _mates(run)
    shares = []
    for i, client in enumerate(run.clients):
        if mates.get(int(client), 0) == 0:
            continue
        group = run.groups[int(client)]
        others = np.array([p != client for p in run.peers])
        same = np.array([run.groups.get(int(p), -1) == group for p in run.peers]) & others
        total = final[i][others].sum()
        shares.append(final[i][same].sum() / total if total > 0 else 0.0)
    return float(np.mean(shares)) if shares else None


def _lone_self(run: WeightRun) -> float | None:
    """Mean share of its final weight on itself of the clients alone in their distribution.

    ``None`` when the run has no such client (or one whose weights are all zero).
    """
    import numpy as np

    final = run.final
    peers = [int(p) for p in run.peers]
    shares = []
    for i, client in enumerate(run.clients):
        if _mates(run).get(int(client), -1) != 0 or int(client) not in peers:
            continue
        total = final[i].sum()
        if total <= 0:
            return None
        shares.append(final[i][peers.index(int(client))] / total)
    return float(np.mean(shares)) if shares else None


def _support(threshold: float) -> Any:
    """Per run: (mean number of models a client weights >= threshold, mean group size).

    The group size counts the client itself: the models of its own distribution are
    the few it needs. Clients without a distribution id are left out.
    """
    def stat(run: WeightRun) -> tuple[float, float] | None:
        import numpy as np

        mates = _mates(run)
        rows = [(float((run.final[i] >= threshold).sum()), 1.0 + mates[int(c)])
                for i, c in enumerate(run.clients) if int(c) in mates]
        if not rows:
            return None
        return float(np.mean([r[0] for r in rows])), float(np.mean([r[1] for r in rows]))

    return stat


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
    "weight_mass": "no client with a distribution id and a group-mate",
    "self_weight": "no client alone in its distribution in any run",
    "weight_support": "no client with a distribution id",
    "group_contrast": "no two clients of one distribution, or none of two",
    "peak": "a zero weight row",
    "variation": "weights of a single round",
    "same_share": "no client with a distribution id and a group-mate",
    "components_used": "no distribution ids",
}
#: A peak weight this close to 1 is one-hot.
_ONE_HOT = 1e-9
#: (floor, ceiling) of each ``weight_compare`` statistic: shares are in [0, 1], a peak
#: share at most 1 (its floor, 1 / peers, depends on the run), a variation at least 0.
_BOUNDS: dict[str, tuple[float | None, float | None]] = {
    "same_share": (0.0, 1.0), "peak": (None, 1.0), "variation": (0.0, None)}


def _contrast_margin(check: Check) -> Any:
    """``group_contrast``'s margin on (within, across) means.

    The smaller of ``within - min_ratio * across`` (the ratio) and ``within - across -
    min_gap`` (the gap must be material: a near-identity weight matrix has a large ratio
    of tiny weights).
    """
    import numpy as np

    ratio, floor = float(check.min_ratio or 1.0), float(check.min_gap or 0.0)

    def margin(m: np.ndarray) -> np.ndarray:
        return np.minimum(m[..., 0] - ratio * m[..., 1], m[..., 0] - m[..., 1] - floor)

    return margin


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
             undefined: str, convert: Any = None, partial: bool = False,
             **extra: Any) -> Term:
        """A column's term.

        ``partial``: only the runs on which the statistic is defined; ``extra``: the
        term's ``bounds``.
        """
        seeds = data.seeds(col[0])
        complete = all(s in runs for _, runs in cells for s in seeds)
        if complete and partial:
            # e.g. lone clients exist in some splits only: the runs that have them,
            # resampled on their own (their own bootstrap draw)
            kept = tuple(s for s in seeds if all(runs[s] is not None for _, runs in cells))
            if kept:
                return runs_term(f"{col[0]} · {col[1]} · {check.type}", cells, kept,
                                 margin, convert, **extra)
        if complete and any(runs[s] is None for _, runs in cells for s in seeds):
            return Term(experiment=col[0], gap="undecidable",
                        reason=f"{data.label(col[0], col[1], several)}: {undefined}")
        return runs_term(col[0], cells, seeds, margin, convert, **extra)

    def mean(runs: Runs, col: tuple[str, str], at: int | None = None) -> float | None:
        got = [v if at is None else v[at] for s, v in runs.items()
               if s in data.seeds(col[0]) and v is not None]
        return float(np.mean(got)) if got else None

    terms: list[Term] = []
    texts: list[str] = []
    for col in cols:
        where = data.label(col[0], col[1], several)
        if check.type == "weight_compare":
            stat = {"peak": _peak, "variation": _variation,
                    "same_share": _same_mass}[check.statistic or ""]
            undefined = UNDEFINED[check.statistic or ""]
            (va, ra), (vb, rb) = (column(m, col, stat) for m in (check.a, check.b))
            sign = OPS[check.op or ">"][0]
            t = term(col, [(f"{check.a} {where}", va), (f"{check.b} {where}", vb)],
                     lambda m, s=sign: s * (m[..., 0] - m[..., 1]), undefined,
                     bounds=_BOUNDS[check.statistic or ""])
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
                "components_used": _used, "self_weight": _lone_self,
                "weight_support": _support(float(check.threshold or 0.0))}[check.type]
        values, reason = column(check.method, col, stat)
        name = f"{check.method} {where}"
        undefined = UNDEFINED[check.type]
        if check.type == "weight_mass":
            threshold = float(check.threshold or 0.0)
            terms.append(term(col, [(name, values)], lambda m, t=threshold: m[..., 0] - t,
                              undefined))
            texts.append(f"{where}: {num(mean(values, col))}" + (f" ({reason})" if reason else ""))
        elif check.type == "self_weight":
            threshold = float(check.threshold or 0.0)
            terms.append(term(col, [(name, values)], lambda m, t=threshold: m[..., 0] - t,
                              undefined, partial=True))
            seeds = data.seeds(col[0])
            have = sum(values.get(s) is not None for s in seeds)
            texts.append(f"{where}: {num(mean(values, col))} in the {have} of {len(seeds)} "
                         "runs with a client alone in its distribution"
                         + (f" ({reason})" if reason else ""))
        elif check.type == "weight_support":
            terms.append(term(col, [(name, values)], lambda m: m[..., 1] - m[..., 0], undefined,
                              convert=lambda v: v))
            used, size = mean(values, col, 0), mean(values, col, 1)
            texts.append(f"{where}: {num(used)} models used for a distribution of "
                         f"{num(size)} clients" + (f" ({reason})" if reason else ""))
        elif check.type == "group_contrast":
            terms.append(term(col, [(name, values)], _contrast_margin(check), undefined,
                              convert=lambda v: v))
            within, across = mean(values, col, 0), mean(values, col, 1)
            shown = ("n/a" if within is None or across is None
                     else "inf" if across == 0 else f"{within / across:.3g}")
            gap = "n/a" if within is None or across is None else num(within - across)
            texts.append(f"{where}: within {num(within)} vs across {num(across)}, ratio {shown}, "
                         f"gap {gap}" + (f" ({reason})" if reason else ""))
        else:  # components_used
            terms.append(term(col, [(name, values)], fewer_than, undefined,
                              convert=lambda v: v))
            used, dists = mean(values, col, 0), mean(values, col, 1)
            texts.append(f"{where}: {num(used)} components used for {num(dists)} distributions"
                         + (f" ({reason})" if reason else ""))
    if check.type == "self_weight":
        # a column none of whose runs has a lone client says nothing about the claim
        # (e.g. 8 clients in 2 distributions): left out while another column has one
        decided = [t for t in terms if t.gap != "undecidable"]
        terms = decided or terms
    if check.type == "weight_mass":
        head = (f"{check.method} share of peer weight on same-distribution peers "
                f"(threshold {check.threshold:g})")
    elif check.type == "self_weight":
        head = (f"{check.method} self weight of clients alone in their distribution "
                f"(threshold {check.threshold:g})")
    elif check.type == "weight_support":
        head = f"{check.method} models with weight >= {check.threshold:g}"
    elif check.type == "weight_compare":
        head = f"{check.statistic} weight {check.a} vs {check.b}"
    elif check.type == "group_contrast":
        head = (f"{check.method} weight (min ratio {check.min_ratio:g}, "
                f"min gap {check.min_gap:g})")
    else:
        head = f"{check.method} weight"
    return Outcome(head=head, groups=[terms + gaps], items=[*texts, *unknown])



def distance_check(check: Check, data: Data, experiments: Sequence[str]) -> Outcome:
    """``weight_distance``: mean |w_ij of a - w_ij of b| at the final round <= tolerance.

    The runs of ``a`` and ``b`` with the same seed pair (same split, same clients) are
    compared entry by entry; the per-run distances are averaged over runs.
    """
    import numpy as np

    cols, gaps, unknown = columns(data, experiments, check)
    several = len(experiments) > 1
    a, b, tolerance = check.a or "", check.b or "", float(check.tolerance)
    terms: list[Term] = []
    texts: list[str] = []
    for col in cols:
        where = data.label(col[0], col[1], several)
        got, reasons = [], []
        for method in (a, b):
            runs = (data.weight_runs(col[0], method) if method in data.design[col[0]].methods
                    else f"{method} is not in {col[0]}")
            if isinstance(runs, str):
                reasons.append(runs)
                runs = {}
            got.append(runs.get(col[1], {}))
        distance: Runs = {}
        for seed, ra in got[0].items():
            rb = got[1].get(seed)
            if rb is not None:
                same = (np.array_equal(ra.clients, rb.clients)
                        and np.array_equal(ra.peers, rb.peers))
                distance[seed] = (float(np.abs(ra.final - rb.final).mean()) if same
                                  else None)
        seeds = data.seeds(col[0])
        if any(distance.get(s, 0.0) is None for s in seeds):
            terms.append(Term(experiment=col[0], gap="undecidable",
                              reason=f"{where}: the runs of {a} and {b} have different "
                              "clients"))
        else:
            terms.append(runs_term(col[0], [(f"{a} vs {b} {where}", distance)], seeds,
                                   lambda m: tolerance - m[..., 0]))
        shown = [v for s, v in distance.items() if s in seeds and v is not None]
        texts.append(f"{where}: {num(float(np.mean(shown)) if shown else None)}"
                     + (f" ({'; '.join(reasons)})" if reasons else ""))
    return Outcome(head=f"mean |final weight {a} - {b}| (tolerance {tolerance:g})",
                   groups=[terms + gaps], items=[*texts, *unknown])
