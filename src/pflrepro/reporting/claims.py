"""The papers' qualitative claims, checked against aggregated results.

A claims file (``config/claims.yaml``) lists each claim as data: the paper, where it
is made, the claim in our words, the experiments it applies to at each scale
(``paper`` and ``cpu``, names from ``config.yaml``), and a *check*, one of a few
typed predicates (nothing is evaluated as code):

``compare``
    method ``a`` ``op`` method ``b`` on an accuracy ``metric``, in every column (or,
    with ``quantifier: any``, in some column); ``tolerance`` in percentage points.
``above_all``
    each of ``methods`` above each of ``baselines`` (``op`` ``>``, the default, or
    ``>=``), per column.
``within``
    ``|m - reference| <= tolerance`` for each of ``methods``, per column.
``trend``
    ``method``'s accuracy with the most distributions is below (``decreasing``) or
    above (``increasing``) its accuracy with the fewest, per experiment.
``weight_mass``
    the mean over clients of the share of a client's final-round weight on clients of
    its own distribution (itself included unless ``include_self: false``) is at
    least ``threshold``.
``group_contrast``
    the mean final-round weight ``w_ij`` (``i != j``) between clients of the same
    distribution is above the mean weight between clients of different ones.
``weight_compare``
    a weight ``statistic`` of method ``a`` ``op`` that of method ``b``: ``peak``
    (the mean over clients of the largest share of a client's final-round weight) or
    ``variation`` (the sum over rounds of the mean ``|w_ij(t) - w_ij(t-1)|``).
``components_used``
    fewer distinct components are some client's largest final-round weight than the
    partition has distributions (FedEM's mixture weights).

A *column* is one partition of one experiment (a column of the paper's table); the
number of distributions of a column is the number of distinct non-negative client
``group`` ids of its runs, and ``distributions: [4]`` restricts a check to columns
with four. Accuracy metrics are those of :mod:`pflrepro.reporting.tables`:
``weighted_final``, ``mean_bmta`` and ``mean_final`` are the table cells (mean over
runs, in percent; the same function computes both, so the numbers agree), and
``weighted_at`` is the weighted accuracy at the first evaluated round at or after
``round_fraction`` of the run's last round (an early-accuracy reading of the
convergence-speed claims), averaged over runs. Weight statistics are computed per
run and averaged over the runs of a column.

Each claim gives one row per experiment at the chosen scale (``scope: each``, the
default) or one row for all of them together (``scope: together``, for claims about
a whole table such as "in some column"); a claim without experiments at that scale
gives one row. A row's status is ``holds``, ``fails`` or ``missing``; its margin is
signed, in the unit of the check (``pp``: percentage points of accuracy; ``weight``;
``components``), positive when the claim holds by that much. Every term of a check
is a margin, or unknown when its data are absent (an experiment without results, a
method without runs, a column without distribution ids): ``all`` over terms fails
when a known term fails, is missing when a term is unknown, and holds otherwise;
``any`` holds when a known term holds, is missing when a term is unknown, and fails
otherwise. So absent data give ``missing``, never ``holds``. Strict predicates
(``>``, ``<``, ``group_contrast``, ``components_used``, ``trend``) need a margin
above zero; the others hold at zero. A term within :data:`TIES` of zero (float
rounding of equal results) counts as zero.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pflrepro.config import SCALES

if TYPE_CHECKING:  # the workflow parse loads claims without pandas
    import numpy as np
    import pandas as pd

PAPERS = ("FedeRiCo", "FedAMP", "PerFed-CKT", "FedMix")
STATUSES = ("holds", "fails", "missing")
SCOPES = ("each", "together")
QUANTIFIERS = ("all", "any")
#: Accuracy metrics: name -> (table metric of ``accuracy_table``, its accuracy column).
ACCURACY_METRICS: dict[str, tuple[str, str] | None] = {
    "weighted_final": ("weighted_final", "weighted_final"),
    "mean_bmta": ("mean_bmta", "mean_bmta"),
    "mean_final": ("mean_bmta", "mean_final"),
    "weighted_at": None,  # per round, see _AccuracyCells
}
#: Comparison operators: name -> (sign of ``a - b`` in the margin, strict).
OPS: dict[str, tuple[int, bool]] = {">": (1, True), ">=": (1, False),
                                     "<": (-1, True), "<=": (-1, False)}
STATISTICS = ("peak", "variation")
DIRECTIONS = ("decreasing", "increasing")
#: Columns of :func:`evaluate_claims`' frame (and of the CSV).
COLUMNS = ("id", "paper", "where", "claim", "experiment", "predicate", "numbers", "status",
           "margin", "unit")

_ID = re.compile(r"^[a-z0-9][a-z0-9-]*$")
_CLAIM_REQUIRED = ("id", "paper", "where", "claim", "experiments", "check")
_CLAIM_OPTIONAL = ("scope", "planned")
#: Per check type: (required fields, optional fields), ``type`` aside.
_FIELDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "compare": (("metric", "a", "b", "op"),
                ("tolerance", "quantifier", "distributions", "round_fraction")),
    "above_all": (("metric", "methods", "baselines"),
                  ("op", "tolerance", "quantifier", "distributions", "round_fraction")),
    "within": (("metric", "methods", "reference", "tolerance"),
               ("quantifier", "distributions", "round_fraction")),
    "trend": (("metric", "method", "direction"), ("quantifier", "round_fraction")),
    "weight_mass": (("method", "threshold"), ("include_self", "quantifier", "distributions")),
    "group_contrast": (("method",), ("quantifier", "distributions")),
    "weight_compare": (("statistic", "a", "b", "op"), ("quantifier", "distributions")),
    "components_used": (("method",), ("quantifier", "distributions")),
}
CHECK_TYPES = tuple(_FIELDS)
_UNITS = {"weight_mass": "weight", "group_contrast": "weight", "weight_compare": "weight",
          "components_used": "components"}


class ClaimsError(ValueError):
    """A problem in a claims file; the message names the claim and the key."""


@dataclass(frozen=True)
class Check:
    """A typed predicate over aggregated results (see the module docstring)."""

    type: str
    metric: str | None = None
    round_fraction: float | None = None
    a: str | None = None
    b: str | None = None
    methods: tuple[str, ...] = ()
    baselines: tuple[str, ...] = ()
    reference: str | None = None
    method: str | None = None
    op: str | None = None
    tolerance: float = 0.0
    threshold: float | None = None
    include_self: bool = True
    statistic: str | None = None
    direction: str | None = None
    quantifier: str = "all"
    distributions: tuple[int, ...] = ()

    def method_names(self) -> tuple[str, ...]:
        """Every method the check reads, in order of appearance."""
        names = [self.a, self.b, *self.methods, *self.baselines, self.reference, self.method]
        return tuple(dict.fromkeys(n for n in names if n is not None))

    @property
    def unit(self) -> str:
        """Unit of the margin: ``pp`` (accuracy points), ``weight`` or ``components``."""
        return _UNITS.get(self.type, "pp")

    @property
    def strict(self) -> bool:
        """Whether the margin must be above zero (else at least zero)."""
        if self.type in ("compare", "above_all", "weight_compare"):
            return OPS[self.op or ">"][1]
        return self.type in ("group_contrast", "components_used", "trend")

    def describe(self) -> str:
        """The predicate in one line, e.g. ``federico > fedavg, local (weighted_final) ...``."""
        metric = self.metric or ""
        if self.metric == "weighted_at":
            metric = f"weighted accuracy at {self.round_fraction:g} of the rounds"
        where = "in every column" if self.quantifier == "all" else "in some column"
        if self.distributions:
            where += f" with {'/'.join(str(d) for d in self.distributions)} distributions"
        tol = f", tolerance {self.tolerance:g} pp" if self.tolerance else ""
        if self.type == "compare":
            return f"{self.a} {self.op} {self.b} ({metric}{tol}) {where}"
        if self.type == "above_all":
            mine = (self.methods[0] if len(self.methods) == 1
                    else f"each of {', '.join(self.methods)}")
            return (f"{mine} {self.op or '>'} each of {', '.join(self.baselines)} "
                    f"({metric}{tol}) {where}")
        if self.type == "within":
            return (f"|m - {self.reference}| <= {self.tolerance:g} pp for m in "
                    f"{', '.join(self.methods)} ({metric}) {where}")
        if self.type == "trend":
            where = "in every experiment" if self.quantifier == "all" else "in some experiment"
            return (f"{self.method} {metric} {self.direction} from the fewest to the most "
                    f"distributions {where}")
        if self.type == "weight_mass":
            self_ = "" if self.include_self else " (itself excluded)"
            return (f"{self.method}: mean same-distribution share of final weight{self_} >= "
                    f"{self.threshold:g} {where}")
        if self.type == "group_contrast":
            return (f"{self.method}: mean final weight within distributions > across "
                    f"distributions {where}")
        if self.type == "weight_compare":
            return f"{self.statistic} client weight: {self.a} {self.op} {self.b} {where}"
        return (f"{self.method}: components that are some client's top weight < "
                f"distributions {where}")


@dataclass(frozen=True)
class Claim:
    """One claim of a paper and the check that tests it."""

    id: str
    paper: str
    where: str
    claim: str
    #: Experiment names per scale (``paper``, ``cpu``).
    experiments: Mapping[str, tuple[str, ...]]
    check: Check
    scope: str = "each"
    #: Its experiments are not in config.yaml yet (reported missing).
    planned: bool = False


# --------------------------------------------------------------------------- loading
def load_claims(path: str | os.PathLike[str]) -> list[Claim]:
    """Read and check a claims file; raise :class:`ClaimsError` naming what is wrong."""
    import yaml

    try:
        with open(path, encoding="utf-8") as fh:
            raw = yaml.safe_load(fh)
    except yaml.YAMLError as err:
        raise ClaimsError(f"{path}: not valid YAML: {err}") from None
    return parse_claims(raw, str(path))


def parse_claims(raw: Any, where: str = "claims") -> list[Claim]:
    """Check a loaded claims document (``{"claims": [...]}``) and return its claims."""
    if not isinstance(raw, Mapping) or set(raw) != {"claims"}:
        keys = sorted(raw) if isinstance(raw, Mapping) else type(raw).__name__
        raise ClaimsError(f"{where}: expected a mapping with the one key 'claims', got {keys}")
    items = raw["claims"]
    if not isinstance(items, list) or not items:
        raise ClaimsError(f"{where}: 'claims' must be a non-empty list")
    claims: list[Claim] = []
    seen: set[str] = set()
    for k, item in enumerate(items):
        label = f"{where}: claims[{k}]"
        if isinstance(item, Mapping) and isinstance(item.get("id"), str):
            label += f" (id {item['id']!r})"
        claim = _claim(item, label)
        if claim.id in seen:
            raise ClaimsError(f"{label}: id {claim.id!r} is used twice")
        seen.add(claim.id)
        claims.append(claim)
    return claims


def _keys(item: Any, required: Iterable[str], optional: Iterable[str], where: str) -> None:
    if not isinstance(item, Mapping):
        raise ClaimsError(f"{where}: expected a mapping, got {type(item).__name__}")
    required, optional = list(required), list(optional)
    missing = [k for k in required if k not in item]
    if missing:
        raise ClaimsError(f"{where}: missing key(s) {missing}")
    unknown = sorted(str(k) for k in item if k not in required and k not in optional)
    if unknown:
        raise ClaimsError(f"{where}: unknown key(s) {unknown}; allowed: "
                          f"{sorted(required + optional)}")


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ClaimsError(f"{where}: expected a non-empty string, got {value!r}")
    return value.strip()


def _choice(value: Any, choices: Sequence[str], where: str) -> str:
    if value not in choices:
        raise ClaimsError(f"{where}: {value!r} is not one of {list(choices)}")
    return str(value)


def _names(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not value:
        raise ClaimsError(f"{where}: expected a non-empty list of names, got {value!r}")
    names = tuple(_text(v, f"{where}[{i}]") for i, v in enumerate(value))
    if len(set(names)) != len(names):
        raise ClaimsError(f"{where}: a name is listed twice in {list(names)}")
    return names


def _number(value: Any, where: str, low: float, high: float | None = None,
            low_open: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ClaimsError(f"{where}: expected a number, got {value!r}")
    value = float(value)
    if value < low or (low_open and value == low) or (high is not None and value > high):
        span = f"{'(' if low_open else '['}{low:g}, {'inf)' if high is None else f'{high:g}]'}"
        raise ClaimsError(f"{where}: {value:g} is outside {span}")
    return value


def _distributions(value: Any, where: str) -> tuple[int, ...]:
    if (not isinstance(value, list) or not value
            or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0
                       for v in value)):
        raise ClaimsError(f"{where}: expected a non-empty list of positive integers, "
                          f"got {value!r}")
    return tuple(int(v) for v in value)


def _bool(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise ClaimsError(f"{where}: expected true or false, got {value!r}")
    return value


_PARSE = {
    "metric": lambda v, w: _choice(v, tuple(ACCURACY_METRICS), w),
    "round_fraction": lambda v, w: _number(v, w, 0.0, 1.0, low_open=True),
    "a": _text, "b": _text, "reference": _text, "method": _text,
    "methods": _names, "baselines": _names,
    "op": lambda v, w: _choice(v, tuple(OPS), w),
    "tolerance": lambda v, w: _number(v, w, 0.0),
    "threshold": lambda v, w: _number(v, w, 0.0, 1.0),
    "include_self": _bool,
    "statistic": lambda v, w: _choice(v, STATISTICS, w),
    "direction": lambda v, w: _choice(v, DIRECTIONS, w),
    "quantifier": lambda v, w: _choice(v, QUANTIFIERS, w),
    "distributions": _distributions,
}


def _check(item: Any, where: str) -> Check:
    if not isinstance(item, Mapping) or "type" not in item:
        raise ClaimsError(f"{where}: expected a mapping with a 'type' "
                          f"(one of {list(CHECK_TYPES)})")
    kind = _choice(item["type"], CHECK_TYPES, f"{where}.type")
    required, optional = _FIELDS[kind]
    _keys(item, ("type", *required), optional, f"{where} ({kind})")
    values = {k: _PARSE[k](v, f"{where}.{k}") for k, v in item.items() if k != "type"}
    check = Check(type=kind, **values)
    if kind == "above_all":
        if check.op not in (None, ">", ">="):
            raise ClaimsError(f"{where}.op: above_all takes '>' or '>=', got {check.op!r}")
        both = sorted(set(check.methods) & set(check.baselines))
        if both:
            raise ClaimsError(f"{where}: {both} both in methods and baselines")
    if kind in ("compare", "weight_compare") and check.a == check.b:
        raise ClaimsError(f"{where}: a and b are the same method {check.a!r}")
    if kind == "within" and check.reference in check.methods:
        raise ClaimsError(f"{where}: the reference {check.reference!r} is among the methods")
    if (check.metric == "weighted_at") != (check.round_fraction is not None):
        raise ClaimsError(f"{where}: round_fraction is required with metric 'weighted_at' "
                          "and only there")
    return check


def _claim(item: Any, where: str) -> Claim:
    _keys(item, _CLAIM_REQUIRED, _CLAIM_OPTIONAL, where)
    cid = _text(item["id"], f"{where}.id")
    if not _ID.match(cid):
        raise ClaimsError(f"{where}.id: {cid!r} must be lower case letters, digits and '-'")
    exps = item["experiments"]
    _keys(exps, SCALES, (), f"{where}.experiments")
    experiments: dict[str, tuple[str, ...]] = {}
    for scale in SCALES:
        names = exps[scale]
        if names is None or names == []:
            experiments[scale] = ()
        else:
            experiments[scale] = _names(names, f"{where}.experiments.{scale}")
    if not any(experiments.values()):
        raise ClaimsError(f"{where}.experiments: names no experiment at any scale")
    return Claim(id=cid, paper=_choice(item["paper"], PAPERS, f"{where}.paper"),
                 where=_text(item["where"], f"{where}.where"),
                 claim=_text(item["claim"], f"{where}.claim"),
                 experiments=experiments, check=_check(item["check"], f"{where}.check"),
                 scope=_choice(item.get("scope", "each"), SCOPES, f"{where}.scope"),
                 planned=_bool(item.get("planned", False), f"{where}.planned"))


def claim_experiments(claims: Iterable[Claim], scale: str) -> list[str]:
    """Every experiment the claims name at ``scale``, first mention first."""
    return list(dict.fromkeys(e for c in claims for e in c.experiments.get(scale, ())))


def row_keys(claims: Iterable[Claim], scale: str) -> list[tuple[str, str]]:
    """(claim id, experiment text) of each row :func:`evaluate_claims` gives at ``scale``."""
    out = []
    for claim in claims:
        for group in _row_groups(claim, scale):
            out.append((claim.id, " + ".join(group)))
    return out


def _row_groups(claim: Claim, scale: str) -> list[tuple[str, ...]]:
    names = claim.experiments.get(scale, ())
    if not names:
        return [()]
    return [names] if claim.scope == "together" else [(n,) for n in names]


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


@dataclass
class _Data:
    """The aggregate, split by experiment, with the numbers checks read (cached)."""

    agg: pd.DataFrame | None
    labels: Mapping[str, str] = field(default_factory=dict)
    experiment_labels: Mapping[str, str] = field(default_factory=dict)
    _frames: dict[str, pd.DataFrame | None] = field(default_factory=dict)
    _cells: dict[tuple[Any, ...], dict[tuple[str, str], float]] = field(default_factory=dict)
    _groups: dict[str, dict[tuple[Any, ...], dict[int, int]]] = field(default_factory=dict)
    _weights: dict[tuple[str, str], dict[str, list[_WeightRun]] | str] = field(
        default_factory=dict)

    def frame(self, experiment: str) -> pd.DataFrame | None:
        """The rows of ``experiment``, or ``None`` when it has none."""
        if experiment not in self._frames:
            rows = None
            if self.agg is not None and not self.agg.empty:
                rows = self.agg[self.agg["experiment"] == experiment]
                rows = None if rows.empty else rows.reset_index(drop=True)
            self._frames[experiment] = rows
        return self._frames[experiment]

    def partitions(self, experiment: str) -> list[str]:
        """Partition ids of ``experiment``'s results, in natural order."""
        from pflrepro.reporting.tables import natural_key

        frame = self.frame(experiment)
        found = [] if frame is None else frame["partition"].astype(str).unique()
        return sorted(found, key=natural_key)

    def run_groups(self, experiment: str) -> dict[tuple[Any, ...], dict[int, int]]:
        """Per run (a tuple of the run keys): client id -> distribution id."""
        from pflrepro.reporting.tables import RUN_KEYS
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
        from pflrepro.reporting.tables import RUN_KEYS

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

    def accuracy(self, experiment: str, partition: str, method: str, metric: str,
                 round_fraction: float | None) -> float | None:
        """Mean over runs of a per-run accuracy (percent), or ``None`` without runs."""
        key = (experiment, metric, round_fraction)
        if key not in self._cells:
            self._cells[key] = self._accuracy_cells(experiment, metric, round_fraction)
        return self._cells[key].get((method, partition))

    def _accuracy_cells(self, experiment: str, metric: str,
                        round_fraction: float | None) -> dict[tuple[str, str], float]:
        from pflrepro.reporting.tables import (
            RUN_KEYS,
            accuracy_table,
            tidy_table,
            weighted_accuracy_per_round,
        )

        frame = self.frame(experiment)
        if frame is None:
            return {}
        spec = ACCURACY_METRICS[metric]
        if spec is not None:  # a table cell: the numbers of the experiment's table
            table_metric, name = spec
            tidy = tidy_table(accuracy_table(frame, metric=table_metric,
                                             columns=("partition",)))
            if "metric_name" in tidy.columns:
                tidy = tidy[tidy["metric_name"] == name]
            return {(str(m), str(p)): float(v) for m, p, v in
                    zip(tidy["method"], tidy["partition"], tidy["mean"], strict=True)}
        per_round = weighted_accuracy_per_round(frame)
        keys = list(RUN_KEYS)
        last = per_round.groupby(keys, dropna=False, sort=False)["round"].transform("max")
        due = per_round[per_round["round"] >= last * float(round_fraction or 0.0)]
        first = due.sort_values("round").groupby(keys, dropna=False, sort=False).head(1)
        means = (first.assign(percent=first["weighted_accuracy"] * 100.0)
                 .groupby(["method", "partition"], sort=False)["percent"].mean())
        return {(str(m), str(p)): float(v) for (m, p), v in means.items()}

    def weight_runs(self, experiment: str, method: str) -> dict[str, list[_WeightRun]] | str:
        """Per partition, the weight arrays of ``method``'s runs; a reason when it has none."""
        key = (experiment, method)
        if key not in self._weights:
            self._weights[key] = self._weight_runs(experiment, method)
        return self._weights[key]

    def _weight_runs(self, experiment: str, method: str) -> dict[str, list[_WeightRun]] | str:
        import numpy as np

        from pflrepro.reporting.tables import RUN_KEYS
        from pflrepro.results import WEIGHT

        frame = self.frame(experiment)
        if frame is None:
            return f"no results for {experiment}"
        rows = frame[(frame["method"] == method) & (frame["metric"] == WEIGHT)
                     & (frame["client"] >= 0) & (frame["peer"] >= 0)]
        if rows.empty:
            return f"no weight rows of {method}"
        groups = self.run_groups(experiment)
        out: dict[str, list[_WeightRun]] = {}
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
            partition = str(key[RUN_KEYS.index("partition")])
            out.setdefault(partition, []).append(_WeightRun(
                rounds=rounds, clients=clients, peers=peers, values=values,
                groups=groups.get(tuple(key), {})))
        return out


