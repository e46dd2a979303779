"""Synthetic run tables, claims and designs for the claims tests (numbers by hand)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pflrepro.reporting.claims.checks import evaluate_claims
from pflrepro.reporting.claims.parse import (
    Design,
    parse_claims,
)
from pflrepro.store.results import GROUP, N_TEST, N_TRAIN, TEST_ACCURACY, WEIGHT, MetricLog

REPO = Path(__file__).resolve().parents[2]


# --------------------------------------------------------------------------- helpers
def make_run(method: str, accuracies: Mapping[int, Sequence[float]], *,
             experiment: str = "exp", partition: str = "p2",
             groups: Sequence[int] = (0, 1), n_test: Sequence[int] | None = None,
             weights: Mapping[int, Any] | None = None, split_seed: int = 0,
             train_seed: int = 0, matrices: Mapping[str, Mapping[int, Any]] | None = None,
             per_client: Mapping[str, Mapping[int, Sequence[float]]] | None = None,
             ) -> pd.DataFrame:
    """One run table: ``accuracies[round][client]``, ``weights[round]`` a client x peer matrix,
    ``matrices[metric][round]`` another recorded matrix (e.g. FedMix's ``expert_posterior``),
    ``per_client[metric][round]`` per-client values (e.g. ``cluster`` ids, traffic)."""
    n_test = n_test if n_test is not None else [1000] * len(groups)
    log = MetricLog()
    log.add_per_client(0, N_TEST, n_test)
    log.add_per_client(0, N_TRAIN, [4 * n for n in n_test])
    log.add_per_client(0, GROUP, groups)
    for rnd, accs in accuracies.items():
        log.add_per_client(rnd, TEST_ACCURACY, accs)
    for rnd, matrix in (weights or {}).items():
        log.add_matrix(rnd, WEIGHT, np.asarray(matrix, dtype=float))
    for metric, by_round in (matrices or {}).items():
        for rnd, matrix in by_round.items():
            log.add_matrix(rnd, metric, np.asarray(matrix, dtype=float))
    for metric, by_round in (per_client or {}).items():
        for rnd, values in by_round.items():
            log.add_per_client(rnd, metric, values)
    return log.to_frame({
        "experiment": experiment, "dataset": "digits", "partition": partition,
        "method": method, "algorithm": method, "params": "{}", "split_seed": split_seed,
        "train_seed": train_seed, "client_training": "loop", "package_version": "0",
        "git_revision": "abc"})


def one(frame: pd.DataFrame) -> tuple[str, float]:
    """(verdict, margin) of a one-row result."""
    assert len(frame) == 1, frame
    return str(frame["verdict"].iloc[0]), float(frame["margin"].iloc[0])


def final_run(method: str, final: float, **kw: Any) -> pd.DataFrame:
    """A run whose clients all end at ``final`` (weighted = mean = final), 0.1 at round 0."""
    n = len(kw.get("groups", (0, 1)))
    return make_run(method, {0: [0.1] * n, 10: [final] * n}, **kw)


#: The ``ties`` of a claims file (config/claims.yaml states the shipped ones).
TIES: dict[str, Any] = {
    "pp": {"value": "one test row", "reason": "the resolution of an accuracy"},
    "weight": {"value": 0.001, "reason": "a tenth of a percent of a client's weight"},
    "models": {"value": 1, "reason": "one model"},
    "components": {"value": 1, "reason": "one component"},
    "clusters": {"value": 1, "reason": "one cluster"},
    "ratio": {"value": 0.001, "reason": "a tenth of a percent of the traffic"},
}


def doc(*claims: Mapping[str, Any]) -> dict[str, Any]:
    """A claims document: ``claims`` and the ``ties`` above."""
    return {"claims": [dict(c) for c in claims], "ties": TIES}


def claims_of(*checks: Mapping[str, Any], experiments: Sequence[str] = ("exp",),
              scope: str = "each", cpu: Sequence[str] = (),
              extra: Mapping[str, Any] | None = None) -> list:
    """Claims c0, c1, ... of the given checks, at the paper scale on ``experiments``;
    ``extra``: more keys of every claim (e.g. ``by_design``)."""
    return parse_claims(doc(*(
        {"id": f"c{k}", "paper": "FedeRiCo", "where": "Table 1", "claim": f"claim {k}",
         "experiments": {"paper": list(experiments), "cpu": list(cpu)}, "scope": scope,
         "check": dict(check), **dict(extra or {})}
        for k, check in enumerate(checks))))


def design_from(agg: pd.DataFrame | None, experiments: Sequence[str] = ()) -> dict[str, Design]:
    """The design of an aggregate built complete: its partitions x methods x seed pairs."""
    out = {e: Design(("p2",), ("federico", "local"), ((0, 0),)) for e in experiments}
    if agg is None:
        return out
    for name, rows in agg.groupby("experiment", sort=True):
        seeds = sorted({(int(a), int(b)) for a, b in zip(rows["split_seed"], rows["train_seed"],
                                                          strict=True)})
        out[str(name)] = Design(tuple(sorted(rows["partition"].unique())),
                                tuple(sorted(rows["method"].unique())), tuple(seeds))
    return out


def copies(agg: pd.DataFrame, k: int = 2) -> pd.DataFrame:
    """``k`` identical copies of every run (training seeds +0, +100, ...): n = k runs with
    equal margins, so the interval has zero width and the verdict is the margin's sign."""
    return pd.concat([agg.assign(train_seed=agg["train_seed"] + 100 * i) for i in range(k)],
                     ignore_index=True)


def evaluate(agg: pd.DataFrame | None, *checks: Mapping[str, Any],
             design: Mapping[str, Design] | None = None, k: int = 2,
             **kw: Any) -> pd.DataFrame:
    """Evaluate checks on ``k`` copies of ``agg`` against the design of the (complete) copies."""
    agg = None if agg is None else copies(agg, k)
    if design is None:
        design = design_from(agg)
    return evaluate_claims(claims_of(*checks, **kw), agg, "paper", design=design)


ACROSS = {"type": "across_experiments", "metric": "weighted_final", "method": "perfedckt",
          "tolerance": 1.0}


COMPARE = {"type": "compare", "metric": "weighted_final", "a": "federico", "b": "local",
           "op": ">"}


# --------------------------------------------------------------------------- loader errors
def _claim(**over: Any) -> dict[str, Any]:
    base = {"id": "x", "paper": "FedAMP", "where": "Table 1", "claim": "c",
            "experiments": {"paper": ["exp"], "cpu": []}, "check": dict(COMPARE)}
    base.update(over)
    return base


# --------------------------------------------------------------------------- accuracy checks
def table1() -> pd.DataFrame:
    """Two columns: p2 (2 distributions) and p4 (4 distributions)."""
    g4 = {"partition": "p4", "groups": (0, 1, 2, 3)}
    return pd.concat([
        final_run("federico", 0.90), final_run("federico", 0.80, **g4),
        final_run("local", 0.85), final_run("local", 0.82, **g4),
        final_run("fedavg", 0.60), final_run("fedavg", 0.70, **g4),
    ], ignore_index=True)


# --------------------------------------------------------------------------- every check type
def weight_run(method: str, final: Any, groups: Sequence[int], **kw: Any) -> pd.DataFrame:
    """A run whose final (round 2) weight matrix is ``final`` (uniform at rounds 0, 1)."""
    n = len(groups)
    start = np.full((n, np.asarray(final).shape[1]), 1 / np.asarray(final).shape[1])
    return make_run(method, {0: [0.1] * n, 2: [0.5] * n}, groups=groups,
                    weights={0: start, 1: start, 2: final}, **kw)


def traffic(method: str, per_client: float, **kw: Any) -> pd.DataFrame:
    """A run of two clients that each send and receive ``per_client`` scalars in rounds 0
    and 1: its total is 2 rounds x 2 clients x 2 directions x ``per_client``."""
    from pflrepro.store.results import COMM_DOWN, COMM_UP

    per_round = {0: [per_client] * 2, 1: [per_client] * 2}
    return make_run(method, {0: [0.1, 0.1], 10: [0.8, 0.8]},
                    per_client={COMM_UP: per_round, COMM_DOWN: per_round}, **kw)


def block(groups: Sequence[int], lone_self: float = 1.0) -> np.ndarray:
    """Fig. 3's block structure: weight spread evenly over the client's distribution.

    A client alone in its distribution keeps ``lone_self`` on itself and spreads the
    rest evenly over the other clients.
    """
    n = len(groups)
    w = np.zeros((n, n))
    for i, g in enumerate(groups):
        mates = [j for j, h in enumerate(groups) if h == g]
        if len(mates) == 1:
            w[i] = (1 - lone_self) / (n - 1)
            w[i, i] = lone_self
        else:
            w[i, mates] = 1 / len(mates)
    return w
