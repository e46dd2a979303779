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

Clients with ``n_test == 0`` have no test set and are left out of both averages.

An accuracy table cell holds the mean and the sample standard deviation (``ddof=1``)
of the final weighted accuracy, in percent, over the runs (split seeds × train seeds)
of one (method, partition), and the number ``n`` of those runs. A cell with a single
run has ``std`` NaN, written ``± n/a``; a (method, partition) without runs has
``n == 0`` and is written as a dash (and left out of the CSV).
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

from pflrepro.io import write_text
from pflrepro.results import CONFIG_COLUMNS, N_TEST, TEST_ACCURACY, VALUE_COLUMNS

#: Columns that identify one run.
RUN_KEYS: tuple[str, ...] = tuple(CONFIG_COLUMNS)
#: Columns that must be constant within one (method, partition) cell of a table.
SETTING_KEYS: tuple[str, ...] = ("experiment", "dataset", "algorithm", "params")
#: Statistics stored per (method, partition) by :func:`accuracy_table`.
STATS: tuple[str, ...] = ("mean", "std", "n")


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


def check_cells(final: pd.DataFrame, what: str) -> None:
    """Check that each (method, partition) holds comparable, distinct runs.

    Raises ``ValueError`` when a cell mixes settings (experiment, dataset, algorithm,
    params), holds the same (split_seed, train_seed) twice, or when its runs end at
    different rounds; each would make a mean over the cell meaningless.
    """
    for (method, partition), cell in final.groupby(["method", "partition"], sort=True,
                                                    dropna=False):
        where = f"{what}: method={method!r}, partition={partition!r}"
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
        rounds = sorted(cell["round"].unique().tolist())
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


def order_values(found: Iterable[str], order: Sequence[str] | None, what: str) -> list[str]:
    """Order ``found`` by ``order``; values not in ``order`` follow in natural order.

    Raises ``ValueError`` if ``order`` names a value that is not in ``found`` (a typo
    or a method/partition without results), or names one twice.
    """
    found = sorted({str(v) for v in found}, key=natural_key)
    if order is None:
        return found
    order = [str(v) for v in order]
    dup = sorted({v for v in order if order.count(v) > 1})
    if dup:
        raise ValueError(f"{what}: {dup} listed twice in the requested order")
    unknown = [v for v in order if v not in found]
    if unknown:
        raise ValueError(f"{what}: {unknown} requested but not in the aggregate "
                         f"(present: {found})")
    return order + [v for v in found if v not in order]


def accuracy_table(agg: pd.DataFrame, methods_order: Sequence[str] | None = None,
                   partitions_order: Sequence[str] | None = None) -> pd.DataFrame:
    """Mean, std and number of runs of the final weighted accuracy, in percent.

    Returns a frame indexed by ``method`` whose columns are a MultiIndex
    ``(partition, stat)`` with ``stat`` in :data:`STATS`: ``mean`` and ``std``
    (``ddof=1``; NaN for a single run) in percent, ``n`` the number of runs
    (split seeds × train seeds). ``methods_order`` / ``partitions_order`` fix the row
    and column order; unlisted ones follow in natural order, and listing one absent
    from the aggregate raises ``ValueError``. A (method, partition) without runs has
    ``n == 0`` and NaN statistics.

    Raises ``ValueError`` when metrics are missing or a cell's runs are not
    comparable (see :func:`check_cells`).
    """
    final = final_accuracy(agg)
    check_cells(final, "accuracy_table")
    final = final.assign(percent=final["weighted_accuracy"] * 100.0)
    stats = (final.groupby(["method", "partition"], sort=False)["percent"]
             .agg(mean="mean", std=lambda s: s.std(ddof=1), n="count"))
    methods = order_values(final["method"], methods_order, "accuracy_table methods")
    partitions = order_values(final["partition"], partitions_order,
                              "accuracy_table partitions")
    columns = pd.MultiIndex.from_product([partitions, list(STATS)], names=["partition", "stat"])
    table = pd.DataFrame(index=pd.Index(methods, name="method"), columns=columns, dtype=float)
    for (method, partition), row in stats.iterrows():
        for stat in STATS:
            table.loc[str(method), (str(partition), stat)] = float(row[stat])
    for partition in partitions:
        table[(partition, "n")] = table[(partition, "n")].fillna(0).astype("int64")
    return table


# --------------------------------------------------------------------------- writing
def tidy_table(table: pd.DataFrame) -> pd.DataFrame:
    """Turn an :func:`accuracy_table` result into rows (method, partition, mean, std, n).

    Cells without runs (``n == 0``) are left out. Raises ``ValueError`` when ``table``
    does not have the shape :func:`accuracy_table` returns.
    """
    cols = table.columns
    if (not isinstance(cols, pd.MultiIndex) or cols.nlevels != 2
            or set(cols.get_level_values(1)) - set(STATS)):
        raise ValueError("write_table: expected the result of accuracy_table (columns "
                         f"(partition, stat) with stat in {list(STATS)}), got {list(cols)[:6]}")
    partitions = list(dict.fromkeys(cols.get_level_values(0)))
    for partition in partitions:
        lacking = [s for s in STATS if (partition, s) not in cols]
        if lacking:
            raise ValueError(f"write_table: partition {partition!r} lacks column(s) {lacking}")
    rows = []
    for method in table.index:
        for partition in partitions:
            n = table.loc[method, (partition, "n")]
            n = 0 if pd.isna(n) else int(n)
            if n == 0:
                continue
            rows.append({"method": str(method), "partition": str(partition),
                         "mean": float(table.loc[method, (partition, "mean")]),
                         "std": float(table.loc[method, (partition, "std")]), "n": n})
    tidy = pd.DataFrame(rows, columns=["method", "partition", "mean", "std", "n"])
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


