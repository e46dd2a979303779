"""Claims checked against an aggregate: per-run numbers, margins, bootstrap verdicts.

:func:`evaluate_claims` reads the runs each check needs from the aggregate
(``_Data``), computes the check's terms (per-run values paired by seed pair), their
margins and a paired percentile bootstrap interval (:func:`decide`), and returns one
row per claim and experiment (:data:`~pflrepro.reporting.claims.parse.COLUMNS`). The
rules (margins, quantifiers, verdicts): the package docstring,
:mod:`pflrepro.reporting.claims`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pflrepro.config import SCALES
from pflrepro.reporting.claims.parse import (
    ACCURACY_METRICS,
    COLUMNS,
    OPS,
    Check,
    Claim,
    Design,
    row_groups,
)

if TYPE_CHECKING:  # imported where used, as the rest of the reporting code
    import numpy as np
    import pandas as pd

# --------------------------------------------------------------------------- data
@dataclass
class _WeightRun:
    """The weight rows of one run as a (rounds × clients × peers) array."""

    rounds: np.ndarray
    clients: np.ndarray
    peers: np.ndarray
    values: np.ndarray
    #: client id -> distribution id (``-1``: none).
    groups: dict[int, int]

    @property
    def final(self) -> np.ndarray:
        return self.values[-1]


#: A cell's per-run values: (split seed, training seed) -> value.
Runs = dict[tuple[int, int], Any]


@dataclass
class _Data:
    """The aggregate, restricted to the design and split by experiment (cached)."""

    agg: pd.DataFrame | None
    design: Mapping[str, Design]
    labels: Mapping[str, str] = field(default_factory=dict)
    experiment_labels: Mapping[str, str] = field(default_factory=dict)
    _frames: dict[str, pd.DataFrame | None] = field(default_factory=dict)
    _cells: dict[tuple[Any, ...], dict[tuple[str, str], Runs]] = field(default_factory=dict)
    _groups: dict[str, dict[tuple[Any, ...], dict[int, int]]] = field(default_factory=dict)
    _weights: dict[tuple[str, str, str],
                   dict[str, dict[tuple[int, int], _WeightRun]] | str] = field(
        default_factory=dict)
    _traffic: dict[str, dict[tuple[str, str], Runs]] = field(default_factory=dict)

    def frame(self, experiment: str) -> pd.DataFrame | None:
        """The rows of ``experiment``'s designed runs, or ``None`` when it has none.

        Runs outside the design (another partition, method or seed pair) are left out:
        a claim reads the runs its config asks for, no others.
        """
        import pandas as pd

        if experiment not in self._frames:
            rows = None
            design = self.design.get(experiment)
            if design is not None and self.agg is not None and not self.agg.empty:
                rows = self.agg[self.agg["experiment"] == experiment]
                wanted = set(design.seeds)
                seeded = [(int(a), int(b)) in wanted for a, b in
                          zip(rows["split_seed"], rows["train_seed"], strict=True)]
                keep = (rows["partition"].astype(str).isin(design.partitions)
                        & rows["method"].astype(str).isin(design.methods)
                        & pd.Series(seeded, index=rows.index, dtype=bool))
                rows = rows[keep]
                rows = None if rows.empty else rows.reset_index(drop=True)
            self._frames[experiment] = rows
        return self._frames[experiment]

    def seeds(self, experiment: str) -> tuple[tuple[int, int], ...]:
        return self.design[experiment].seeds

    def run_groups(self, experiment: str) -> dict[tuple[Any, ...], dict[int, int]]:
        """Per run (a tuple of the run keys): client id -> distribution id."""
        from pflrepro.reporting.accuracy import RUN_KEYS
        from pflrepro.results import GROUP

        if experiment not in self._groups:
            frame = self.frame(experiment)
            out: dict[tuple[Any, ...], dict[int, int]] = {}
            if frame is not None:
                rows = frame[(frame["metric"] == GROUP) & (frame["client"] >= 0)
                             & (frame["peer"] < 0)]
                for key, run in rows.groupby(list(RUN_KEYS), sort=True, dropna=False):
                    out[tuple(key)] = {int(c): int(g) for c, g in
                                       zip(run["client"], run["value"], strict=True)}
            self._groups[experiment] = out
        return self._groups[experiment]

    def distributions(self, experiment: str, partition: str) -> int:
        """Distinct non-negative group ids of a column's runs (the most over its runs)."""
        from pflrepro.reporting.accuracy import RUN_KEYS

        at = RUN_KEYS.index("partition")
        counts = [len({g for g in groups.values() if g >= 0})
                  for key, groups in self.run_groups(experiment).items()
                  if str(key[at]) == partition]
        return max(counts, default=0)

    def label(self, experiment: str, partition: str, several: bool) -> str:
        """Display label of a column (with its experiment's when a row spans several)."""
        text = self.labels.get(partition, partition)
        if several:
            text = f"{self.experiment_labels.get(experiment, experiment)} · {text}"
        return text

    def accuracy_runs(self, experiment: str, partition: str, method: str, metric: str,
                      round_fraction: float | None) -> Runs:
        """A cell's per-run accuracy (percent) by seed pair; empty without runs."""
        key = (experiment, metric, round_fraction)
        if key not in self._cells:
            self._cells[key] = self._accuracy_cells(experiment, metric, round_fraction)
        return self._cells[key].get((method, partition), {})

    def _accuracy_cells(self, experiment: str, metric: str,
                        round_fraction: float | None) -> dict[tuple[str, str], Runs]:
        from pflrepro.reporting.accuracy import (
            RUN_KEYS,
            run_accuracies,
            weighted_accuracy_per_round,
        )
        from pflrepro.reporting.tables import accuracy_table

        frame = self.frame(experiment)
        if frame is None:
            return {}
        spec = ACCURACY_METRICS[metric]
        if spec is not None:  # the per-run numbers whose means are the table's cells
            table_metric, name = spec
            accuracy_table(frame, metric=table_metric, columns=("partition",))  # its checks
            runs = run_accuracies(frame, table_metric)
            values = runs[name]
        else:
            per_round = weighted_accuracy_per_round(frame)
            keys = list(RUN_KEYS)
            last = per_round.groupby(keys, dropna=False, sort=False)["round"].transform("max")
            due = per_round[per_round["round"] >= last * float(round_fraction or 0.0)]
            runs = due.sort_values("round").groupby(keys, dropna=False, sort=False).head(1)
            values = runs["weighted_accuracy"]
        out: dict[tuple[str, str], Runs] = {}
        for m, p, s, t, v in zip(runs["method"], runs["partition"], runs["split_seed"],
                                 runs["train_seed"], values, strict=True):
            out.setdefault((str(m), str(p)), {})[(int(s), int(t))] = float(v) * 100.0
        return out

    def traffic_runs(self, experiment: str, partition: str, method: str) -> Runs:
        """A cell's per-run total of scalars sent and received, by seed pair.

        The total is up + down over every client and round; a run that logged no
        traffic is absent from the result (so its cell is missing).
        """
        from pflrepro.reporting.accuracy import RUN_KEYS
        from pflrepro.results import COMM_DOWN, COMM_UP

        if experiment not in self._traffic:
            out: dict[tuple[str, str], Runs] = {}
            frame = self.frame(experiment)
            if frame is not None:
                rows = frame[frame["metric"].isin([COMM_UP, COMM_DOWN])]
                at = {k: RUN_KEYS.index(k)
                      for k in ("method", "partition", "split_seed", "train_seed")}
                for key, total in rows.groupby(list(RUN_KEYS), sort=True,
                                               dropna=False)["value"].sum().items():
                    cell = (str(key[at["method"]]), str(key[at["partition"]]))
                    seed = (int(key[at["split_seed"]]), int(key[at["train_seed"]]))
                    out.setdefault(cell, {})[seed] = float(total)
            self._traffic[experiment] = out
        return self._traffic[experiment].get((method, partition), {})

    def weight_runs(self, experiment: str, method: str, metric: str | None = None,
                    ) -> dict[str, dict[tuple[int, int], _WeightRun]] | str:
        """Per partition and seed pair, ``method``'s matrices of ``metric``; or a reason.

        ``metric``: the client weights (``weight``, the default) or FedMix's
        ``gate_mass`` (client x expert), one matrix per round.
        """
        from pflrepro.results import WEIGHT

        key = (experiment, method, metric or WEIGHT)
        if key not in self._weights:
            self._weights[key] = self._weight_runs(experiment, method, metric or WEIGHT)
        return self._weights[key]

    def _weight_runs(self, experiment: str, method: str,
                     metric: str) -> dict[str, dict[tuple[int, int], _WeightRun]] | str:
        import numpy as np

        from pflrepro.reporting.accuracy import RUN_KEYS

        frame = self.frame(experiment)
        if frame is None:
            return f"no results for {experiment}"
        rows = frame[(frame["method"] == method) & (frame["metric"] == metric)
                     & (frame["client"] >= 0) & (frame["peer"] >= 0)]
        if rows.empty:
            return f"no {metric} rows of {method}"
        groups = self.run_groups(experiment)
        out: dict[str, dict[tuple[int, int], _WeightRun]] = {}
        at = {k: RUN_KEYS.index(k) for k in ("partition", "split_seed", "train_seed")}
        for key, run in rows.groupby(list(RUN_KEYS), sort=True, dropna=False):
            rounds, r_at = np.unique(run["round"].to_numpy(), return_inverse=True)
            clients, c_at = np.unique(run["client"].to_numpy(), return_inverse=True)
            peers, p_at = np.unique(run["peer"].to_numpy(), return_inverse=True)
            values = np.full((len(rounds), len(clients), len(peers)), np.nan)
            values[r_at, c_at, p_at] = run["value"].to_numpy(dtype=float)
            if len(run) != values.size or np.isnan(values).any():
                raise ValueError(f"claims: the weight rows of {method} in a run of "
                                 f"{experiment} are not one full matrix per round "
                                 "(duplicates or gaps)")
            seed = (int(key[at["split_seed"]]), int(key[at["train_seed"]]))
            out.setdefault(str(key[at["partition"]]), {})[seed] = _WeightRun(
                rounds=rounds, clients=clients, peers=peers, values=values,
                groups=groups.get(tuple(key), {}))
        return out