# --------------------------------------------------------------------------- logic
#: A term's margin, or ``None`` when its data are absent.
Margin = float | None


def _holds(margin: float, strict: bool) -> bool:
    return margin > 0 if strict else margin >= 0


def _quantify(terms: Sequence[Margin], quantifier: str,
              strict: bool) -> tuple[str, float | None]:
    """Status and margin of one group of terms under ``all`` or ``any`` (Kleene logic)."""
    known = [t for t in terms if t is not None]
    unknown = len(known) < len(terms) or not terms
    if quantifier == "all":
        if any(not _holds(t, strict) for t in known):
            return "fails", min(known)
        return ("missing", None) if unknown else ("holds", min(known))
    if any(_holds(t, strict) for t in known):
        return "holds", max(known)
    return ("missing", None) if unknown else ("fails", max(known))


def combine(groups: Sequence[Sequence[Margin]], quantifier: str,
            strict: bool) -> tuple[str, float | None]:
    """Status and margin of a check: ``quantifier`` within each group, ``all`` across groups.

    A group is the terms (columns) of one comparison, e.g. one (method, baseline)
    pair. The margin is the smallest group margin (among failing groups when one
    fails); ``None`` when missing.
    """
    results = [_quantify(g, quantifier, strict) for g in groups] or [("missing", None)]
    failing = [m for s, m in results if s == "fails" and m is not None]
    if failing:
        return "fails", min(failing)
    if any(s == "missing" for s, _ in results):
        return "missing", None
    return "holds", min(m for _, m in results if m is not None)


