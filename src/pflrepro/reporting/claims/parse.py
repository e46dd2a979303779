"""Claims files and designs: what is claimed, what a check needs.

:func:`load_claims` reads ``config/claims.yaml`` into :class:`Claim` objects, each
with its typed :class:`Check` (the check types and their fields: the package
docstring, :mod:`pflrepro.reporting.claims`) and the file's ``ties`` (the tie tolerance
of each unit, :data:`UNITS`), refusing a malformed file with a :class:`ClaimsError`
that names the claim and the key; :func:`row_keys` lists the rows a scale gives. A
:class:`~.design.Design` (:mod:`.design`, re-exported here) says which columns, methods
and runs each experiment has. Imports neither numpy nor pandas: the workflow parse
loads claims.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pflrepro.config import SCALES
from pflrepro.reporting.claims.design import Design, design_json, design_of, parse_design
from pflrepro.reporting.claims.power import Power, parse_power

__all__ = ["ACCURACY_METRICS", "BASES", "CHECK_TYPES", "COLUMNS", "OPS", "PAPERS", "UNITS",
           "VERDICTS", "Check", "Claim", "ClaimsError", "Design", "claim_experiments",
           "design_json", "design_of", "load_claims", "parse_claims", "parse_design",
           "row_groups", "row_keys"]

PAPERS = ("FedeRiCo", "FedAMP", "PerFed-CKT", "FedMix")
#: The claims table of each scale, by name (results/tables/<name>.{md,csv}).
CLAIMS_TABLES: Mapping[str, str] = {"paper": "claims", "cpu": "claims_cpu"}
VERDICTS = ("holds", "fails", "inconclusive", "undecidable", "incomplete", "missing")
#: What a row's verdict rests on: an independent check, the protocol's arithmetic (the
#: claim's ``by_design``) or a choice made with the claim's statement (``selected_by``).
BASES = ("independent", "by design", "selection")
#: Units of the margins; the claims file states each one's tie tolerance (``ties``).
UNITS = ("pp", "weight", "models", "components", "clusters", "ratio")
#: The ``ties`` value of ``pp``: one test row of the column (its size is in the runs).
ONE_TEST_ROW = "one test row"
#: The smallest tie tolerance of each unit but ``pp``: its resolution (weights and traffic
#: ratios as the table prints them, to three decimals; one model, component or cluster).
RESOLUTION = {"weight": 0.001, "models": 1.0, "components": 1.0, "clusters": 1.0,
              "ratio": 0.001}
SCOPES = ("each", "together")
QUANTIFIERS = ("all", "any", "mean")
#: Accuracy metrics: name -> (table metric of ``accuracy_table``, its accuracy column).
ACCURACY_METRICS: dict[str, tuple[str, str] | None] = {
    "weighted_final": ("weighted_final", "weighted_final"),
    "mean_bmta": ("mean_bmta", "mean_bmta"),
    "mean_final": ("mean_bmta", "mean_final"),
    "weighted_at": None,  # per round, see checks._Data.accuracy
}
#: Comparison operators: name -> (sign of ``a - b`` in the margin, strict).
OPS: dict[str, tuple[int, bool]] = {">": (1, True), ">=": (1, False),
                                     "<": (-1, True), "<=": (-1, False)}
STATISTICS = ("peak", "variation", "same_share")
#: Recorded matrices a ``record_peak`` check reads (metric names of :mod:`pflrepro.store.results`).
RECORDS = ("weight", "gate_mass", "expert_posterior")
#: Pooling of ``above_all``: each method against each baseline, or their means.
POOLS = ("each", "mean")
DIRECTIONS = ("decreasing", "increasing")
#: Columns of :func:`evaluate_claims`' frame (and of the CSV).
COLUMNS = ("id", "paper", "where", "claim", "experiment", "predicate", "numbers", "verdict",
           "margin", "unit", "n", "ci_low", "ci_high", "level", "basis", "pairs_needed",
           "power")

_ID = re.compile(r"^[a-z0-9][a-z0-9-]*$")
_CLAIM_REQUIRED = ("id", "paper", "where", "claim", "experiments", "check")
_CLAIM_OPTIONAL = ("scope", "planned", "by_design", "selected_by", "headline")
#: Per check type: (required fields, optional fields), ``type`` aside.
_FIELDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "compare": (("metric", "a", "b", "op"),
                ("tolerance", "quantifier", "distributions", "round_fraction")),
    "above_all": (("metric", "methods", "baselines"),
                  ("op", "tolerance", "quantifier", "distributions", "round_fraction",
                   "pool")),
    "within": (("metric", "methods", "reference", "tolerance"),
               ("quantifier", "distributions", "round_fraction")),
    "trend": (("metric", "method", "direction"), ("quantifier", "round_fraction")),
    "weight_mass": (("method", "threshold"), ("quantifier", "distributions")),
    "self_weight": (("method", "threshold"), ("quantifier", "distributions")),
    "weight_support": (("method", "threshold"), ("quantifier", "distributions")),
    "weight_distance": (("a", "b", "tolerance"), ("quantifier", "distributions")),
    "group_contrast": (("method", "min_ratio", "min_gap"), ("quantifier", "distributions")),
    "weight_compare": (("statistic", "a", "b", "op"), ("quantifier", "distributions")),
    "components_used": (("method",), ("quantifier", "distributions")),
    "communication_ratio": (("method", "baselines", "factor", "op"),
                            ("quantifier", "distributions")),
    "clusters_used": (("method",), ("quantifier", "distributions")),
    "record_peak": (("method", "record", "threshold"), ("quantifier", "distributions")),
    "across_experiments": (("metric", "method", "tolerance"),
                           ("reference", "quantifier", "round_fraction")),
    "communication_across": (("method", "factor", "op"), ("reference", "quantifier")),
    "unchecked": (("reason",), ()),
}
CHECK_TYPES = tuple(_FIELDS)
_UNITS = {"weight_mass": "weight", "group_contrast": "weight", "weight_compare": "weight",
          "self_weight": "weight", "weight_distance": "weight", "record_peak": "weight",
          "weight_support": "models", "components_used": "components",
          "clusters_used": "clusters", "communication_ratio": "ratio",
          "communication_across": "ratio", "unchecked": "pp"}


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
    min_ratio: float | None = None
    min_gap: float | None = None
    factor: float | None = None
    statistic: str | None = None
    direction: str | None = None
    quantifier: str = "all"
    distributions: tuple[int, ...] = ()
    record: str | None = None
    pool: str = "each"
    reason: str | None = None

    def method_names(self) -> tuple[str, ...]:
        """Every method the check reads, in order of appearance."""
        names = [self.a, self.b, *self.methods, *self.baselines, self.reference, self.method]
        return tuple(dict.fromkeys(n for n in names if n is not None))

    @property
    def unit(self) -> str:
        """Unit of the margin: pp, weight, models, components, clusters or ratio."""
        return _UNITS.get(self.type, "pp")

    @property
    def strict(self) -> bool:
        """Whether the margin must be above zero (else at least zero)."""
        if self.type in ("compare", "above_all", "weight_compare", "communication_ratio",
                         "communication_across"):
            return OPS[self.op or ">"][1]
        return self.type in ("group_contrast", "trend")

    def describe(self) -> str:
        """The predicate in one line, e.g. ``federico > fedavg, local (weighted_final) ...``."""
        metric = self.metric or ""
        if self.metric == "weighted_at":
            metric = f"weighted accuracy at {self.round_fraction:g} of the rounds"
        where = {"all": "in every column", "any": "in some column",
                 "mean": "on the mean over the columns"}[self.quantifier]
        if self.distributions:
            where += f" with {'/'.join(str(d) for d in self.distributions)} distributions"
        tol = f", tolerance {self.tolerance:g} pp" if self.tolerance else ""
        if self.type == "compare":
            return f"{self.a} {self.op} {self.b} ({metric}{tol}) {where}"
        if self.type == "above_all" and self.pool == "mean":
            return (f"mean of {', '.join(self.methods)} {self.op or '>'} mean of "
                    f"{', '.join(self.baselines)} ({metric}{tol}) {where}")
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
            return (f"{self.method}: mean share of final peer weight (itself excluded) on "
                    f"same-distribution peers >= {self.threshold:g} {where}")
        if self.type == "group_contrast":
            return (f"{self.method}: mean final weight within distributions > "
                    f"{self.min_ratio:g} x across distributions and >= across + "
                    f"{self.min_gap:g} {where}")
        if self.type == "weight_compare":
            return f"{self.statistic} client weight: {self.a} {self.op} {self.b} {where}"
        if self.type == "self_weight":
            return (f"{self.method}: mean final weight on itself of the clients alone in "
                    f"their distribution >= {self.threshold:g} {where}")
        if self.type == "weight_support":
            return (f"{self.method}: mean number of models with final weight >= "
                    f"{self.threshold:g} <= mean size of the client's distribution {where}")
        if self.type == "weight_distance":
            return (f"mean |final w_ij of {self.a} - of {self.b}| <= {self.tolerance:g} "
                    f"(runs paired by seed pair) {where}")
        if self.type == "clusters_used":
            return (f"{self.method}: distinct final cluster ids < distributions {where}")
        if self.type == "record_peak":
            return (f"{self.method}: mean over rows of the largest share of its final "
                    f"{self.record} row >= {self.threshold:g} {where}")
        if self.type == "communication_across":
            return (f"scalars communicated: {self.reference or self.method} (2nd experiment) "
                    f"{self.op} {self.factor:g} x {self.method} (1st experiment) {where}")
        if self.type == "unchecked":
            return f"not checked: {self.reason}"
        if self.type == "across_experiments":
            return (f"|{self.method} (1st experiment) - {self.reference or self.method} "
                    f"(2nd experiment)| <= {self.tolerance:g} pp ({metric}) {where}")
        if self.type == "communication_ratio":
            return (f"scalars communicated: each of {', '.join(self.baselines)} {self.op} "
                    f"{self.factor:g} x {self.method} {where}")
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
    #: Tie tolerance of the margin in its unit (the file's ``ties``); ``None``: one test
    #: row of the columns read (``pp``).
    tie: float | None = None
    #: The protocol's arithmetic that fixes the outcome (basis ``by design``).
    by_design: str | None = None
    #: The choice made with this claim's statement (basis ``selection``).
    selected_by: str | None = None
    #: A headline claim: the cap on its experiments' seed pairs (the file's ``power``,
    #: :mod:`.power`); ``None`` for the other claims.
    pair_cap: int | None = None

    @property
    def basis(self) -> str:
        """What the row's verdict rests on (one of :data:`BASES`)."""
        if self.by_design:
            return "by design"
        return "selection" if self.selected_by else "independent"


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
    """Check a loaded claims document (``claims``, ``ties``, optional ``power``)."""
    if not isinstance(raw, Mapping) or not {"claims", "ties"} <= set(raw) <= {
            "claims", "ties", "power"}:
        keys = sorted(raw) if isinstance(raw, Mapping) else type(raw).__name__
        raise ClaimsError(f"{where}: expected a mapping with the keys 'claims' and 'ties' "
                          f"(and optionally 'power'), got {keys}")
    ties = _ties(raw["ties"], f"{where}: ties")
    power = parse_power(raw["power"], f"{where}: power", ClaimsError) if "power" in raw else None
    items = raw["claims"]
    if not isinstance(items, list) or not items:
        raise ClaimsError(f"{where}: 'claims' must be a non-empty list")
    claims: list[Claim] = []
    seen: set[str] = set()
    for k, item in enumerate(items):
        label = f"{where}: claims[{k}]"
        if isinstance(item, Mapping) and isinstance(item.get("id"), str):
            label += f" (id {item['id']!r})"
        claim = _claim(item, label, ties, power)
        if claim.id in seen:
            raise ClaimsError(f"{label}: id {claim.id!r} is used twice")
        seen.add(claim.id)
        claims.append(claim)
    return claims