# --------------------------------------------------------------------------- logic
#: Level of the confidence intervals and number of bootstrap resamples.
LEVEL = 0.95
RESAMPLES = 2000
#: Margins closer to zero than this are ties (zero): float rounding of equal results,
#: e.g. two methods with the same correct counts whose accuracies were summed in
#: another order (1e-6 points is far below one test sample).
TIES: Mapping[str, float] = {"pp": 1e-6, "weight": 1e-12, "components": 1e-9,
                             "ratio": 1e-9, "gate": 1e-12}


@dataclass
class _Term:
    """One comparison of a check (e.g. one method vs one baseline in one column).

    ``values`` holds per-run numbers (runs in the design's seed order × ``k``) and
    ``margin`` maps their means over runs (``... × k``) to the signed margin, so the
    point margin is ``margin(values.mean(0))`` and a bootstrap resample of the runs
    gives ``margin(values[idx].mean(-2))``. Without values the term is ``missing``
    (a cell with no designed run), ``incomplete`` (fewer runs than designed) or
    ``undecidable`` (complete data on which the check is not defined), with reasons.
    """

    experiment: str = ""
    values: np.ndarray | None = None
    margin: Any = None
    gap: str = ""
    reason: str = ""


def _runs_term(experiment: str, cells: Sequence[tuple[str, Runs]],
               seeds: Sequence[tuple[int, int]], margin: Any,
               convert: Any = None) -> _Term:
    """A term over cells (name, per-run values); a gap when a cell lacks designed runs.

    ``convert`` maps a cell's per-run value to a tuple of numbers (default: the value).
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
        return _Term(experiment=experiment, gap=gap, reason=reason)
    convert = convert or (lambda v: (v,))
    rows = [[x for _, runs in cells for x in convert(runs[s])] for s in seeds]
    return _Term(experiment=experiment, values=np.asarray(rows, dtype=float), margin=margin)


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


def decide(groups: Sequence[Sequence[_Term]], quantifier: str, strict: bool, tie: float,
           rng: np.random.Generator) -> Verdict:
    """The verdict of a check's terms (see the module docstring)."""
    import numpy as np

    terms = [t for g in groups for t in g]
    if not terms or any(len(g) == 0 for g in groups):
        return Verdict("missing", reason="no column to compare")
    for gap in ("missing", "incomplete", "undecidable"):
        reasons = [t.reason for t in terms if t.gap == gap]
        if reasons:
            return Verdict(gap, reason="; ".join(dict.fromkeys(reasons)))

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
    if n < 2:
        out.reason = f"n = {n}: one run per cell, no interval"
    elif _holds(low, strict):
        out.verdict = "holds"
    elif not _holds(high, strict):
        out.verdict = "fails"
    else:
        out.reason = f"the {LEVEL:.0%} interval of the margin contains the threshold"
    return out