@dataclass
class _Outcome:
    """The terms of a check (grouped) and its numbers: a head and one item per column."""

    head: str
    groups: list[list[Margin]]
    items: list[str]


def _columns(data: _Data, experiments: Sequence[str],
             check: Check) -> tuple[list[tuple[str, str]], list[str]]:
    """Columns (experiment, partition) a check reads, and a reason per unknown column."""
    cols: list[tuple[str, str]] = []
    unknown: list[str] = []
    for experiment in experiments:
        if data.frame(experiment) is None:
            unknown.append(f"no results for {experiment}")
            continue
        parts = data.partitions(experiment)
        if check.distributions:
            parts = [p for p in parts if data.distributions(experiment, p) in check.distributions]
            if not parts:
                wanted = "/".join(str(d) for d in check.distributions)
                unknown.append(f"{experiment}: no column with {wanted} distributions")
        cols += [(experiment, p) for p in parts]
    return cols, unknown


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}"


def _w(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3g}"


def _accuracy_check(check: Check, data: _Data, experiments: Sequence[str]) -> _Outcome:
    cols, unknown = _columns(data, experiments, check)
    several = len(experiments) > 1
    sign, _ = OPS[check.op or ">"]

    def acc(method: str, col: tuple[str, str]) -> float | None:
        return data.accuracy(col[0], col[1], method, check.metric or "", check.round_fraction)

    def label(col: tuple[str, str]) -> str:
        return data.label(col[0], col[1], several)

    if check.type in ("compare", "above_all"):
        firsts = (check.a,) if check.type == "compare" else check.methods
        seconds = (check.b,) if check.type == "compare" else check.baselines
        slack = -check.tolerance if OPS[check.op or ">"][1] else check.tolerance

        def margin(x: float | None, y: float | None) -> Margin:
            return None if x is None or y is None else sign * (x - y) + slack
    else:  # within
        firsts, seconds = check.methods, (check.reference,)

        def margin(x: float | None, y: float | None) -> Margin:
            return None if x is None or y is None else check.tolerance - abs(x - y)

    groups = []
    for first in firsts:
        for second in seconds:
            assert first is not None and second is not None
            groups.append([margin(acc(first, c), acc(second, c)) for c in cols]
                          + [None] * len(unknown))
    items: list[str] = []
    if check.type == "above_all" and check.quantifier == "any":
        head = f"{'/'.join(firsts)} vs each of {', '.join(seconds)}, best column"
        for first in firsts:
            for second in seconds:
                scored = [(margin(acc(first, c), acc(second, c)), c) for c in cols]
                known = [(m, c) for m, c in scored if m is not None]
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
    items += [f"no runs of {m}" for m in (*firsts, *seconds)
              if cols and all(acc(m, c) is None for c in cols)]
    return _Outcome(head=head, groups=groups, items=items + unknown)