def _ties(raw: Any, where: str) -> dict[str, float | None]:
    """Unit -> tie tolerance (``None``: one test row); each with its reason."""
    if not isinstance(raw, Mapping):
        raise ClaimsError(f"{where}: expected a mapping unit -> {{value, reason}}, got "
                          f"{type(raw).__name__}")
    missing = [u for u in UNITS if u not in raw]
    if missing:
        raise ClaimsError(f"{where}: missing unit(s) {missing}")
    unknown = sorted(str(u) for u in raw if u not in UNITS)
    if unknown:
        raise ClaimsError(f"{where}: unknown unit(s) {unknown}; the units are {list(UNITS)}")
    out: dict[str, float | None] = {}
    for unit in UNITS:
        at = f"{where.rsplit(': ', 1)[0]}: ties.{unit}"
        item = raw[unit]
        _keys(item, ("value", "reason"), (), at)
        _text(item["reason"], f"{at}.reason")
        value = item["value"]
        if unit == "pp":
            if value != ONE_TEST_ROW:
                raise ClaimsError(f"{at}: {value!r} is not {ONE_TEST_ROW!r} (an accuracy's "
                                  "resolution is one test row of its column)")
            out[unit] = None
            continue
        number = _number(value, f"{at}.value", 0.0)
        if number < RESOLUTION[unit]:
            raise ClaimsError(f"{at}: {number:g} is below the resolution of {unit} "
                              f"({RESOLUTION[unit]:g})")
        out[unit] = number
    return out


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
    "min_ratio": lambda v, w: _number(v, w, 1.0, low_open=True),
    "min_gap": lambda v, w: _number(v, w, 0.0, 1.0),
    "factor": lambda v, w: _number(v, w, 1.0),
    "statistic": lambda v, w: _choice(v, STATISTICS, w),
    "direction": lambda v, w: _choice(v, DIRECTIONS, w),
    "quantifier": lambda v, w: _choice(v, QUANTIFIERS, w),
    "distributions": _distributions,
    "record": lambda v, w: _choice(v, RECORDS, w),
    "pool": lambda v, w: _choice(v, POOLS, w),
    "reason": _text,
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
    if kind in ("above_all", "communication_ratio", "communication_across"):
        if check.op not in (None, ">", ">="):
            raise ClaimsError(f"{where}.op: {kind} takes '>' or '>=', got {check.op!r}")
    if kind == "communication_ratio" and check.method in check.baselines:
        raise ClaimsError(f"{where}: {check.method!r} is both the method and a baseline")
    if check.quantifier == "mean" and kind not in ("compare", "above_all"):
        raise ClaimsError(f"{where}.quantifier: 'mean' (over columns) is for compare and "
                          f"above_all, not {kind}")
    if kind == "above_all":
        both = sorted(set(check.methods) & set(check.baselines))
        if both:
            raise ClaimsError(f"{where}: {both} both in methods and baselines")
    if kind in ("compare", "weight_compare", "weight_distance") and check.a == check.b:
        raise ClaimsError(f"{where}: a and b are the same method {check.a!r}")
    if kind == "within" and check.reference in check.methods:
        raise ClaimsError(f"{where}: the reference {check.reference!r} is among the methods")
    if (check.metric == "weighted_at") != (check.round_fraction is not None):
        raise ClaimsError(f"{where}: round_fraction is required with metric 'weighted_at' "
                          "and only there")
    return check