@dataclass
class _Outcome:
    """The terms of a check (grouped) and its numbers: a head and one item per column."""

    head: str
    groups: list[list[_Term]]
    items: list[str]


def _columns(data: _Data, experiments: Sequence[str],
             check: Check) -> tuple[list[tuple[str, str]], list[_Term], list[str]]:
    """Columns (experiment, partition) a check reads; a gap term and reason per unknown one.

    The columns are the design's partitions (so an absent column is missing, never
    skipped); with ``distributions``, those whose runs have that many distributions:
    a column without runs has no known number, so the check is missing.
    """
    cols: list[tuple[str, str]] = []
    gaps: list[_Term] = []
    reasons: list[str] = []

    def gap(experiment: str, text: str) -> None:
        gaps.append(_Term(experiment=experiment, gap="missing", reason=text))
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
                gaps.append(_Term(experiment=experiment, gap="undecidable",
                                  reason=f"{experiment}: no column with {wanted} "
                                  "distributions"))
                reasons.append(gaps[-1].reason)
        cols += [(experiment, p) for p in parts]
    return cols, gaps, reasons


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}"


def _w(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3g}"


def _mean(runs: Runs, seeds: Sequence[tuple[int, int]]) -> float | None:
    got = [runs[s] for s in seeds if s in runs]
    return float(sum(got) / len(got)) if got else None