def _trend_check(check: Check, data: _Data, experiments: Sequence[str]) -> _Outcome:
    terms: list[Margin] = []
    texts: list[str] = []
    method = check.method or ""
    for experiment in experiments:
        if data.frame(experiment) is None:
            terms.append(None)
            texts.append(f"no results for {experiment}")
            continue
        counts = {p: data.distributions(experiment, p) for p in data.partitions(experiment)}
        counts = {p: n for p, n in counts.items() if n > 0}
        if len(set(counts.values())) < 2:
            terms.append(None)
            texts.append(f"{experiment}: fewer than two numbers of distributions")
            continue
        few = min(counts, key=lambda p: counts[p])
        many = max(counts, key=lambda p: counts[p])
        lo = data.accuracy(experiment, few, method, check.metric or "", check.round_fraction)
        hi = data.accuracy(experiment, many, method, check.metric or "", check.round_fraction)
        name = data.experiment_labels.get(experiment, experiment)
        if lo is None or hi is None:
            terms.append(None)
            texts.append(f"{name}: no runs of {method} in both columns")
            continue
        terms.append(lo - hi if check.direction == "decreasing" else hi - lo)
        texts.append(f"{name}: {counts[few]} distributions {_pct(lo)} -> "
                     f"{counts[many]} distributions {_pct(hi)}")
    return _Outcome(head=f"{method} {check.metric}", groups=[terms], items=texts)


