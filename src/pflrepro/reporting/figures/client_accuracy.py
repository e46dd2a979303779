"""One client's test accuracy against round (FedeRiCo Fig. 6c), one panel per partition."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from pflrepro.reporting.figures.accuracy import mean_band_stats, method_lines
from pflrepro.reporting.figures.common import PathLike, check_client, run_groups, wrap
from pflrepro.config.figure_kinds import FigureKind
from pflrepro.reporting.accuracy import RUN_KEYS, check_aggregate, check_cells, run_label
from pflrepro.reporting.ordering import display_labels, order_values
from pflrepro.store.results import TEST_ACCURACY

KIND = FigureKind(
    name="client_accuracy", file="client{client}-accuracy", draw="plot_client_accuracy",
    caption="Test accuracy of client {client} per round, one line per method.",
    label="client {client} accuracy", options=("client", "methods"))


def client_accuracy_per_round(agg: pd.DataFrame, client: int = 0) -> pd.DataFrame:
    """Per run and evaluated round: the test accuracy of one client.

    Returns one row per (run, round) with the run's config columns, ``round``,
    ``accuracy`` (a fraction) and ``group`` (the client's distribution id in that run;
    ``-1`` when unknown). Raises ``ValueError`` when the aggregate has no
    ``test_accuracy`` rows for ``client`` (naming the clients it has), when a round's
    accuracy is given twice, or when it is NaN (no test set).
    """
    what = "plot_client_accuracy"
    check_aggregate(agg, (TEST_ACCURACY,), what)
    client = check_client(client, what)
    keys = list(RUN_KEYS)
    rows = agg[(agg["metric"] == TEST_ACCURACY) & (agg["client"] >= 0) & (agg["peer"] < 0)]
    mine = rows.loc[rows["client"] == client, [*keys, "round", "value"]]
    if mine.empty:
        have = sorted(int(c) for c in rows["client"].unique())
        raise ValueError(f"{what}: no {TEST_ACCURACY!r} rows for client {client} "
                         f"(clients present: {have})")
    dup = mine.duplicated([*keys, "round"])
    if dup.any():
        row = mine[dup].iloc[0]
        raise ValueError(f"{what}: {TEST_ACCURACY!r} given twice for client {client} at round "
                         f"{row['round']} of run {run_label(row)}")
    bad = mine[mine["value"].isna()]
    if not bad.empty:
        row = bad.iloc[0]
        raise ValueError(f"{what}: {TEST_ACCURACY!r} is NaN for client {client} (no test "
                         f"set?) at round {row['round']} of run {run_label(row)}")
    groups = run_groups(agg)
    groups = groups.loc[groups["client"] == client, [*keys, "group"]]
    out = mine.rename(columns={"value": "accuracy"}).merge(groups, on=keys, how="left",
                                                           validate="many_to_one")
    out["group"] = out["group"].fillna(-1).astype("int64")
    out["round"] = out["round"].astype("int64")
    out = out.sort_values([*keys, "round"], kind="stable").reset_index(drop=True)
    return out[[*keys, "round", "accuracy", "group"]]


def plot_client_accuracy(agg: pd.DataFrame, pdf: PathLike, png: PathLike, client: int = 0,
                         *, methods_order: Sequence[str] | None = None,
                         partitions_order: Sequence[str] | None = None,
                         labels: Mapping[str, str] | None = None) -> None:
    """Plot one client's test accuracy (%) against round, one panel per partition.

    FedeRiCo Fig. 6(c) style. One line per method: the mean over its runs (split
    seeds × train seeds) of ``client``'s test accuracy
    (:func:`client_accuracy_per_round`), with a band of ±1 standard deviation
    (``ddof=1``) where a method has two or more runs at a round. A panel's title
    gives the client's distribution when all of the panel's runs that know it agree.
    ``labels`` maps partition ids to display labels. Raises ``ValueError`` when the
    client has no accuracy rows, a (method, partition) mixes settings, or ordering
    names an absent method or partition.
    """
    what = "plot_client_accuracy"
    per_round = client_accuracy_per_round(agg, client)
    check_cells(per_round.groupby(list(RUN_KEYS), dropna=False, sort=False).tail(1), what)
    stats = mean_band_stats(per_round, "accuracy")
    methods = order_values(stats["method"], methods_order, f"{what} methods")
    partitions = order_values(stats["partition"], partitions_order, f"{what} partitions")
    shown = display_labels(partitions, labels, f"{what} labels")
    runs = per_round.drop_duplicates(list(RUN_KEYS)).groupby(["method", "partition"]).size()
    titles = {}
    for partition in partitions:
        groups = sorted({int(g) for g in per_round.loc[per_round["partition"] == partition,
                                                         "group"] if g >= 0})
        if len(groups) == 1:
            where = f"client {client}: distribution {groups[0]}"
        elif not groups:
            where = f"client {client}"
        else:
            where = f"client {client}: distribution varies by run"
        titles[partition] = wrap(shown[partition]) + "\n" + where
    method_lines(stats, runs, methods, partitions, titles,
                 f"test accuracy of client {client} (%)", pdf, png)