def _cell(mean: float, std: float, n: int, usual_n: int, decimals: int,
          sym: Mapping[str, str]) -> str:
    """Format one table cell, e.g. ``83.2 ± 1.4``."""
    if n == 0:
        return sym["dash"]
    spread = "n/a" if pd.isna(std) else f"{std:.{decimals}f}"
    text = f"{mean:.{decimals}f} {sym['pm']} {spread}"
    if n != usual_n:
        text += f" (n={n})"
    return text


def _note(tidy: pd.DataFrame, usual_n: int, sym: Mapping[str, str]) -> str:
    """Return the note under a table: what the cells are and over how many runs."""
    ns = sorted(set(tidy["n"].tolist()))
    text = (f"Final test accuracy ({sym['pct']}), weighted by client test-set size: "
            f"mean {sym['pm']} std (ddof=1) over ")
    if len(ns) == 1:
        text += f"n = {ns[0]} runs (split seeds {sym['times']} train seeds) per cell."
    else:
        text += (f"the runs (split seeds {sym['times']} train seeds) of each cell, "
                 f"n = {ns[0]}{sym['range']}{ns[-1]}; n = {usual_n} unless marked (n=...).")
    if tidy["std"].isna().any():
        text += " n/a: a single run, no std."
    return text


def write_table(table: pd.DataFrame, md_path: str | os.PathLike[str],
                tex_path: str | os.PathLike[str], csv_path: str | os.PathLike[str],
                caption: str, *, decimals: int = 1) -> None:
    r"""Write an :func:`accuracy_table` result as Markdown, LaTeX and tidy CSV, atomically.

    * Markdown: a pipe table with cells ``83.2 ± 1.4`` under ``Table: <caption>``,
      then a note line stating the number of runs ``n`` per cell.
    * LaTeX: a ``table`` environment holding a booktabs ``tabular`` (needs
      ``\usepackage{booktabs}``), the caption and the same note; text is escaped.
    * CSV: one row per non-empty cell, columns ``method, partition, mean, std, n``
      (percent, full precision; an empty ``std`` for single runs).

    Cells whose ``n`` differs from the most common ``n`` carry ``(n=...)``; cells
    without runs show a dash. Raises ``ValueError`` for a malformed or empty table.
    """
    tidy = tidy_table(table)
    if tidy.empty:
        raise ValueError("write_table: the table has no cell with runs")
    counts = Counter(tidy["n"].tolist())
    usual_n = max(counts, key=lambda n: (counts[n], n))
    partitions = list(dict.fromkeys(table.columns.get_level_values(0)))
    methods = [str(m) for m in table.index]

    def cells(sym: Mapping[str, str]) -> list[list[str]]:
        rows = []
        for method in table.index:
            row = []
            for partition in partitions:
                n = table.loc[method, (partition, "n")]
                row.append(_cell(float(table.loc[method, (partition, "mean")]),
                                 float(table.loc[method, (partition, "std")]),
                                 0 if pd.isna(n) else int(n), usual_n, decimals, sym))
            rows.append(row)
        return rows

    # Markdown
    md_rows = cells(_MD)
    lines = [f"Table: {caption}", "",
             "| method | " + " | ".join(_md_escape(p) for p in partitions) + " |",
             "|:--|" + "--:|" * len(partitions)]
    for method, row in zip(methods, md_rows, strict=True):
        lines.append(f"| {_md_escape(method)} | " + " | ".join(row) + " |")
    lines += ["", _note(tidy, usual_n, _MD), ""]
    markdown = "\n".join(lines)

    # LaTeX
    tex_rows = cells(_TEX)
    tex = [
        "% Generated by pflrepro.reporting.tables.write_table; needs \\usepackage{booktabs}.",
        "\\begin{table}[htbp]",
        "  \\centering",
        f"  \\caption{{{_latex_escape(caption)}}}",
        f"  \\begin{{tabular}}{{l{'r' * len(partitions)}}}",
        "    \\toprule",
        "    Method & " + " & ".join(_latex_escape(p) for p in partitions) + " \\\\",
        "    \\midrule",
    ]
    for method, row in zip(methods, tex_rows, strict=True):
        tex.append(f"    {_latex_escape(method)} & " + " & ".join(row) + " \\\\")
    tex += [
        "    \\bottomrule",
        "  \\end{tabular}",
        "",
        "  \\smallskip",
        f"  {{\\footnotesize {_note(tidy, usual_n, _TEX)}}}",
        "\\end{table}",
        "",
    ]

    csv = tidy.to_csv(index=False, lineterminator="\n")

    write_text(md_path, markdown)
    write_text(tex_path, "\n".join(tex))
    write_text(csv_path, csv)
