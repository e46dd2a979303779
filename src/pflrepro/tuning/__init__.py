"""Unstated hyperparameters chosen on validation data, never on the test set.

An experiment's ``tune:`` block names, per method, the hyperparameters to select and
their grid (a list, or ``{log: [lo, hi], num: n}``: ``n`` log-spaced values), and the
tuning budget (``rounds``, training ``seeds``), the validation fraction and the
selection criterion. Every grid point is one ordinary training run (``pflrepro train``)
on a *validation partition* (:func:`validation_partition`): each client's training rows
only, a seeded fraction of them held out and evaluated as the run's "test" rows. The
partition's test rows are dropped before anything else, so a tuning run cannot load,
train on or evaluate a single test image (:func:`check_no_test_rows` refuses a
validation partition holding one).

Choices (ours: the papers state no tuning procedure):

* validation rows: ``round(fraction · n_train)`` rows of each client's training rows
  (at least one, and one left to train on), drawn without replacement by
  ``numpy_generator(split_seed, SETUP_ROUND, client, "validation")``; the default
  fraction is :data:`DEFAULT_FRACTION`;
* one selection per (partition, split seed) by default (``pool: split``): the
  validation rows of split ``s`` are train rows of split ``s`` only (another split's
  test rows may be among them); ``pool: partition`` averages each point's score over
  the partition's splits (each scored on its own split's validation rows) and gives
  every split the one best point, so a table cell over the splits holds one setting;
* criteria (:data:`CRITERIA`): ``best_mean`` (default) is the best over evaluated
  rounds of the unweighted mean client validation accuracy (the BMTA of FedAMP's
  tables, on validation), ``final_mean`` the mean at the last round; either is
  averaged over the tuning seeds; a tie goes to the first grid point (grid order),
  and scores within :data:`TIE_ROWS` of one validation row of the best (in accuracy,
  ``TIE_ROWS / n`` for ``n`` validation rows of the run, all clients pooled) are ties:
  a difference smaller than one row's worth is float summation noise or a coin flip,
  not a better setting (:func:`select`);
* values tied to the tuned ones are declared by the algorithm class as
  ``tied_values(point, clients) -> params`` (e.g. FedAMP: α = alpha_ratio · σ); a key
  the method's config fixes is not tuned (the config wins) and, tied or not, keeps its
  value;
* a ``training:`` block tunes a training setting every method of the experiment shares
  (the lr), selected by one method's validation score (:mod:`pflrepro.tuning.shared`).

Layer (tests/unit/test_layers.py): with :mod:`pflrepro.config`, what to run; it may
import the store, models, data, training and algorithms layers, never reporting,
pipeline or the CLI.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from pflrepro.seeding import SETUP_ROUND, numpy_generator
from pflrepro.tuning.grid import Grid, TuneError, edge, parse_grid, point_id
from pflrepro.tuning.shared import SharedTune, parse_shared

if TYPE_CHECKING:
    import pandas as pd

#: Share of each client's training rows held out for validation unless a config says.
DEFAULT_FRACTION = 0.2
#: Selection criteria (see the module docstring).
CRITERIA = ("best_mean", "final_mean")
#: Scores within this many validation rows' worth of accuracy (``TIE_ROWS / n``, n the
#: pooled validation rows of a run) of the best are ties, resolved by grid order.
TIE_ROWS = 0.5
#: What one selection covers: one (partition, split seed), or a partition's every split.
POOLS = ("split", "partition")
#: Purpose tag of the validation draws (:func:`pflrepro.seeding.derive_seed`).
PURPOSE = "validation"
#: Partition-file metadata key of a validation partition (beside the partition's own).
VALIDATION_KEY = "validation_of"


# ------------------------------------------------------------------------------ grids
@dataclass(frozen=True)
class TuneConfig:
    """An experiment's ``tune:`` block, parsed."""

    methods: Mapping[str, tuple[Grid, ...]]
    rounds: int
    seeds: tuple[int, ...]
    fraction: float = DEFAULT_FRACTION
    criterion: str = "best_mean"
    #: the shared training block; its ``by`` method's grids are in ``methods`` too
    training: SharedTune | None = None
    #: why the budget is what it is, printed under the tuning tables
    rounds_note: str = ""
    #: one selection per (partition, split) or per partition (:data:`POOLS`)
    pool: str = "split"

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (Snakemake params: a change reruns the tuning)."""
        shared = {} if self.training is None else {"training": self.training.to_dict()}
        pool = {} if self.pool == "split" else {"pool": self.pool}
        return {"rounds": self.rounds, "seeds": list(self.seeds), "fraction": self.fraction,
                "criterion": self.criterion, "rounds_note": self.rounds_note, **shared, **pool,
                "methods": {m: {g.key: list(g.values) for g in grids}
                            for m, grids in self.methods.items()}}


def parse_tune(spec: Any, where: str, methods: Mapping[str, Any],
               tunable: Mapping[str, Sequence[str]], rounds: int) -> TuneConfig | None:
    """Parse a ``tune:`` block; ``None`` when absent or when the config fixes every key.

    ``methods``: method name -> its fixed params (the config's ``methods`` entry);
    ``tunable``: method name -> the keys its algorithm lets one tune
    (:func:`tunable_keys`); ``rounds``: the experiment's rounds (the budget's upper bound).
    """
    if spec is None:
        return None
    if not isinstance(spec, Mapping):
        raise TuneError(f"{where}: must be a mapping")
    unknown = sorted(set(spec) - {"methods", "rounds", "seeds", "fraction", "criterion",
                                  "training", "rounds_note", "pool"})
    if unknown:
        raise TuneError(f"{where}: unknown key(s) {unknown}")
    budget = int(spec.get("rounds", rounds))
    if not 1 <= budget <= rounds:
        raise TuneError(f"{where}.rounds: must be 1..{rounds} (the experiment's rounds), "
                        f"got {budget}")
    seeds = tuple(int(s) for s in spec.get("seeds", [0]))
    if not seeds or len(set(seeds)) != len(seeds):
        raise TuneError(f"{where}.seeds: a non-empty list of distinct seeds, got {seeds}")
    fraction = float(spec.get("fraction", DEFAULT_FRACTION))
    if not 0 < fraction < 1:
        raise TuneError(f"{where}.fraction: must be in (0, 1), got {fraction}")
    criterion = str(spec.get("criterion", "best_mean"))
    if criterion not in CRITERIA:
        raise TuneError(f"{where}.criterion: {criterion!r} is not one of {list(CRITERIA)}")
    pool = str(spec.get("pool", "split"))
    if pool not in POOLS:
        raise TuneError(f"{where}.pool: {pool!r} is not one of {list(POOLS)}")
    parsed: dict[str, tuple[Grid, ...]] = {}
    shared = None
    if spec.get("training") is not None:
        shared = parse_shared(spec["training"], f"{where}.training", methods,
                              spec.get("methods") or {})
        parsed[shared.by] = shared.grids
    for method, grids in (spec.get("methods") or {}).items():
        if method not in methods:
            raise TuneError(f"{where}.methods: {method!r} is not a method of the experiment")
        if not isinstance(grids, Mapping) or not grids:
            raise TuneError(f"{where}.methods.{method}: a mapping key -> grid")
        keep = []
        for key, grid in grids.items():
            if key not in tunable.get(method, ()):
                raise TuneError(f"{where}.methods.{method}.{key}: not tunable; tunable: "
                                f"{sorted(tunable.get(method, ()))}")
            parsed_grid = parse_grid(key, grid, f"{where}.methods.{method}.{key}")
            if key not in methods[method]:  # a value the config fixes is not tuned
                keep.append(parsed_grid)
        if keep:
            parsed[method] = tuple(keep)
    if not parsed:
        return None
    return TuneConfig(methods=parsed, rounds=budget, seeds=seeds, fraction=fraction,
                      criterion=criterion, training=shared,
                      rounds_note=str(spec.get("rounds_note", "")), pool=pool)


def tunable_keys(algorithm: str) -> tuple[str, ...]:
    """The keys a ``tune:`` block may name for ``algorithm``.

    Its hyperparameters and the extra keys its ``tied_values`` reads (``TUNE_KEYS``,
    e.g. FedAMP's ``prox``).
    """
    import dataclasses

    from pflrepro.algorithms.registry import algorithm_info

    info = algorithm_info(algorithm)
    keys = [f.name for f in dataclasses.fields(info.Hyper)]
    return tuple(dict.fromkeys([*info.tune_keys, *keys]))


def grid_points(grids: Sequence[Grid]) -> list[dict[str, float]]:
    """Every combination of the grids' values, the first grid outermost."""
    return [dict(zip([g.key for g in grids], combo, strict=True))
            for combo in itertools.product(*(g.values for g in grids))]


def tied_params(algorithm: str, point: Mapping[str, float], clients: int,
                fixed: Mapping[str, Any]) -> dict[str, Any]:
    """The hyperparameters a grid point sets: the point and the values tied to it.

    The algorithm class declares ties as ``tied_values(values, clients)`` (``values``:
    the point over the config's fixed keys; returns hyperparameters); without one the
    point's keys are the hyperparameters. Keys in ``fixed`` (the method's config) are
    left out of the result: the config's values hold.
    """
    from pflrepro.algorithms import get_algorithm

    cls = get_algorithm(algorithm)
    tie = getattr(cls, "tied_values", None)
    params = dict(tie({**fixed, **point}, clients)) if tie is not None else dict(point)
    return {k: v for k, v in params.items() if k not in fixed}


# ---------------------------------------------------------------- validation data
def validation_partition(frame: pd.DataFrame, fraction: float, seed: int) -> pd.DataFrame:
    """The tuning runs' partition: each client's training rows, ``fraction`` held out.

    Test rows are dropped first. Of client k's training rows (sorted by data-set row)
    :func:`pflrepro.data.partition.test_size` many are drawn without replacement by
    ``numpy_generator(seed, SETUP_ROUND, k, "validation")`` and marked ``split =
    "test"`` (the engine evaluates them); the others stay ``train``.
    """
    from pflrepro.data.partition import test_size

    train = frame[frame["split"] == "train"].sort_values(["client", "index"], kind="stable")
    out = train.copy()
    split = out["split"].to_numpy(dtype=object).copy()
    for client in np.unique(out["client"].to_numpy()):
        rows = np.flatnonzero(out["client"].to_numpy() == client)
        n_val = test_size(len(rows), fraction)
        if n_val == 0:
            raise ValueError(f"client {client} has {len(rows)} training row(s): too few to "
                             "hold one out for validation")
        rng = numpy_generator(seed, SETUP_ROUND, int(client), PURPOSE)
        split[rows[rng.choice(len(rows), size=n_val, replace=False)]] = "test"
    out["split"] = split
    out = out.reset_index(drop=True)
    check_no_test_rows(out, frame)
    return out


def check_no_test_rows(validation: pd.DataFrame, original: pd.DataFrame) -> None:
    """Raise ``ValueError`` if ``validation`` holds a test row of ``original``."""
    test_rows = set(original.loc[original["split"] == "test", "index"].tolist())
    leaked = sorted(test_rows & set(validation["index"].tolist()))
    if leaked:
        raise ValueError(f"the validation partition holds {len(leaked)} test row(s) of the "
                         f"partition (first: {leaked[:5]}); tuning must never read them")


def write_validation_partition(partition: str, out: str, fraction: float, seed: int) -> None:
    """Read a partition file, write its validation partition (same metadata, plus ours)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pflrepro.data.partition import METADATA_KEY, read_partition
    from pflrepro.store.io import atomic_digested_path

    frame, meta = read_partition(partition)
    val = validation_partition(frame, fraction, seed)
    meta = {**meta, VALIDATION_KEY: {"fraction": fraction, "seed": seed}}
    table = pa.Table.from_pandas(val, preserve_index=False)
    table = table.replace_schema_metadata({**(table.schema.metadata or {}),
                                           METADATA_KEY: json.dumps(meta).encode()})
    with atomic_digested_path(out) as tmp:
        pq.write_table(table, tmp)


# ---------------------------------------------------------------------- selection
@dataclass(frozen=True)
class Trial:
    """One tuning run: its grid point, partition, split and seed, and its table."""

    point: Mapping[str, float]
    partition: str
    split: int
    seed: int
    frame: pd.DataFrame = field(repr=False)


def mean_accuracy_curve(frame: pd.DataFrame) -> pd.Series:
    """Per evaluated round: the unweighted mean over clients of the (validation) accuracy."""
    from pflrepro.store.results import TEST_ACCURACY

    rows = frame[(frame["metric"] == TEST_ACCURACY) & (frame["client"] >= 0)
                 & (frame["peer"] < 0)]
    if rows.empty:
        raise ValueError("a tuning run has no per-client accuracy rows")
    return rows.groupby("round")["value"].mean().sort_index()


def score(frame: pd.DataFrame, criterion: str) -> tuple[float, int]:
    """(score, round) of one run: best mean accuracy over rounds, or the last round's.

    The best round is the earliest reaching the best value.
    """
    curve = mean_accuracy_curve(frame)
    if criterion == "best_mean":
        best = float(curve.max())
        return best, int(curve.index[int(np.argmax(curve.to_numpy()))])
    if criterion == "final_mean":
        return float(curve.iloc[-1]), int(curve.index[-1])
    raise ValueError(f"unknown criterion {criterion!r}; known: {list(CRITERIA)}")


def xi_contrast(frame: pd.DataFrame) -> tuple[float, float]:
    """Mean ξ_ij (i ≠ j) at the last logged round over same-group and other-group pairs.

    NaN where the run logs no weights or has no pair of that kind.
    """
    from pflrepro.store.results import GROUP, WEIGHT

    w = frame[(frame["metric"] == WEIGHT) & (frame["client"] >= 0) & (frame["peer"] >= 0)]
    g = frame[(frame["metric"] == GROUP) & (frame["client"] >= 0) & (frame["peer"] < 0)]
    if w.empty or g.empty:
        return math.nan, math.nan
    w = w[(w["round"] == w["round"].max()) & (w["client"] != w["peer"])]
    group = g.drop_duplicates("client").set_index("client")["value"]
    same = w["client"].map(group).to_numpy() == w["peer"].map(group).to_numpy()
    vals = w["value"].to_numpy()
    within = float(vals[same].mean()) if same.any() else math.nan
    across = float(vals[~same].mean()) if (~same).any() else math.nan
    return within, across


def validation_rows(frame: pd.DataFrame) -> int:
    """The run's evaluated rows, all clients pooled (its ``n_test`` rows; 0: none logged)."""
    from pflrepro.store.results import N_TEST

    rows = frame[(frame["metric"] == N_TEST) & (frame["client"] >= 0)]
    return int(rows.drop_duplicates("client")["value"].sum())


def score_trials(trials: Sequence[Trial], criterion: str) -> pd.DataFrame:
    """One row per trial: point values, partition, split, seed, score, its round, ξ.

    ``last_round``: the run's last evaluated round (the budget's end); ``n_rows``: its
    validation rows, all clients pooled (:func:`validation_rows`).
    """
    import pandas as pd

    rows = []
    for t in trials:
        value, at = score(t.frame, criterion)
        within, across = xi_contrast(t.frame)
        rows.append({"partition": t.partition, "split": t.split, "point": point_id(t.point),
                     **{f"value_{k}": v for k, v in t.point.items()},
                     "seed": t.seed, "score": value, "round": at,
                     "last_round": int(mean_accuracy_curve(t.frame).index.max()),
                     "n_rows": validation_rows(t.frame),
                     "xi_within": within, "xi_across": across})
    return pd.DataFrame(rows)


def tie_tolerance(scores: pd.DataFrame) -> float:
    """``TIE_ROWS / n`` for the fewest pooled validation rows ``n`` among ``scores``.

    0 where the rows are not known (no ``n_rows`` column, or no rows logged).
    """
    if "n_rows" not in scores or scores.empty:
        return 0.0
    n = int(scores["n_rows"].min())
    return TIE_ROWS / n if n > 0 else 0.0


def select(scores: pd.DataFrame, points: Sequence[Mapping[str, float]],
           pool: str = "split") -> dict[tuple[str, int], dict[str, float]]:
    """Per (partition, split): the grid point with the highest mean score.

    ``pool="split"``: the mean over the seeds of that split; ``"partition"``: the mean
    over every split and seed of the partition, the one best point given to each of its
    splits. Ties go to the first point in ``points`` (grid order): every point whose
    mean lies within :func:`tie_tolerance` of the best mean ties with it. A point
    without a score for some (partition, split) raises ``ValueError``.
    """
    if pool not in POOLS:
        raise ValueError(f"pool {pool!r} is not one of {list(POOLS)}")
    order = [point_id(p) for p in points]
    by_id = {point_id(p): dict(p) for p in points}
    chosen: dict[tuple[str, int], dict[str, float]] = {}
    for (partition, split), sub in scores.groupby(["partition", "split"], sort=True):
        scored = set(sub["point"])
        missing = [p for p in order if p not in scored]
        if missing:
            raise ValueError(f"no tuning run of {missing} on {partition}, split {split}")
    by = ["partition", "split"] if pool == "split" else ["partition"]
    for key, sub in scores.groupby(by, sort=True):
        means = sub.groupby("point")["score"].mean()
        top, tolerance = float(means.max()), tie_tolerance(sub)
        best = next(p for p in order if means[p] >= top - tolerance)
        partition = key[0]
        for split in sorted(set(sub["split"])):
            chosen[(str(partition), int(split))] = by_id[best]
    return chosen


def selection_json(chosen: Mapping[tuple[str, int], Mapping[str, float]],
                   params: Mapping[tuple[str, int], Mapping[str, Any]],
                   training: bool = False) -> str:
    """The selection file: ``{partition: {split: {"point": ..., "params": ...}}}``.

    ``training``: the point is a shared training setting, also written as ``training``.
    """
    out: dict[str, dict[str, Any]] = {}
    for (partition, split), point in sorted(chosen.items()):
        entry = {"point": dict(point), "params": dict(params[(partition, split)])}
        if training:
            entry["training"] = dict(point)
        out.setdefault(partition, {})[str(split)] = entry
    return json.dumps(out, sort_keys=True, indent=1) + "\n"


def selected_params(selection: Mapping[str, Any], partition: str, split: int) -> dict[str, Any]:
    """The hyperparameters a final run of (partition, split) takes from a selection."""
    try:
        return dict(selection[partition][str(split)]["params"])
    except KeyError:
        raise ValueError(f"the tuning selection has no entry for partition {partition!r}, "
                         f"split {split}") from None


def note(grids: Sequence[Grid], chosen: Mapping[tuple[str, int], Mapping[str, float]],
         criterion: str, rounds: int, seeds: Sequence[int], fraction: float,
         labels: Mapping[str, str] | None = None, pool: str = "split") -> str:
    """One sentence per key: ``σ chosen on validation from {…}: …``.

    Each selected value names its partition (``labels``: id -> shown label) and split
    (``pool="partition"``: the partition once, its splits pooled), and whether it is
    the grid's lowest or highest value (:func:`edge`).
    """
    shown = dict(labels or {})
    parts = []
    for g in grids:
        if pool == "partition":
            first = {p: pt for (p, _), pt in chosen.items()}
            picked = ", ".join(f"{shown.get(p, p)} (its splits pooled): "
                               f"{pt[g.key]:.3g}{edge(g, pt[g.key])}"
                               for p, pt in sorted(first.items()))
        else:
            picked = ", ".join(f"{shown.get(p, p)} split {s}: {pt[g.key]:.3g}"
                               f"{edge(g, pt[g.key])}" for (p, s), pt in sorted(chosen.items()))
        values = ", ".join(f"{v:.3g}" for v in g.values)
        parts.append(f"{g.key} chosen on validation from {{{values}}}: {picked}")
    return ("; ".join(parts) + f" ({criterion.replace('_', ' ')} validation accuracy, "
            f"{rounds} rounds, seeds {list(seeds)}, {fraction:g} of each client's training "
            "rows held out; the test rows never read).")
