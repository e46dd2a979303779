"""Per-run accuracies from an aggregate (the concatenation of many run tables).

Definitions used throughout:

run
    One training run, identified by all of :data:`pflrepro.store.results.CONFIG_COLUMNS`
    (experiment, dataset, partition, method, algorithm, params, seeds, versions).
weighted accuracy
    ``Σ_c acc_c · n_c / Σ_c n_c`` over the clients ``c`` evaluated at a round, ``n_c``
    being the client's test-set size (``n_test``). This is the metric of FedeRiCo
    (Table 1: "average accuracies weighted by local dataset sizes") and of FedEM.
mean accuracy
    The unweighted mean of ``acc_c`` over the same clients (FedAMP's metric).
final accuracy
    The weighted accuracy at the run's last evaluated round.
BMTA
    FedAMP's "best mean testing accuracy": the highest mean accuracy over a run's
    evaluated rounds (round 0 included). It is picked on the test set, so tables that
    report it also report the run's final-round mean accuracy beside it.

Clients with ``n_test == 0`` have no test set and are left out of both averages.

The accuracy tables (:mod:`pflrepro.reporting.tables`), the claims, the
communication table and the figures read their numbers through these functions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

from pflrepro.store.results import (
    CLUSTER,
    CONFIG_COLUMNS,
    DIVERGED,
    N_TEST,
    TEST_ACCURACY,
    VALUE_COLUMNS,
)

#: Columns that identify one run.
RUN_KEYS: tuple[str, ...] = tuple(CONFIG_COLUMNS)
#: Columns that must be constant within one (method, partition) cell of a table.
SETTING_KEYS: tuple[str, ...] = ("experiment", "dataset", "algorithm", "params")
#: Table metrics of :func:`pflrepro.reporting.tables.accuracy_table`, each mapped to the
#: per-run accuracies it reports (the ``metric_name`` column level / CSV column when
#: there are several).
TABLE_METRICS: dict[str, tuple[str, ...]] = {
    "weighted_final": ("weighted_final",),
    "mean_bmta": ("mean_bmta", "mean_final"),
}


# --------------------------------------------------------------------------- checks
def check_aggregate(agg: pd.DataFrame, metrics: Iterable[str], what: str) -> None:
    """Raise ``ValueError`` unless ``agg`` is a non-empty run table holding ``metrics``."""
    if not isinstance(agg, pd.DataFrame):
        raise ValueError(f"{what}: expected a pandas DataFrame, got {type(agg).__name__}")
    missing_cols = [c for c in (*VALUE_COLUMNS, *CONFIG_COLUMNS) if c not in agg.columns]
    if missing_cols:
        raise ValueError(f"{what}: the aggregate lacks column(s) {missing_cols}; expected "
                         "concatenated run tables (pflrepro.store.results.MetricLog.to_frame)")
    if agg.empty:
        raise ValueError(f"{what}: the aggregate is empty")
    present = set(agg["metric"].dropna().astype(str).unique())
    missing = [m for m in metrics if m not in present]
    if missing:
        raise ValueError(f"{what}: the aggregate has no {missing} rows "
                         f"(metrics present: {sorted(present)})")


def run_label(run: Mapping[str, Any]) -> str:
    """Describe one run for error messages, e.g. ``experiment=t1, method=fedavg, ...``."""
    keys = ("experiment", "dataset", "partition", "method", "split_seed", "train_seed")
    return ", ".join(f"{k}={run[k]}" for k in keys if k in run)


def check_cells(final: pd.DataFrame, what: str,
                by: Sequence[str] = ("method", "partition")) -> None:
    """Check that each cell (rows of ``final`` sharing ``by``) holds comparable, distinct runs.

    ``final`` has one row per run (its last round). Raises ``ValueError`` when a cell
    mixes settings (experiment, dataset, algorithm, params), holds the same
    (split_seed, train_seed) twice, or when its runs end at different rounds (runs
    that diverged, a ``diverged`` column when given, stop early and are exempt); each
    would make a mean over the cell meaningless.
    """
    by = list(by)
    for values, cell in final.groupby(by, sort=True, dropna=False):
        where = f"{what}: " + ", ".join(f"{k}={v!r}" for k, v in zip(by, values, strict=True))
        settings = cell[list(SETTING_KEYS)].drop_duplicates()
        if len(settings) > 1:
            raise ValueError(f"{where} mixes runs of different settings "
                             f"{settings.to_dict('records')}; filter the aggregate "
                             "(e.g. to one experiment and dataset) first")
        seeds = cell[["split_seed", "train_seed"]]
        if seeds.duplicated().any():
            dup = seeds[seeds.duplicated()].drop_duplicates().to_dict("records")
            raise ValueError(f"{where} holds the same seeds twice {dup} (runs of different "
                             "package versions or git revisions?)")
        finished = cell[~cell["diverged"]] if "diverged" in cell else cell
        rounds = sorted(finished["round"].unique().tolist())
        if len(rounds) > 1:
            raise ValueError(f"{where}: runs end at different rounds {rounds}")


# --------------------------------------------------------------------------- numbers
def weighted_accuracy_per_round(agg: pd.DataFrame) -> pd.DataFrame:
    """Per run and evaluated round: client accuracy averaged over clients.

    Returns one row per (run, round) with the run's config columns, ``round``,
    ``weighted_accuracy`` (weights ``n_test``), ``mean_accuracy`` (unweighted),
    ``clients`` (number of clients averaged) and ``n_test`` (their total test size).
    Accuracies stay fractions in ``[0, 1]``.

    Raises ``ValueError`` if ``test_accuracy`` or ``n_test`` rows are missing, if a
    client with an accuracy has no ``n_test``, or if values conflict.
    """
    what = "weighted_accuracy_per_round"
    check_aggregate(agg, (TEST_ACCURACY, N_TEST), what)
    keys = list(RUN_KEYS)
    metric = agg["metric"]
    per_client = (agg["client"] >= 0) & (agg["peer"] < 0)

    acc = agg.loc[(metric == TEST_ACCURACY) & per_client, [*keys, "round", "client", "value"]]
    if acc.empty:
        raise ValueError(f"{what}: no per-client {TEST_ACCURACY!r} rows (client >= 0, peer -1)")
    dup = acc.duplicated([*keys, "round", "client"])
    if dup.any():
        row = acc[dup].iloc[0]
        raise ValueError(f"{what}: {TEST_ACCURACY!r} given twice for client {row['client']} "
                         f"at round {row['round']} of run {run_label(row)}")

    sizes = agg.loc[(metric == N_TEST) & per_client, [*keys, "client", "value"]]
    spread = sizes.groupby([*keys, "client"], dropna=False, sort=False)["value"].agg(["min", "max"])
    conflicting = spread[spread["min"] != spread["max"]]
    if not conflicting.empty:
        row = conflicting.reset_index().iloc[0]
        raise ValueError(f"{what}: conflicting {N_TEST!r} values for client {row['client']} "
                         f"of run {run_label(row)}")
    sizes = spread["min"].rename("n_test").reset_index()

    merged = acc.merge(sizes, on=[*keys, "client"], how="left", validate="many_to_one")
    lacking = merged[merged["n_test"].isna()]
    if not lacking.empty:
        row = lacking.iloc[0]
        same_run = (lacking[keys] == row[keys]).all(axis=1)
        clients = sorted(int(c) for c in lacking.loc[same_run, "client"].unique())
        raise ValueError(f"{what}: no {N_TEST!r} row for client(s) {clients} of run "
                         f"{run_label(row)}")
    merged = merged[merged["n_test"] > 0]
    bad = merged[merged["value"].isna()]
    if not bad.empty:
        row = bad.iloc[0]
        raise ValueError(f"{what}: {TEST_ACCURACY!r} is NaN for client {row['client']} "
                         f"(n_test={row['n_test']:g}) at round {row['round']} of run "
                         f"{run_label(row)}")
    if merged.empty:
        raise ValueError(f"{what}: every client with an accuracy has n_test = 0")

    merged = merged.assign(acc_x_n=merged["value"] * merged["n_test"])
    out = (merged.groupby([*keys, "round"], dropna=False, sort=True)
           .agg(acc_x_n=("acc_x_n", "sum"), n_test=("n_test", "sum"),
                mean_accuracy=("value", "mean"), clients=("client", "nunique"))
           .reset_index())
    out["weighted_accuracy"] = out["acc_x_n"] / out["n_test"]
    out["n_test"] = out["n_test"].astype("int64")
    out["clients"] = out["clients"].astype("int64")
    out["round"] = out["round"].astype("int64")
    return out[[*keys, "round", "weighted_accuracy", "mean_accuracy", "clients", "n_test"]]


def final_accuracy(agg: pd.DataFrame) -> pd.DataFrame:
    """One row per run: the accuracies of :func:`weighted_accuracy_per_round` at its last round.

    Raises ``ValueError`` as :func:`weighted_accuracy_per_round` does.
    """
    per_round = weighted_accuracy_per_round(agg)
    last = per_round.groupby(list(RUN_KEYS), dropna=False, sort=False).tail(1)
    return last.reset_index(drop=True)


def best_mean_accuracy(agg: pd.DataFrame) -> pd.DataFrame:
    """One row per run: FedAMP's BMTA and the final mean accuracy.

    Columns: the run's config columns, ``round`` (its last evaluated round),
    ``mean_bmta`` (the highest unweighted mean accuracy over its evaluated rounds),
    ``bmta_round`` (the earliest round reaching it), ``mean_final`` (the mean accuracy
    at the last round) and ``weighted_final`` (the weighted accuracy at the last
    round). Fractions in ``[0, 1]``. E.g. per-round means 0.5, 0.8, 0.7 give
    ``mean_bmta`` 0.8 and ``mean_final`` 0.7.

    Raises ``ValueError`` as :func:`weighted_accuracy_per_round` does.
    """
    per_round = weighted_accuracy_per_round(agg)
    keys = list(RUN_KEYS)
    groups = per_round.groupby(keys, dropna=False, sort=False)
    best = per_round.loc[groups["mean_accuracy"].idxmax(), [*keys, "round", "mean_accuracy"]]
    best = best.rename(columns={"round": "bmta_round", "mean_accuracy": "mean_bmta"})
    last = groups.tail(1)[[*keys, "round", "mean_accuracy", "weighted_accuracy"]]
    last = last.rename(columns={"mean_accuracy": "mean_final",
                                "weighted_accuracy": "weighted_final"})
    out = last.merge(best, on=keys, how="left", validate="one_to_one")
    out["bmta_round"] = out["bmta_round"].astype("int64")
    return out[[*keys, "round", "mean_bmta", "bmta_round", "mean_final",
                "weighted_final"]].reset_index(drop=True)


def one_cluster_methods(agg: pd.DataFrame) -> list[str]:
    """Methods that log cluster ids (:data:`pflrepro.store.results.CLUSTER`) with one id only.

    Every client in the same cluster in every logged round of every run of the
    aggregate: the method never split (Clustered FL) or every client always chose the
    same hypothesis (HypCluster), so it trained one global model, as FedAvg does; its
    rows then equal or track FedAvg's, which the table's note says.
    """
    ids = agg.loc[agg["metric"] == CLUSTER, ["method", "value"]]
    counts = ids.groupby("method", sort=True)["value"].nunique()
    return [str(m) for m, n in counts.items() if n == 1]


def run_accuracies(agg: pd.DataFrame, metric: str = "weighted_final") -> pd.DataFrame:
    """One row per run: its config columns, ``round`` (last) and the accuracies of ``metric``.

    The accuracy columns are named by :data:`TABLE_METRICS` (``weighted_final``; or
    ``mean_bmta`` and ``mean_final``), as fractions. Raises ``ValueError`` for an
    unknown ``metric`` and as :func:`weighted_accuracy_per_round` does.
    """
    if metric not in TABLE_METRICS:
        raise ValueError(f"unknown table metric {metric!r}; expected one of "
                         f"{list(TABLE_METRICS)}")
    if metric == "weighted_final":
        runs = final_accuracy(agg).rename(columns={"weighted_accuracy": "weighted_final"})
    else:
        runs = best_mean_accuracy(agg)
    return runs.assign(diverged=diverged_runs(agg, runs))


def diverged_runs(agg: pd.DataFrame, runs: pd.DataFrame) -> pd.Series:
    """For each row of ``runs`` (one per run), whether the run diverged.

    A run that diverged (:data:`pflrepro.store.results.DIVERGED`) stopped at the round its
    losses became non-finite; its accuracies are those of that round.
    """
    keys = list(RUN_KEYS)
    marks = agg.loc[agg["metric"] == DIVERGED, keys].drop_duplicates()
    if marks.empty:
        return pd.Series(False, index=runs.index, name="diverged")
    flagged = runs[keys].merge(marks.assign(_diverged=True), on=keys, how="left")
    return pd.Series(flagged["_diverged"].fillna(False).astype(bool).to_numpy(),
                     index=runs.index, name="diverged")