def _same_mass(run: _WeightRun, include_self: bool) -> float | None:
    import numpy as np

    final = run.final
    shares = []
    for i, client in enumerate(run.clients):
        group = run.groups.get(int(client), -1)
        if group < 0:
            continue
        same = np.array([run.groups.get(int(p), -1) == group and (include_self or p != client)
                         for p in run.peers])
        total = final[i].sum()
        if total <= 0:
            return None
        shares.append(final[i][same].sum() / total)
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


#: Why a weight statistic is undefined for a run.
_UNDEFINED = {
    "weight_mass": "no client with a distribution id, or a zero weight row",
    "group_contrast": "no two clients of one distribution, or none of two",
    "peak": "a zero weight row",
    "variation": "weights of a single round",
    "components_used": "no distribution ids",
}


def _weight_check(check: Check, data: _Data, experiments: Sequence[str]) -> _Outcome:
    import numpy as np

    cols, unknown = _columns(data, experiments, check)
    several = len(experiments) > 1

    def column(method: str | None, col: tuple[str, str], stat: Any,
               undefined: str) -> tuple[list[Any] | None, str]:
        """Per-run values of ``stat`` in a column, or ``None`` and the reason."""
        got = data.weight_runs(col[0], method or "")
        if isinstance(got, str):
            return None, got
        items = got.get(col[1])
        if not items:
            return None, f"no weight rows of {method}"
        values = [stat(r) for r in items]
        if any(v is None for v in values):
            return None, undefined
        return values, ""

    terms: list[Margin] = []
    texts: list[str] = []
    for col in cols:
        where = data.label(col[0], col[1], several)
        if check.type == "weight_compare":
            stat = _peak if check.statistic == "peak" else _variation
            undefined = _UNDEFINED[check.statistic or ""]
            (va, ra), (vb, rb) = (column(m, col, stat, undefined) for m in (check.a, check.b))
            xa = None if va is None else float(np.mean(va))
            xb = None if vb is None else float(np.mean(vb))
            sign = OPS[check.op or ">"][0]
            terms.append(None if xa is None or xb is None else sign * (xa - xb))
            reasons = "; ".join(r for r in dict.fromkeys((ra, rb)) if r)
            texts.append(f"{where}: {_w(xa)} vs {_w(xb)}" + (f" ({reasons})" if reasons else ""))
            continue
        stat = {"weight_mass": lambda r: _same_mass(r, check.include_self),
                "group_contrast": _contrast, "components_used": _used}[check.type]
        values, reason = column(check.method, col, stat, _UNDEFINED[check.type])
        if values is None:
            terms.append(None)
            texts.append(f"{where}: n/a ({reason})")
        elif check.type == "weight_mass":
            value = float(np.mean(values))
            terms.append(value - float(check.threshold or 0.0))
            texts.append(f"{where}: {_w(value)}")
        elif check.type == "group_contrast":
            within = float(np.mean([v[0] for v in values]))
            across = float(np.mean([v[1] for v in values]))
            terms.append(within - across)
            texts.append(f"{where}: within {_w(within)} vs across {_w(across)}")
        else:  # components_used
            used = float(np.mean([v[0] for v in values]))
            dists = float(np.mean([v[1] for v in values]))
            terms.append(dists - used)
            texts.append(f"{where}: {used:.2f} components used for {dists:g} distributions")
    if check.type == "weight_mass":
        head = f"{check.method} same-distribution share (threshold {check.threshold:g})"
    elif check.type == "weight_compare":
        head = f"{check.statistic} weight {check.a} vs {check.b}"
    else:
        head = f"{check.method} weight"
    return _Outcome(head=head, groups=[terms + [None] * len(unknown)],
                    items=[*texts, *unknown])