def _accuracy_check(check: Check, data: _Data, experiments: Sequence[str]) -> _Outcome:
    cols, gaps, unknown = _columns(data, experiments, check)
    several = len(experiments) > 1
    sign, _ = OPS[check.op or ">"]

    def runs(method: str, col: tuple[str, str]) -> Runs:
        if method not in data.design[col[0]].methods:
            return {}
        return data.accuracy_runs(col[0], col[1], method, check.metric or "",
                                  check.round_fraction)

    def acc(method: str, col: tuple[str, str]) -> float | None:
        return _mean(runs(method, col), data.seeds(col[0]))

    def label(col: tuple[str, str]) -> str:
        return data.label(col[0], col[1], several)

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
    for first in firsts:
        for second in seconds:
            assert first is not None and second is not None
            groups.append([_runs_term(c[0], [(f"{first} {label(c)}", runs(first, c)),
                                             (f"{second} {label(c)}", runs(second, c))],
                                      data.seeds(c[0]), margin) for c in cols] + gaps)
    items: list[str] = []
    if check.type == "above_all" and check.quantifier == "any":
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
            best = f"{_pct(max(known)[0])} ({max(known)[1]})" if known else "n/a"
            items.append(f"{label(col)} {'/'.join(_pct(acc(m, col)) for m in firsts)} "
                         f"vs {best}")
    else:
        head = f"{'/'.join(firsts)} vs {seconds[0]}"
        for col in cols:
            items.append(f"{label(col)} {'/'.join(_pct(acc(m, col)) for m in firsts)} "
                         f"vs {_pct(acc(seconds[0], col))}")
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
    return _Outcome(head=head, groups=groups, items=items + unknown)


def _trend_check(check: Check, data: _Data, experiments: Sequence[str]) -> _Outcome:
    terms: list[_Term] = []
    texts: list[str] = []
    method = check.method or ""
    for experiment in experiments:
        if experiment not in data.design or data.frame(experiment) is None:
            text = (f"{experiment} is not in the config" if experiment not in data.design
                    else f"no results for {experiment}")
            terms.append(_Term(experiment=experiment, gap="missing", reason=text))
            texts.append(text)
            continue
        parts = data.design[experiment].partitions
        counts = {p: data.distributions(experiment, p) for p in parts}
        name = data.experiment_labels.get(experiment, experiment)
        if any(n == 0 for n in counts.values()):
            text = f"{name}: a column without runs with distribution ids"
            terms.append(_Term(experiment=experiment, gap="missing", reason=text))
            texts.append(text)
            continue
        if len(set(counts.values())) < 2:
            text = f"{name}: fewer than two numbers of distributions"
            terms.append(_Term(experiment=experiment, gap="undecidable", reason=text))
            texts.append(text)
            continue
        few = min(counts, key=lambda p: counts[p])
        many = max(counts, key=lambda p: counts[p])
        cells = [(f"{method} {data.label(experiment, p, False)}",
                  data.accuracy_runs(experiment, p, method, check.metric or "",
                                     check.round_fraction)
                  if method in data.design[experiment].methods else {}) for p in (few, many)]
        sign = 1.0 if check.direction == "decreasing" else -1.0
        terms.append(_runs_term(experiment, cells, data.seeds(experiment),
                                lambda m, s=sign: s * (m[..., 0] - m[..., 1])))
        lo, hi = (_mean(c[1], data.seeds(experiment)) for c in cells)
        texts.append(f"{name}: {counts[few]} distributions {_pct(lo)} -> "
                     f"{counts[many]} distributions {_pct(hi)}")
    return _Outcome(head=f"{method} {check.metric}", groups=[terms], items=texts)


