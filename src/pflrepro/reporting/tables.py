"""Accuracy tables: mean ± std over runs of a per-run accuracy, per method and column.

An accuracy table cell holds the mean and the sample standard deviation (``ddof=1``)
of a per-run accuracy, in percent, over the runs (split seeds × train seeds) of one
(method, partition) -- or (method, experiment, partition) when a table spans several
experiments -- and the number ``n`` of those runs. The per-run accuracy is chosen by
the table metric (:data:`~pflrepro.reporting.accuracy.TABLE_METRICS`):
``weighted_final`` (the final weighted accuracy, FedeRiCo; the default) or
``mean_bmta`` (BMTA and the final mean accuracy, FedAMP; two numbers per cell). A
cell with a single run has ``std`` NaN, written ``± n/a``; a cell without runs has
``n == 0`` and is written as a dash (and left out of the CSV).

The per-run accuracies and their definitions: :mod:`pflrepro.reporting.accuracy`; the
order and labels of the rows and columns: :mod:`pflrepro.reporting.ordering`; the
Markdown and LaTeX text: :mod:`pflrepro.reporting.render`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import pandas as pd

from pflrepro.choices import require_choice
from pflrepro.reporting.accuracy import (
    TABLE_METRICS,
    check_cells,
    one_cluster_methods,
    run_accuracies,
)
from pflrepro.reporting.ordering import check_labels, display_labels, order_values
from pflrepro.reporting.render import (
    COLUMN_CHOICES,
    STATS,
    column_key,
    render_latex,
    render_markdown,
    table_text,
    tidy_table,
)
from pflrepro.store.io import write_text


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
    columns = _column_levels(columns, experiments, what)
    check_cells(runs, what, by=("method", *columns))
    methods = order_values(runs["method"], methods_order, f"{what} methods")
    partitions = order_values(runs["partition"], partitions_order, f"{what} partitions")
    keys = _column_keys(runs, experiments, partitions, columns, labels, experiment_labels,
                        what)
    table = _cell_statistics(runs, methods, keys, columns, names)
    single_cluster = [m for m in one_cluster_methods(agg) if m in table.index]
    table.attrs.update(metric=metric, labels=check_labels(labels, what),
                       one_cluster=single_cluster,
                       experiment_labels=check_labels(experiment_labels, what),
                       diverged=_diverged_cells(runs, ["method", *columns]))
    return table


def _column_levels(columns: Sequence[str] | str | None, experiments: Sequence[str],
                   what: str) -> tuple[str, ...]:
    """The table's column levels (:data:`COLUMN_CHOICES`): by experiment when several."""
    if columns is None:
        columns = ("experiment", "partition") if len(experiments) > 1 else ("partition",)
    columns = (columns,) if isinstance(columns, str) else tuple(columns)
    return require_choice(columns, COLUMN_CHOICES, f"{what}: columns")


def _column_keys(runs: pd.DataFrame, experiments: Sequence[str], partitions: Sequence[str],
                 columns: tuple[str, ...], labels: Mapping[str, str] | None,
                 experiment_labels: Mapping[str, str] | None,
                 what: str) -> list[tuple[str, ...]]:
    """The table's columns in order: ``(partition,)`` or ``(experiment, partition)`` keys.

    Over experiments, the pairs present; checks that no two shown ones share a label.
    """
    if columns == ("experiment", "partition"):
        present = set(zip(runs["experiment"].astype(str), runs["partition"].astype(str),
                          strict=True))
        keys = [(e, p) for e in experiments for p in partitions if (e, p) in present]
        for experiment in experiments:
            display_labels([p for e, p in keys if e == experiment], labels,
                           f"{what} labels (experiment {experiment!r})")
        display_labels(experiments, experiment_labels, f"{what} experiment_labels")
        return keys
    display_labels(partitions, labels, f"{what} labels")
    check_labels(experiment_labels, f"{what} experiment_labels")
    return [(p,) for p in partitions]


def _cell_statistics(runs: pd.DataFrame, methods: Sequence[str],
                     keys: Sequence[tuple[str, ...]], columns: tuple[str, ...],
                     names: Sequence[str]) -> pd.DataFrame:
    """Mean, std (percent) and ``n`` of each accuracy ``names`` per method and column."""
    level_names = [*columns, *(["metric_name"] if len(names) > 1 else []), "stat"]
    tuples = [column_key(key, name, stat, names)
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
                table.loc[method, column_key(tuple(key), name, stat, names)] = float(row[stat])
    for col in table.columns:
        if col[-1] == "n":
            table[col] = table[col].fillna(0).astype("int64")
    return table


def _diverged_cells(runs: pd.DataFrame, group_keys: list[str]) -> dict[tuple[str, ...], int]:
    """Runs that diverged per (method, column), for the cells that have any."""
    diverged = runs[runs["diverged"]].groupby(group_keys, sort=False).size()
    return {tuple(str(v) for v in (i if isinstance(i, tuple) else (i,))): int(n)
            for i, n in diverged.items()}


# --------------------------------------------------------------------------- writing
def write_table(table: pd.DataFrame, md_path: str | os.PathLike[str],
                tex_path: str | os.PathLike[str], csv_path: str | os.PathLike[str],
                caption: str, *, decimals: int = 1,
                labels: Mapping[str, str] | None = None,
                experiment_labels: Mapping[str, str] | None = None,
                tuning: Sequence[str] = ()) -> None:
    r"""Write an :func:`accuracy_table` result as Markdown, LaTeX and tidy CSV, atomically.

    * Markdown (:func:`~pflrepro.reporting.render.render_markdown`): a pipe table with
      cells ``83.2 ± 1.4`` (``mean_bmta``: ``85.1 ± 0.3 / 84.0 ± 0.5``, BMTA / final) under
      ``Table: <caption>``, then a note line stating what the cells are and the number
      of runs ``n`` per cell. Over several experiments, headers read
      ``<experiment> · <partition>``.
    * LaTeX (:func:`~pflrepro.reporting.render.render_latex`): a ``table`` environment
      holding a booktabs ``tabular`` (needs ``\usepackage{booktabs}``), the caption and
      the same note; text is escaped. Over several experiments the header has two rows: each
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
    appended to the note, one per tuned method (:func:`pflrepro.reporting.tuning_note.table_notes`:
    "sigma chosen on validation from {...}: ...").
    """
    text = table_text(table, caption, decimals=decimals, labels=labels,
                      experiment_labels=experiment_labels, tuning=tuning)
    csv = tidy_table(table).to_csv(index=False, lineterminator="\n")
    write_text(md_path, render_markdown(text))
    write_text(tex_path, render_latex(text))
    write_text(csv_path, csv)