#: Margins closer to zero than this are ties (zero): float rounding of equal results,
#: e.g. two methods with the same correct counts whose accuracies were summed in
#: another order (1e-6 points is far below one test sample).
TIES: Mapping[str, float] = {"pp": 1e-6, "weight": 1e-12, "components": 1e-9}


def _evaluate(check: Check, data: _Data, experiments: Sequence[str]) -> _Outcome:
    if check.type in ("compare", "above_all", "within"):
        outcome = _accuracy_check(check, data, experiments)
    elif check.type == "trend":
        outcome = _trend_check(check, data, experiments)
    else:
        outcome = _weight_check(check, data, experiments)
    tie = TIES[check.unit]
    outcome.groups = [[None if t is None else (0.0 if abs(t) < tie else t) for t in g]
                      for g in outcome.groups]
    return outcome


def evaluate_claims(claims: Sequence[Claim], agg: pd.DataFrame | None, scale: str, *,
                    labels: Mapping[str, str] | None = None,
                    experiment_labels: Mapping[str, str] | None = None) -> pd.DataFrame:
    """Evaluate ``claims`` at ``scale`` against an aggregate; one row per :func:`row_keys`.

    ``agg`` is a concatenation of aggregated run tables (several experiments), or
    ``None`` when there are none (every claim is then missing). ``labels`` (partition
    id -> display label) and ``experiment_labels`` name the columns in the numbers
    text. Returns a frame with :data:`COLUMNS`; ``margin`` is NaN when missing.
    Raises ``ValueError`` for an unknown scale or inconsistent results (as the tables
    do: e.g. runs of different settings in one cell).
    """
    import pandas as pd

    if scale not in SCALES:
        raise ValueError(f"claims: unknown scale {scale!r}; expected one of {list(SCALES)}")
    data = _Data(agg, dict(labels or {}), dict(experiment_labels or {}))
    rows = []
    for claim in claims:
        for group in _row_groups(claim, scale):
            base = {"id": claim.id, "paper": claim.paper, "where": claim.where,
                    "claim": claim.claim, "experiment": " + ".join(group),
                    "predicate": claim.check.describe(), "unit": claim.check.unit}
            if not group:
                rows.append({**base, "numbers": f"no experiment at the {scale} scale",
                             "status": "missing", "margin": float("nan")})
                continue
            outcome = _evaluate(claim.check, data, group)
            status, margin = combine(outcome.groups, claim.check.quantifier,
                                     claim.check.strict)
            numbers = f"{outcome.head}: " + "; ".join(dict.fromkeys(outcome.items))
            if claim.planned and status == "missing":
                numbers = f"planned experiment; {numbers}"
            rows.append({**base, "numbers": numbers, "status": status,
                         "margin": float("nan") if margin is None else margin})
    return pd.DataFrame(rows, columns=list(COLUMNS))