def _same_mass(run: _WeightRun) -> float | None:
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


def _contrast(run: _WeightRun) -> tuple[float, float] | None:
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


def _peak(run: _WeightRun) -> float | None:
    import numpy as np

    totals = run.final.sum(axis=1)
    if (totals <= 0).any():
        return None
    return float(np.mean(run.final.max(axis=1) / totals))


def _variation(run: _WeightRun) -> float | None:
    import numpy as np

    if len(run.rounds) < 2:
        return None
    return float(np.abs(np.diff(run.values, axis=0)).mean(axis=(1, 2)).sum())


def _used(run: _WeightRun) -> tuple[float, int] | None:
    import numpy as np

    distributions = len({g for c, g in run.groups.items() if g >= 0 and c in set(run.clients)})
    if distributions == 0:
        return None
    return float(len(np.unique(run.final.argmax(axis=1)))), distributions


def _alignment(run: _WeightRun) -> float | None:
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


#: Why a weight statistic is undefined for a run.
_UNDEFINED = {
    "weight_mass": "no client with a distribution id",
    "group_contrast": "no two clients of one distribution, or none of two",
    "peak": "a zero weight row",
    "variation": "weights of a single round",
    "components_used": "no distribution ids",
    "gate_alignment": "no two clients of one distribution, or none of two",
}
#: A peak weight this close to 1 is one-hot.
_ONE_HOT = 1e-9