def _claim(item: Any, where: str, ties: Mapping[str, float | None],
           power: Power | None = None) -> Claim:
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
    check = _check(item["check"], f"{where}.check")
    scope = _choice(item.get("scope", "each"), SCOPES, f"{where}.scope")
    if check.type in ("across_experiments", "communication_across"):
        if scope != "together":
            raise ClaimsError(f"{where}.scope: {check.type} compares two experiments "
                              "in one row; it needs scope: together")
        for scale, names in experiments.items():
            if names and len(names) != 2:
                raise ClaimsError(f"{where}.experiments.{scale}: {check.type} needs "
                                  f"exactly two experiments (tested, reference), got "
                                  f"{list(names)}")
    basis = {k: _text(item[k], f"{where}.{k}") for k in ("by_design", "selected_by")
             if k in item}
    if len(basis) == 2:
        raise ClaimsError(f"{where}: both by_design and selected_by; a row rests on one")
    headline = _bool(item.get("headline", False), f"{where}.headline")
    if headline and power is None:
        raise ClaimsError(f"{where}.headline: a headline claim needs the file's 'power' "
                          "block (the cap on its experiments' seed pairs)")
    return Claim(id=cid, paper=_choice(item["paper"], PAPERS, f"{where}.paper"),
                 where=_text(item["where"], f"{where}.where"),
                 claim=_text(item["claim"], f"{where}.claim"),
                 experiments=experiments, check=check, scope=scope,
                 planned=_bool(item.get("planned", False), f"{where}.planned"),
                 tie=ties[check.unit], pair_cap=power.cap if headline else None,
                 **basis)


def claim_experiments(claims: Iterable[Claim], scale: str) -> list[str]:
    """Every experiment the claims name at ``scale``, first mention first."""
    return list(dict.fromkeys(e for c in claims for e in c.experiments.get(scale, ())))


def row_keys(claims: Iterable[Claim], scale: str) -> list[tuple[str, str]]:
    """(claim id, experiment text) of each row :func:`evaluate_claims` gives at ``scale``."""
    out = []
    for claim in claims:
        for group in row_groups(claim, scale):
            out.append((claim.id, " + ".join(group)))
    return out


def row_groups(claim: Claim, scale: str) -> list[tuple[str, ...]]:
    """The experiment groups of ``claim``'s rows at ``scale`` (one per row)."""
    names = claim.experiments.get(scale, ())
    if not names:  # not a claim about this scale's designs: no row
        return []
    return [names] if claim.scope == "together" else [(n,) for n in names]