# --------------------------------------------------------------------------- writing
def _md(text: Any) -> str:
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _margin_text(margin: float, unit: str) -> str:
    if margin != margin:  # NaN
        return "—"
    if unit == "weight":
        return f"{margin:+.3g} {unit}"
    return f"{margin:+.2f} {unit}"


def write_claims(frame: pd.DataFrame, md_path: str | os.PathLike[str],
                 csv_path: str | os.PathLike[str], *, scale: str) -> None:
    """Write an :func:`evaluate_claims` frame as Markdown and CSV, atomically."""
    from pflrepro.io import write_text

    missing = [c for c in COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"write_claims: the frame lacks column(s) {missing}")
    counts = {s: int((frame["status"] == s).sum()) for s in STATUSES}
    lines = [f"# The papers' claims against our results ({scale} scale)", "",
             ", ".join(f"{n} {s}" for s, n in counts.items()) + f" of {len(frame)} rows.", "",
             "| id | paper | where | claim (our words) | experiment | predicate "
             "| our numbers | status | margin |",
             "|:--|:--|:--|:--|:--|:--|:--|:--|--:|"]
    for row in frame.itertuples(index=False):
        status = f"**{row.status}**" if row.status == "fails" else row.status
        cells = [row.id, row.paper, row.where, row.claim, row.experiment or "—",
                 row.predicate, row.numbers]
        lines.append("| " + " | ".join(_md(c) for c in cells)
                     + f" | {status} | {_margin_text(float(row.margin), row.unit)} |")
    lines += ["", "Status: holds / fails as the predicate says; missing when data it needs "
              "are absent and the data present do not decide it (a column that fails an "
              "'every column' claim makes it fail; absent data never make a claim hold). "
              "Margin: signed, positive = holds by that much (worst column; best column for "
              "'some column'); pp = percentage points of accuracy (the tables' numbers: "
              "mean over runs); weight = learned client weights at the final round, or "
              "their change summed over rounds (variation), mean over runs.", ""]
    write_text(md_path, "\n".join(lines))
    write_text(csv_path, frame[list(COLUMNS)].to_csv(index=False, lineterminator="\n"))