def _weight_check(check: Check, data: _Data, experiments: Sequence[str]) -> _Outcome:
    import numpy as np

    cols, gaps, unknown = _columns(data, experiments, check)
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
             undefined: str, convert: Any = None) -> _Term:
        seeds = data.seeds(col[0])
        complete = all(s in runs for _, runs in cells for s in seeds)
        if complete and any(runs[s] is None for _, runs in cells for s in seeds):
            return _Term(experiment=col[0], gap="undecidable",
                         reason=f"{data.label(col[0], col[1], several)}: {undefined}")
        return _runs_term(col[0], cells, seeds, margin, convert)

    def mean(runs: Runs, col: tuple[str, str], at: int | None = None) -> float | None:
        got = [v if at is None else v[at] for s, v in runs.items()
               if s in data.seeds(col[0]) and v is not None]
        return float(np.mean(got)) if got else None

    terms: list[_Term] = []
    texts: list[str] = []
    for col in cols:
        where = data.label(col[0], col[1], several)
        if check.type == "weight_compare":
            stat = _peak if check.statistic == "peak" else _variation
            undefined = _UNDEFINED[check.statistic or ""]
            (va, ra), (vb, rb) = (column(m, col, stat) for m in (check.a, check.b))
            sign = OPS[check.op or ">"][0]
            t = term(col, [(f"{check.a} {where}", va), (f"{check.b} {where}", vb)],
                     lambda m, s=sign: s * (m[..., 0] - m[..., 1]), undefined)
            xa, xb = mean(va, col), mean(vb, col)
            if not t.gap and check.statistic == "peak" and sign > 0:
                # a peak is at most 1 (one-hot): b already there leaves a no room above
                assert t.values is not None  # runs x (a, b)
                if (t.values[:, 1] >= 1 - _ONE_HOT).all():
                    t = _Term(experiment=col[0], gap="undecidable",
                              reason=f"{where}: the peak weight of {check.b} is already 1 "
                              f"(one-hot) in every run, so {check.a}'s cannot be higher")
            terms.append(t)
            reasons = "; ".join(r for r in dict.fromkeys((ra, rb)) if r)
            texts.append(f"{where}: {_w(xa)} vs {_w(xb)}" + (f" ({reasons})" if reasons else ""))
            continue
        stat = {"weight_mass": _same_mass, "group_contrast": _contrast,
                "components_used": _used}[check.type]
        values, reason = column(check.method, col, stat)
        name = f"{check.method} {where}"
        undefined = _UNDEFINED[check.type]
        if check.type == "weight_mass":
            threshold = float(check.threshold or 0.0)
            terms.append(term(col, [(name, values)], lambda m, t=threshold: m[..., 0] - t,
                              undefined))
            texts.append(f"{where}: {_w(mean(values, col))}" + (f" ({reason})" if reason else ""))
        elif check.type == "group_contrast":
            ratio = float(check.min_ratio or 1.0)
            terms.append(term(col, [(name, values)],
                              lambda m, r=ratio: m[..., 0] - r * m[..., 1], undefined,
                              convert=lambda v: v))
            within, across = mean(values, col, 0), mean(values, col, 1)
            shown = ("n/a" if within is None or across is None
                     else "inf" if across == 0 else f"{within / across:.3g}")
            texts.append(f"{where}: within {_w(within)} vs across {_w(across)}, ratio {shown}"
                         + (f" ({reason})" if reason else ""))
        else:  # components_used
            terms.append(term(col, [(name, values)], lambda m: m[..., 1] - m[..., 0],
                              undefined, convert=lambda v: v))
            used, dists = mean(values, col, 0), mean(values, col, 1)
            texts.append(f"{where}: {_w(used)} components used for {_w(dists)} distributions"
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
    return _Outcome(head=head, groups=[terms + gaps], items=[*texts, *unknown])


def _gate_check(check: Check, data: _Data, experiments: Sequence[str]) -> _Outcome:
    """``gate_alignment``: a's gate alignment ``op`` b's, per column (see the module doc)."""
    from pflrepro.algorithms.fedmix import GATE_MASS

    cols, gaps, unknown = _columns(data, experiments, check)
    several = len(experiments) > 1
    sign = OPS[check.op or ">"][0]
    terms: list[_Term] = []
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
            terms.append(_Term(experiment=col[0], gap="undecidable",
                               reason=f"{where}: {_UNDEFINED['gate_alignment']}"))
        else:
            terms.append(_runs_term(col[0], cells, seeds,
                                    lambda m, s=sign: s * (m[..., 0] - m[..., 1])))
        xa, xb = (_mean({k: v for k, v in runs.items() if v is not None}, seeds)
                  for _, runs in cells)
        texts.append(f"{where}: {_w(xa)} vs {_w(xb)}"
                     + (f" ({'; '.join(reasons)})" if reasons else ""))
    return _Outcome(head=f"gate alignment {check.a} vs {check.b}", groups=[terms + gaps],
                    items=[*texts, *unknown])


def _across_check(check: Check, data: _Data, experiments: Sequence[str]) -> _Outcome:
    """``across_experiments``: |method in experiments[0] - reference in experiments[1]|."""
    import numpy as np

    first, second = experiments
    method, reference = check.method or "", check.reference or check.method or ""
    head = f"{method} ({first}) vs {reference} ({second})"
    for name in experiments:
        if name not in data.design or data.frame(name) is None:
            text = (f"{name} is not in the config" if name not in data.design
                    else f"no results for {name}")
            return _Outcome(head=head, groups=[[_Term(experiment=name, gap="missing",
                                                      reason=text)]], items=[text])
    seeds = data.seeds(first)
    if set(seeds) != set(data.seeds(second)):
        text = (f"{first} and {second} have different seed pairs, so their runs cannot "
                "be paired")
        return _Outcome(head=head, groups=[[_Term(experiment=first, gap="undecidable",
                                                  reason=text)]], items=[text])
    key = f"{first} + {second}"  # one bootstrap draw: the runs pair across experiments
    tolerance = check.tolerance

    def runs(experiment: str, name: str, partition: str) -> Runs:
        design = data.design[experiment]
        if name not in design.methods or partition not in design.partitions:
            return {}
        return data.accuracy_runs(experiment, partition, name, check.metric or "",
                                  check.round_fraction)

    terms: list[_Term] = []
    texts: list[str] = []
    for part in data.design[first].partitions:
        label = data.label(first, part, False)
        cells = [(f"{method} {first} {label}", runs(first, method, part)),
                 (f"{reference} {second} {label}", runs(second, reference, part))]
        terms.append(_runs_term(key, cells, seeds,
                                lambda m: tolerance - np.abs(m[..., 0] - m[..., 1])))
        a, b = (_mean(c[1], seeds) for c in cells)
        texts.append(f"{label} {_pct(a)} vs {_pct(b)}"
                     + ("" if part in data.design[second].partitions
                        else f" ({part} is not a column of {second})"))
    return _Outcome(head=head, groups=[terms], items=texts)


def _communication_check(check: Check, data: _Data, experiments: Sequence[str]) -> _Outcome:
    cols, gaps, unknown = _columns(data, experiments, check)
    several = len(experiments) > 1
    method, factor = check.method or "", float(check.factor or 1.0)

    def runs(name: str, col: tuple[str, str]) -> Runs:
        if name not in data.design[col[0]].methods:
            return {}
        return data.traffic_runs(col[0], col[1], name)

    groups: list[list[_Term]] = []
    texts: list[str] = []
    for base in check.baselines:
        terms: list[_Term] = []
        for col in cols:
            where = data.label(col[0], col[1], several)
            mine, theirs = runs(method, col), runs(base, col)
            seeds = data.seeds(col[0])
            term = _runs_term(col[0], [(f"{method} {where}", mine), (f"{base} {where}", theirs)],
                              seeds, lambda m, f=factor: m[..., 1] / m[..., 0] - f)
            if not term.gap and (term.values[:, 0] <= 0).any():  # type: ignore[index]
                term = _Term(experiment=col[0], gap="undecidable",
                             reason=f"{where}: {method} communicated nothing in a run, so "
                             "no ratio is defined")
            terms.append(term)
            a, b = _mean(mine, seeds), _mean(theirs, seeds)
            ratio = f" = {b / a:.4g}x" if a and b is not None else ""
            texts.append(f"{where}: {base} {_w(b)} / {method} {_w(a)}{ratio}")
        groups.append(terms + gaps)
    return _Outcome(head=f"scalars communicated (total per run, factor {factor:g})",
                    groups=groups, items=[*texts, *unknown])


def _evaluate(check: Check, data: _Data, experiments: Sequence[str]) -> _Outcome:
    if check.type == "gate_alignment":
        return _gate_check(check, data, experiments)
    if check.type == "across_experiments":
        return _across_check(check, data, experiments)
    if check.type == "communication_ratio":
        return _communication_check(check, data, experiments)
    if check.type in ("compare", "above_all", "within"):
        return _accuracy_check(check, data, experiments)
    if check.type == "trend":
        return _trend_check(check, data, experiments)
    return _weight_check(check, data, experiments)


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
    ``ci_high`` are NaN when not decided from data. Raises ``ValueError`` for an
    unknown scale or inconsistent results (as the tables do: e.g. runs of different
    settings in one cell).
    """
    import pandas as pd

    from pflrepro.seeding import NO_CLIENT, SETUP_ROUND, numpy_generator

    if scale not in SCALES:
        raise ValueError(f"claims: unknown scale {scale!r}; expected one of {list(SCALES)}")
    data = _Data(agg, dict(design), dict(labels or {}), dict(experiment_labels or {}))
    rows = []
    for claim in claims:
        check = claim.check
        for group in row_groups(claim, scale):
            base = {"id": claim.id, "paper": claim.paper, "where": claim.where,
                    "claim": claim.claim, "experiment": " + ".join(group),
                    "predicate": check.describe(), "unit": check.unit, "level": LEVEL}
            outcome = _evaluate(check, data, group)
            # the resamples of a row depend only on the claim and its experiments
            rng = numpy_generator(0, SETUP_ROUND, NO_CLIENT,
                                  f"claims bootstrap {claim.id} {base['experiment']}")
            verdict = decide(outcome.groups, check.quantifier, check.strict,
                             TIES[check.unit], rng)
            numbers = f"{outcome.head}: " + "; ".join(dict.fromkeys(outcome.items))
            if verdict.verdict != "holds" and verdict.verdict != "fails" and verdict.reason:
                numbers += f" [{verdict.verdict}: {verdict.reason}]"
            if claim.planned and verdict.verdict == "missing":
                numbers = f"planned experiment; {numbers}"
            rows.append({**base, **_verdict_cells(verdict), "numbers": numbers})
    return pd.DataFrame(rows, columns=list(COLUMNS))


def _verdict_cells(v: Verdict) -> dict[str, Any]:
    return {"verdict": v.verdict, "margin": v.margin, "n": v.n, "ci_low": v.ci_low,
            "ci_high": v.ci_high}
