"""Accuracy tables from an aggregate (the concatenation of many run tables).

Definitions used throughout:

run
    One training run, identified by all of :data:`pflrepro.results.CONFIG_COLUMNS`
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

An accuracy table cell holds the mean and the sample standard deviation (``ddof=1``)
of a per-run accuracy, in percent, over the runs (split seeds × train seeds) of one
(method, partition) -- or (method, experiment, partition) when a table spans several
experiments -- and the number ``n`` of those runs. The per-run accuracy is chosen by
the table metric (:data:`TABLE_METRICS`): ``weighted_final`` (the final weighted
accuracy, FedeRiCo; the default) or ``mean_bmta`` (BMTA and the final mean accuracy,
FedAMP; two numbers per cell). A cell with a single run has ``std`` NaN, written
``± n/a``; a cell without runs has ``n == 0`` and is written as a dash (and left out
of the CSV).
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from pflrepro.io import write_text
from pflrepro.results import (
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
#: Statistics stored per (method, partition) by :func:`accuracy_table`.
STATS: tuple[str, ...] = ("mean", "std", "n")
#: Table metrics of :func:`accuracy_table`, each mapped to the per-run accuracies it
#: reports (the ``metric_name`` column level / CSV column when there are several).
TABLE_METRICS: dict[str, tuple[str, ...]] = {
    "weighted_final": ("weighted_final",),
    "mean_bmta": ("mean_bmta", "mean_final"),
}
#: Column choices of :func:`accuracy_table`.
COLUMN_CHOICES: tuple[tuple[str, ...], ...] = (("partition",), ("experiment", "partition"))
#: Separator of experiment and partition in a flat (Markdown) column header.
HEADER_SEPARATOR = " · "


# --------------------------------------------------------------------------- checks
def check_aggregate(agg: pd.DataFrame, metrics: Iterable[str], what: str) -> None:
    """Raise ``ValueError`` unless ``agg`` is a non-empty run table holding ``metrics``."""
    if not isinstance(agg, pd.DataFrame):
        raise ValueError(f"{what}: expected a pandas DataFrame, got {type(agg).__name__}")
    missing_cols = [c for c in (*VALUE_COLUMNS, *CONFIG_COLUMNS) if c not in agg.columns]
    if missing_cols:
        raise ValueError(f"{what}: the aggregate lacks column(s) {missing_cols}; expected "
                         "concatenated run tables (pflrepro.results.MetricLog.to_frame)")
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


def natural_key(text: str) -> tuple[Any, ...]:
    """Sort key that orders embedded numbers numerically (``groups2`` < ``groups10``)."""
    return tuple((0, int(part)) if part.isdigit() else (1, part)
                 for part in re.split(r"(\d+)", str(text)) if part)


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
    """Methods that log cluster ids (:data:`pflrepro.results.CLUSTER`) with one id only.

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

    A run that diverged (:data:`pflrepro.results.DIVERGED`) stopped at the round its
    losses became non-finite; its accuracies are those of that round.
    """
    keys = list(RUN_KEYS)
    marks = agg.loc[agg["metric"] == DIVERGED, keys].drop_duplicates()
    if marks.empty:
        return pd.Series(False, index=runs.index, name="diverged")
    flagged = runs[keys].merge(marks.assign(_diverged=True), on=keys, how="left")
    return pd.Series(flagged["_diverged"].fillna(False).astype(bool).to_numpy(),
                     index=runs.index, name="diverged")


def order_values(found: Iterable[str], order: Sequence[str] | None, what: str) -> list[str]:
    """Order ``found`` by ``order``; values not in ``order`` follow in natural order.

    Raises ``ValueError`` if ``order`` names a value that is not in ``found`` (a typo
    or a method/partition without results), or names one twice.
    """
    found = sorted({str(v) for v in found}, key=natural_key)
    if order is None:
        return found
    if isinstance(order, str):
        raise ValueError(f"{what}: expected a sequence of names, got the string {order!r}")
    order = [str(v) for v in order]
    dup = sorted({v for v in order if order.count(v) > 1})
    if dup:
        raise ValueError(f"{what}: {dup} listed twice in the requested order")
    unknown = [v for v in order if v not in found]
    if unknown:
        raise ValueError(f"{what}: {unknown} requested but not in the aggregate "
                         f"(present: {found})")
    return order + [v for v in found if v not in order]


# --------------------------------------------------------------------------- labels
def check_labels(labels: Mapping[str, str] | None, what: str) -> dict[str, str]:
    """Return ``labels`` (id -> display label) as a plain dict, ``{}`` for ``None``.

    Raises ``ValueError`` unless it is a mapping of strings to non-empty strings.
    """
    if labels is None:
        return {}
    if not isinstance(labels, Mapping):
        raise ValueError(f"{what}: expected a mapping of id -> display label, got "
                         f"{type(labels).__name__}")
    out = {}
    for key, value in labels.items():
        if not isinstance(key, str) or not isinstance(value, str) or not value.strip():
            raise ValueError(f"{what}: labels must map strings to non-empty strings, got "
                             f"{key!r} -> {value!r}")
        out[key] = value
    return out


def display_labels(values: Iterable[str], labels: Mapping[str, str] | None,
                   what: str) -> dict[str, str]:
    """Map each of ``values`` to its display label (unlabelled values show as themselves).

    Raises ``ValueError`` when two of ``values`` would show the same label (the
    columns or panels could not be told apart) or ``labels`` is malformed.
    """
    labels = check_labels(labels, what)
    shown = {str(v): labels.get(str(v), str(v)) for v in values}
    seen: dict[str, str] = {}
    for value, label in shown.items():
        if label in seen:
            raise ValueError(f"{what}: {seen[label]!r} and {value!r} would both be shown as "
                             f"{label!r}; give them different labels")
        seen[label] = value
    return shown


# --------------------------------------------------------------------------- table
def accuracy_table(agg: pd.DataFrame, methods_order: Sequence[str] | None = None,
                   partitions_order: Sequence[str] | None = None, *,
                   metric: str = "weighted_final",
                   columns: Sequence[str] | None = None,
                   experiments_order: Sequence[str] | None = None,
                   labels: Mapping[str, str] | None = None,
                   experiment_labels: Mapping[str, str] | None = None) -> pd.DataFrame:
    """Mean, std and number of runs of a per-run accuracy, in percent.

    Returns a frame indexed by ``method`` whose columns are a MultiIndex with levels

    * ``experiment`` -- only when ``columns`` is ``("experiment", "partition")``;
    * ``partition``;
    * ``metric_name`` -- only when ``metric`` reports several accuracies
      (``mean_bmta``: ``mean_bmta`` and ``mean_final``, see :data:`TABLE_METRICS`);
    * ``stat`` in :data:`STATS`: ``mean`` and ``std`` (``ddof=1``; NaN for a single
      run) in percent, ``n`` the number of runs (split seeds × train seeds).

    So the default (one experiment, ``metric="weighted_final"``) has columns
    ``(partition, stat)``. ``metric`` is ``"weighted_final"`` (FedeRiCo's final
    accuracy weighted by test-set size) or ``"mean_bmta"`` (FedAMP's BMTA and the
    final-round unweighted mean accuracy). ``columns`` defaults to
    ``("experiment", "partition")`` when the aggregate holds several experiments, else
    ``("partition",)``; with experiments, the columns are the (experiment, partition)
    pairs present, experiments in ``experiments_order``, partitions within each in
    ``partitions_order``. ``methods_order`` / ``partitions_order`` /
    ``experiments_order`` fix the order; unlisted ones follow in natural order, and
    listing one absent from the aggregate raises ``ValueError``. A column without runs
    of a method has ``n == 0`` and NaN statistics.

    ``labels`` (partition id -> display label) and ``experiment_labels`` are checked
    (two shown ids may not share a label) and kept in ``table.attrs`` for
    :func:`write_table`; the table itself is keyed by the ids.

    Raises ``ValueError`` for an unknown ``metric`` or ``columns``, when metrics are
    missing, or when a cell's runs are not comparable (see :func:`check_cells`; a cell
    never mixes experiments, datasets, algorithms or params).
    """
    what = "accuracy_table"
    runs = run_accuracies(agg, metric)
    names = TABLE_METRICS[metric]
    experiments = order_values(runs["experiment"], experiments_order, f"{what} experiments")
    if columns is None:
        columns = ("experiment", "partition") if len(experiments) > 1 else ("partition",)
    columns = (columns,) if isinstance(columns, str) else tuple(columns)
    if columns not in COLUMN_CHOICES:
        raise ValueError(f"{what}: columns must be one of {list(COLUMN_CHOICES)}, "
                         f"got {columns}")
    by_experiment = columns == ("experiment", "partition")
    check_cells(runs, what, by=("method", *columns))

    methods = order_values(runs["method"], methods_order, f"{what} methods")
    partitions = order_values(runs["partition"], partitions_order, f"{what} partitions")
    if by_experiment:
        present = set(zip(runs["experiment"].astype(str), runs["partition"].astype(str),
                          strict=True))
        keys = [(e, p) for e in experiments for p in partitions if (e, p) in present]
        for experiment in experiments:
            display_labels([p for e, p in keys if e == experiment], labels,
                           f"{what} labels (experiment {experiment!r})")
        display_labels(experiments, experiment_labels, f"{what} experiment_labels")
    else:
        keys = [(p,) for p in partitions]
        display_labels(partitions, labels, f"{what} labels")
        check_labels(experiment_labels, f"{what} experiment_labels")

    level_names = [*columns, *(["metric_name"] if len(names) > 1 else []), "stat"]
    tuples = [(*key, *((name,) if len(names) > 1 else ()), stat)
              for key in keys for name in names for stat in STATS]
    table = pd.DataFrame(index=pd.Index(methods, name="method"),
                         columns=pd.MultiIndex.from_tuples(tuples, names=level_names),
                         dtype=float)
    group_keys = ["method", *columns]
    for name in names:
        percent = runs.assign(percent=runs[name] * 100.0)
        stats = (percent.groupby(group_keys, sort=False)["percent"]
                 .agg(mean="mean", std=lambda s: s.std(ddof=1), n="count"))
        for index, row in stats.iterrows():
            method, *key = (str(v) for v in index)
            for stat in STATS:
                table.loc[method, (*key, *((name,) if len(names) > 1 else ()), stat)] = \
                    float(row[stat])
    for col in table.columns:
        if col[-1] == "n":
            table[col] = table[col].fillna(0).astype("int64")
    diverged = runs[runs["diverged"]].groupby(group_keys, sort=False).size()
    single_cluster = [m for m in one_cluster_methods(agg) if m in table.index]
    table.attrs.update(metric=metric, labels=check_labels(labels, what),
                       one_cluster=single_cluster,
                       experiment_labels=check_labels(experiment_labels, what),
                       diverged={tuple(str(v) for v in (i if isinstance(i, tuple) else (i,))):
                                 int(n) for i, n in diverged.items()})
    return table


# --------------------------------------------------------------------------- writing
def _table_layout(table: pd.DataFrame) -> tuple[list[str], list[tuple[str, ...]], list[str]]:
    """Return (key level names, column keys in order, metric names) of an accuracy table.

    Key levels are ``("partition",)`` or ``("experiment", "partition")``; metric names
    are ``["weighted_final"]`` without a ``metric_name`` level. Raises ``ValueError``
    when ``table`` does not have the shape :func:`accuracy_table` returns.
    """
    cols = table.columns
    expected = ("write_table: expected the result of accuracy_table (columns "
                f"(partition, stat) with stat in {list(STATS)}), got {list(cols)[:6]}")
    if not isinstance(cols, pd.MultiIndex) or cols.nlevels < 2:
        raise ValueError(expected)
    names = list(cols.names)
    if cols.nlevels == 2:
        names = ["partition", "stat"]  # accepted unnamed, as always
    if names[-1] != "stat" or set(cols.get_level_values(-1)) - set(STATS):
        raise ValueError(expected)
    key_names = [n for n in names[:-1] if n != "metric_name"]
    if (tuple(key_names) not in COLUMN_CHOICES
            or names[:-1] != [*key_names, *(["metric_name"] if "metric_name" in names else [])]):
        raise ValueError(f"write_table: unexpected column levels {cols.names}; expected "
                         "[experiment,] partition, [metric_name,] stat (accuracy_table)")
    n_keys = len(key_names)
    keys = list(dict.fromkeys(tuple(str(v) for v in c[:n_keys]) for c in cols))
    if "metric_name" in names:
        metric_names = list(dict.fromkeys(str(c[n_keys]) for c in cols))
        if tuple(metric_names) not in TABLE_METRICS.values():
            raise ValueError(f"write_table: unknown metric names {metric_names}; expected "
                             f"one of {list(TABLE_METRICS.values())}")
    else:
        metric_names = ["weighted_final"]
    return key_names, keys, metric_names


def _column(key: tuple[str, ...], name: str, stat: str,
            metric_names: Sequence[str]) -> tuple[str, ...]:
    """The table column of ``stat`` of accuracy ``name`` in column ``key``."""
    return (*key, *((name,) if len(metric_names) > 1 else ()), stat)


def tidy_table(table: pd.DataFrame) -> pd.DataFrame:
    """Turn an :func:`accuracy_table` result into one row per non-empty cell and accuracy.

    Columns: ``method``, ``experiment`` (tables over experiments only), ``partition``,
    ``metric_name`` (metrics with several accuracies only), ``mean``, ``std``, ``n``, and
    ``diverged`` (runs of the cell that diverged) when any run of the table diverged.
    Cells without runs (``n == 0``) are left out. Raises ``ValueError`` when ``table``
    does not have the shape :func:`accuracy_table` returns.
    """
    key_names, keys, metric_names = _table_layout(table)
    cols = {tuple(str(v) for v in c) for c in table.columns}
    for key in keys:
        lacking = [_column(key, m, s, metric_names)[len(key):]
                   for m in metric_names for s in STATS
                   if _column(key, m, s, metric_names) not in cols]
        if lacking:
            where = ", ".join(f"{k} {v!r}" for k, v in zip(key_names, key, strict=True))
            lacking = [x[0] if len(x) == 1 else x for x in lacking]
            raise ValueError(f"write_table: {where} lacks column(s) {lacking}")
    multi = len(metric_names) > 1
    out_cols = ["method", *key_names, *(["metric_name"] if multi else []), *STATS]
    diverged = table.attrs.get("diverged") or {}
    rows = []
    for method in table.index:
        for key in keys:
            for name in metric_names:
                n = table.loc[method, _column(key, name, "n", metric_names)]
                n = 0 if pd.isna(n) else int(n)
                if n == 0:
                    continue
                row: dict[str, Any] = {"method": str(method),
                                       **dict(zip(key_names, key, strict=True))}
                if multi:
                    row["metric_name"] = name
                for stat in ("mean", "std"):
                    row[stat] = float(table.loc[method, _column(key, name, stat,
                                                                metric_names)])
                row["n"] = n
                row["diverged"] = diverged.get((str(method), *key), 0)
                rows.append(row)
    tidy = pd.DataFrame(rows, columns=[*out_cols, "diverged"])
    if not diverged:  # the column appears only when some run diverged
        tidy = tidy.drop(columns="diverged")
    return tidy.astype({"n": "int64"})


def _latex_escape(text: str) -> str:
    """Escape LaTeX special characters in plain text."""
    out = []
    for ch in str(text):
        if ch in "&%$#_{}":
            out.append("\\" + ch)
        elif ch == "\\":
            out.append(r"\textbackslash{}")
        elif ch == "~":
            out.append(r"\textasciitilde{}")
        elif ch == "^":
            out.append(r"\textasciicircum{}")
        else:
            out.append(ch)
    return "".join(out)


def _md_escape(text: str) -> str:
    """Escape characters that would break a Markdown table cell."""
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


_MD = {"pm": "±", "times": "×", "dash": "—", "range": "–", "pct": "%"}
_TEX = {"pm": r"$\pm$", "times": r"$\times$", "dash": "---", "range": "--", "pct": r"\%"}


def _cell(values: Sequence[tuple[float, float]], n: int, usual_n: int, decimals: int,
          sym: Mapping[str, str]) -> str:
    """Format one table cell from (mean, std) pairs, e.g. ``83.2 ± 1.4 / 80.1 ± 2.0``."""
    if n == 0:
        return sym["dash"]
    parts = []
    for mean, std in values:
        spread = "n/a" if pd.isna(std) else f"{std:.{decimals}f}"
        parts.append(f"{mean:.{decimals}f} {sym['pm']} {spread}")
    text = " / ".join(parts)
    if n != usual_n:
        text += f" (n={n})"
    return text


def _note(ns: Sequence[int], single: bool, usual_n: int, metric_names: Sequence[str],
          sym: Mapping[str, str]) -> str:
    """Return the note under a table: what the cells are and over how many runs."""
    ns = sorted(set(ns))
    if tuple(metric_names) == TABLE_METRICS["mean_bmta"]:
        text = (f"Test accuracy ({sym['pct']}), unweighted mean over clients: "
                f"BMTA / final round, each mean {sym['pm']} std (ddof=1) over ")
    else:
        text = (f"Final test accuracy ({sym['pct']}), weighted by client test-set size: "
                f"mean {sym['pm']} std (ddof=1) over ")
    if len(ns) == 1:
        text += f"n = {ns[0]} runs (split seeds {sym['times']} train seeds) per cell."
    else:
        text += (f"the runs (split seeds {sym['times']} train seeds) of each cell, "
                 f"n = {ns[0]}{sym['range']}{ns[-1]}; n = {usual_n} unless marked (n=...).")
    if tuple(metric_names) == TABLE_METRICS["mean_bmta"]:
        text += (" BMTA (best mean test accuracy) is a run's highest mean accuracy over its "
                 "evaluated rounds; it is picked on the test set, so the final-round mean "
                 "accuracy is reported beside it.")
    if single:
        text += " n/a: a single run, no std."
    return text


def _runs_of_equal(items: Sequence[str]) -> list[tuple[str, int, int]]:
    """Consecutive runs of equal items as (item, first index, last index)."""
    out: list[tuple[str, int, int]] = []
    for k, item in enumerate(items):
        if out and out[-1][0] == item:
            out[-1] = (item, out[-1][1], k)
        else:
            out.append((item, k, k))
    return out


@dataclass(frozen=True)
class TableText:
    """An :func:`accuracy_table` made ready to print: labels resolved, cells counted.

    :func:`render_markdown` and :func:`render_latex` print it; :func:`table_text` makes it.
    """

    caption: str
    #: Column keys in order: ``(partition,)`` or ``(experiment, partition)``.
    keys: list[tuple[str, ...]]
    #: Whether the columns are grouped by experiment.
    by_experiment: bool
    #: Shown label of each experiment and of each partition id.
    experiment_labels: dict[str, str]
    partition_labels: dict[str, str]
    #: Row names, in order.
    methods: list[str]
    #: Per method, per column: the (mean, std) of each accuracy, and the cell's run count.
    cells: list[list[tuple[list[tuple[float, float]], int]]]
    #: The accuracies of a cell (:data:`TABLE_METRICS`).
    metric_names: list[str]
    #: The most common run count of the non-empty cells (cells with another get ``(n=...)``).
    usual_n: int
    #: Run counts of the non-empty cells.
    filled: list[int]
    #: Whether some cell has a single run (std n/a).
    single: bool
    decimals: int
    #: Per method, per column: runs of the cell that diverged (none: an empty list).
    diverged: list[list[int]] = dataclasses.field(default_factory=list)
    #: Methods that kept every client in one cluster (:func:`one_cluster_methods`).
    one_cluster: list[str] = dataclasses.field(default_factory=list)
    #: Per tuned method: how its values were chosen (:func:`pflrepro.tuning.table_notes`).
    tuning: list[str] = dataclasses.field(default_factory=list)

    def header(self, key: tuple[str, ...]) -> str:
        """The flat header of column ``key``: ``<experiment> · <partition>`` or the partition."""
        if self.by_experiment:
            return (f"{self.experiment_labels[key[0]]}{HEADER_SEPARATOR}"
                    f"{self.partition_labels[key[1]]}")
        return self.partition_labels[key[0]]

    def cell_texts(self, sym: Mapping[str, str]) -> list[list[str]]:
        """Every cell formatted with the symbols ``sym`` (:data:`_MD` or :data:`_TEX`)."""
        texts = [[_cell(values, n, self.usual_n, self.decimals, sym) for values, n in row]
                 for row in self.cells]
        for i, row in enumerate(self.diverged):
            for j, d in enumerate(row):
                if d:
                    texts[i][j] += f" ({d} diverged)"
        return texts

    def note(self, sym: Mapping[str, str], escape: Callable[[str], str] = str) -> str:
        """The note under the table (what the cells are, over how many runs).

        ``escape`` quotes method names for the output format.
        """
        text = _note(self.filled, self.single, self.usual_n, self.metric_names, sym)
        if any(any(row) for row in self.diverged):
            text += (" (k diverged): k runs of the cell diverged (a non-finite loss); they "
                     "stopped there and count with their accuracy at that round.")
        if self.one_cluster:
            names = ", ".join(escape(m) for m in self.one_cluster)
            text += (f" {names}: every client stayed in one cluster in every round of "
                     f"every run (no split), so it trained a single global model, as "
                     f"FedAvg does.")
        for line in self.tuning:
            text += f" {escape(line)}"
        return text


def _shown_labels(table: pd.DataFrame, keys: Sequence[tuple[str, ...]], by_experiment: bool,
                  labels: Mapping[str, str] | None,
                  experiment_labels: Mapping[str, str] | None,
                  ) -> tuple[dict[str, str], dict[str, str]]:
    """Shown labels of the experiments and partitions of ``keys`` (``table.attrs`` + given)."""
    part_labels = {**check_labels(table.attrs.get("labels"), "write_table labels"),
                   **check_labels(labels, "write_table labels")}
    exp_labels = {**check_labels(table.attrs.get("experiment_labels"),
                                 "write_table experiment_labels"),
                  **check_labels(experiment_labels, "write_table experiment_labels")}
    experiments = list(dict.fromkeys(k[0] for k in keys)) if by_experiment else []
    exp_shown = display_labels(experiments, exp_labels, "write_table experiment_labels")
    part_shown: dict[str, str] = {}
    for experiment in experiments or [None]:
        parts = [k[-1] for k in keys if experiment is None or k[0] == experiment]
        where = "" if experiment is None else f" (experiment {experiment!r})"
        part_shown.update(display_labels(parts, part_labels, f"write_table labels{where}"))
    return exp_shown, part_shown


def _cell_counts(table: pd.DataFrame, keys: Sequence[tuple[str, ...]],
                 metric_names: Sequence[str]) -> dict[tuple[str, tuple[str, ...]], int]:
    """The run count ``n`` of each (method, column); accuracies of one cell must agree."""
    counts: dict[tuple[str, tuple[str, ...]], int] = {}
    for method in table.index:
        for key in keys:
            ns = {0 if pd.isna(v) else int(v) for v in
                  (table.loc[method, _column(key, m, "n", metric_names)] for m in metric_names)}
            if len(ns) > 1:
                raise ValueError(f"write_table: method {method!r}, column {key} has different "
                                 f"run counts {sorted(ns)} for {metric_names}")
            counts[(str(method), key)] = ns.pop()
    return counts


def table_text(table: pd.DataFrame, caption: str, *, decimals: int = 1,
               labels: Mapping[str, str] | None = None,
               experiment_labels: Mapping[str, str] | None = None,
               tuning: Sequence[str] = ()) -> TableText:
    """Resolve the labels and count the runs of an :func:`accuracy_table` result.

    ``labels``, ``experiment_labels`` and ``tuning`` as in :func:`write_table`. Raises
    ``ValueError`` for a malformed or empty table, or labels that make two columns look
    the same.
    """
    tidy = tidy_table(table)
    if tidy.empty:
        raise ValueError("write_table: the table has no cell with runs")
    key_names, keys, metric_names = _table_layout(table)
    by_experiment = key_names[0] == "experiment"
    exp_shown, part_shown = _shown_labels(table, keys, by_experiment, labels, experiment_labels)
    counts = _cell_counts(table, keys, metric_names)
    diverged = table.attrs.get("diverged") or {}
    filled = [n for n in counts.values() if n > 0]
    frequency = Counter(filled)
    cells = [[([(float(table.loc[method, _column(key, m, "mean", metric_names)]),
                 float(table.loc[method, _column(key, m, "std", metric_names)]))
                for m in metric_names], counts[(str(method), key)]) for key in keys]
             for method in table.index]
    return TableText(caption=caption, keys=keys, by_experiment=by_experiment,
                     experiment_labels=exp_shown, partition_labels=part_shown,
                     methods=[str(m) for m in table.index], cells=cells,
                     metric_names=metric_names,
                     usual_n=max(frequency, key=lambda n: (frequency[n], n)), filled=filled,
                     single=bool(tidy["std"].isna().any()), decimals=decimals,
                     diverged=[[diverged.get((str(method), *key), 0) for key in keys]
                               for method in table.index] if diverged else [],
                     one_cluster=list(table.attrs.get("one_cluster") or []),
                     tuning=list(tuning))


def render_markdown(text: TableText) -> str:
    """The Markdown of a table: ``Table: <caption>``, a pipe table, the note."""
    lines = [f"Table: {text.caption}", "",
             "| method | " + " | ".join(_md_escape(text.header(k)) for k in text.keys) + " |",
             "|:--|" + "--:|" * len(text.keys)]
    for method, row in zip(text.methods, text.cell_texts(_MD), strict=True):
        lines.append(f"| {_md_escape(method)} | " + " | ".join(row) + " |")
    lines += ["", text.note(_MD, _md_escape), ""]
    return "\n".join(lines)


def _latex_header(text: TableText) -> list[str]:
    r"""The header rows: experiments over their partitions (``\multicolumn``), partitions."""
    lines = []
    if text.by_experiment:
        groups = _runs_of_equal([k[0] for k in text.keys])
        lines.append("     & " + " & ".join(
            f"\\multicolumn{{{last - first + 1}}}{{c}}"
            f"{{{_latex_escape(text.experiment_labels[e])}}}"
            for e, first, last in groups) + " \\\\")
        lines.append("    " + " ".join(f"\\cmidrule(lr){{{first + 2}-{last + 2}}}"
                                       for _, first, last in groups))
    lines.append("    Method & " + " & ".join(_latex_escape(text.partition_labels[k[-1]])
                                             for k in text.keys) + " \\\\")
    return lines


def render_latex(text: TableText) -> str:
    r"""The LaTeX of a table: a ``table`` holding a booktabs ``tabular``, the note below."""
    tex = [
        "% Generated by pflrepro.reporting.tables.write_table; needs \\usepackage{booktabs}.",
        "\\begin{table}[htbp]",
        "  \\centering",
        f"  \\caption{{{_latex_escape(text.caption)}}}",
        f"  \\begin{{tabular}}{{l{'r' * len(text.keys)}}}",
        "    \\toprule",
        *_latex_header(text),
        "    \\midrule",
    ]
    for method, row in zip(text.methods, text.cell_texts(_TEX), strict=True):
        tex.append(f"    {_latex_escape(method)} & " + " & ".join(row) + " \\\\")
    tex += [
        "    \\bottomrule",
        "  \\end{tabular}",
        "",
        "  \\smallskip",
        f"  {{\\footnotesize {text.note(_TEX, _latex_escape)}}}",
        "\\end{table}",
        "",
    ]
    return "\n".join(tex)


def write_table(table: pd.DataFrame, md_path: str | os.PathLike[str],
                tex_path: str | os.PathLike[str], csv_path: str | os.PathLike[str],
                caption: str, *, decimals: int = 1,
                labels: Mapping[str, str] | None = None,
                experiment_labels: Mapping[str, str] | None = None,
                tuning: Sequence[str] = ()) -> None:
    r"""Write an :func:`accuracy_table` result as Markdown, LaTeX and tidy CSV, atomically.

    * Markdown (:func:`render_markdown`): a pipe table with cells ``83.2 ± 1.4``
      (``mean_bmta``: ``85.1 ± 0.3 / 84.0 ± 0.5``, BMTA / final) under
      ``Table: <caption>``, then a note line stating what the cells are and the number
      of runs ``n`` per cell. Over several experiments, headers read
      ``<experiment> · <partition>``.
    * LaTeX (:func:`render_latex`): a ``table`` environment holding a booktabs
      ``tabular`` (needs ``\usepackage{booktabs}``), the caption and the same note;
      text is escaped. Over several experiments the header has two rows: each
      experiment over its partitions (``\multicolumn`` and ``\cmidrule``), then the
      partitions.
    * CSV: one row per non-empty cell (and accuracy), columns as :func:`tidy_table`
      (``method, [experiment,] partition, [metric_name,] mean, std, n``; percent, full
      precision; an empty ``std`` for single runs), keyed by ids, not labels.

    ``labels`` (partition id -> display label) and ``experiment_labels`` are added to
    (and override) those given to :func:`accuracy_table`; unlabelled ids show as
    themselves. Cells whose ``n`` differs from the most common ``n`` carry
    ``(n=...)``; cells without runs show a dash. Raises ``ValueError`` for a malformed
    or empty table, or labels that make two columns look the same. ``tuning``: sentences
    appended to the note, one per tuned method (:func:`pflrepro.tuning.table_notes`:
    "sigma chosen on validation from {...}: ...").
    """
    text = table_text(table, caption, decimals=decimals, labels=labels,
                      experiment_labels=experiment_labels, tuning=tuning)
    csv = tidy_table(table).to_csv(index=False, lineterminator="\n")
    write_text(md_path, render_markdown(text))
    write_text(tex_path, render_latex(text))
    write_text(csv_path, csv)
