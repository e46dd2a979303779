"""Accuracy tables as text: tidy CSV rows, Markdown and LaTeX.

What :func:`pflrepro.reporting.tables.write_table` writes. :func:`table_layout` reads
the column structure of an accuracy table
(:func:`pflrepro.reporting.tables.accuracy_table`), :func:`tidy_table` turns it into one row
per cell (the CSV); :func:`table_text` resolves the table's labels and counts its runs
into a :class:`TableText`; :func:`render_markdown` and :func:`render_latex` print it,
with the note that says what the cells are and over how many runs. Rows show the
methods by their papers' names (:mod:`pflrepro.reporting.names`); the CSV keeps the
ids. The note names the methods whose rows are identical (:func:`equal_rows`).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from pflrepro.reporting.accuracy import TABLE_METRICS
from pflrepro.reporting.names import method_names
from pflrepro.reporting.ordering import check_labels, display_labels

#: Statistics stored per (method, partition) by an accuracy table.
STATS: tuple[str, ...] = ("mean", "std", "n")
#: Column choices of an accuracy table.
COLUMN_CHOICES: tuple[tuple[str, ...], ...] = (("partition",), ("experiment", "partition"))
#: Separator of experiment and partition in a flat (Markdown) column header.
HEADER_SEPARATOR = " · "



# --------------------------------------------------------------------------- layout
def table_layout(table: pd.DataFrame) -> tuple[list[str], list[tuple[str, ...]], list[str]]:
    """Return (key level names, column keys in order, metric names) of an accuracy table.

    Key levels are ``("partition",)`` or ``("experiment", "partition")``; metric names
    are ``["weighted_final"]`` without a ``metric_name`` level. Raises ``ValueError``
    when ``table`` does not have the shape of an accuracy table.
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


def column_key(key: tuple[str, ...], name: str, stat: str,
            metric_names: Sequence[str]) -> tuple[str, ...]:
    """The table column of ``stat`` of accuracy ``name`` in column ``key``."""
    return (*key, *((name,) if len(metric_names) > 1 else ()), stat)


def tidy_table(table: pd.DataFrame) -> pd.DataFrame:
    """Turn an accuracy table into one row per non-empty cell and accuracy.

    Columns: ``method``, ``experiment`` (tables over experiments only), ``partition``,
    ``metric_name`` (metrics with several accuracies only), ``mean``, ``std``, ``n``, and
    ``diverged`` (runs of the cell that diverged) when any run of the table diverged.
    Cells without runs (``n == 0``) are left out. Raises ``ValueError`` when ``table``
    does not have the shape of an accuracy table.
    """
    key_names, keys, metric_names = table_layout(table)
    cols = {tuple(str(v) for v in c) for c in table.columns}
    for key in keys:
        lacking = [column_key(key, m, s, metric_names)[len(key):]
                   for m in metric_names for s in STATS
                   if column_key(key, m, s, metric_names) not in cols]
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
                n = table.loc[method, column_key(key, name, "n", metric_names)]
                n = 0 if pd.isna(n) else int(n)
                if n == 0:
                    continue
                row: dict[str, Any] = {"method": str(method),
                                       **dict(zip(key_names, key, strict=True))}
                if multi:
                    row["metric_name"] = name
                for stat in ("mean", "std"):
                    row[stat] = float(table.loc[method, column_key(key, name, stat,
                                                                metric_names)])
                row["n"] = n
                row["diverged"] = diverged.get((str(method), *key), 0)
                rows.append(row)
    tidy = pd.DataFrame(rows, columns=[*out_cols, "diverged"])
    if not diverged:  # the column appears only when some run diverged
        tidy = tidy.drop(columns="diverged")
    return tidy.astype({"n": "int64"})


# --------------------------------------------------------------------------- text
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


def equal_rows(methods: Sequence[str], rows: Sequence[Sequence[Any]],
               empty: Callable[[Sequence[Any]], bool]) -> list[list[str]]:
    """Groups of ``methods`` whose ``rows`` are equal, in the order of ``methods``.

    Rows for which ``empty`` holds (no run in any cell) are never grouped.
    """
    groups: dict[str, list[str]] = {}
    for method, row in zip(methods, rows, strict=True):
        if not empty(row):
            groups.setdefault(repr(list(row)), []).append(method)
    return [g for g in groups.values() if len(g) > 1]


@dataclass(frozen=True)
class TableText:
    """An accuracy table made ready to print: labels resolved, cells counted.

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
    #: Methods that kept every client in one cluster (:func:`.accuracy.one_cluster_methods`).
    one_cluster: list[str] = dataclasses.field(default_factory=list)
    #: Per tuned method: how its values were chosen
    #: (:func:`pflrepro.reporting.tuning_note.table_notes`).
    tuning: list[str] = dataclasses.field(default_factory=list)
    #: Shown name of each method (row); ids not given show as themselves.
    names: dict[str, str] = dataclasses.field(default_factory=dict)

    def name(self, method: str) -> str:
        """The shown name of row ``method``."""
        return self.names.get(method, method)

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

    def equal_rows_note(self, sym: Mapping[str, str], escape: Callable[[str], str] = str) -> str:
        """`` A = B: the same in every cell ...`` for rows that print alike; else ``""``.

        Says whether the rows are equal to full precision or only as printed.
        """
        exact = {m: row for m, row in zip(self.methods, self.cells, strict=True)}
        parts = []
        for group in equal_rows(self.methods, self.cell_texts(sym),
                                empty=lambda row: all(c == sym["dash"] for c in row)):
            same = all(exact[m] == exact[group[0]] for m in group)
            parts.append(" = ".join(escape(self.name(m)) for m in group)
                         + (" (to full precision)" if same else " (as printed)"))
        if not parts:
            return ""
        return " Rows with the same value in every cell: " + "; ".join(parts) + "."

    def note(self, sym: Mapping[str, str], escape: Callable[[str], str] = str) -> str:
        """The note under the table (what the cells are, over how many runs).

        ``escape`` quotes method names for the output format.
        """
        text = _note(self.filled, self.single, self.usual_n, self.metric_names, sym)
        if any(any(row) for row in self.diverged):
            text += (" (k diverged): k runs of the cell diverged (a non-finite loss); they "
                     "stopped there and count with their accuracy at that round.")
        if self.one_cluster:
            names = ", ".join(escape(self.name(m)) for m in self.one_cluster)
            text += (f" {names}: every client stayed in one cluster in every round of "
                     f"every run (no split), so it trained a single global model, as "
                     f"FedAvg does.")
        text += self.equal_rows_note(sym, escape)
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
                  (table.loc[method, column_key(key, m, "n", metric_names)] for m in metric_names)}
            if len(ns) > 1:
                raise ValueError(f"write_table: method {method!r}, column {key} has different "
                                 f"run counts {sorted(ns)} for {metric_names}")
            counts[(str(method), key)] = ns.pop()
    return counts


def table_text(table: pd.DataFrame, caption: str, *, decimals: int = 1,
               labels: Mapping[str, str] | None = None,
               experiment_labels: Mapping[str, str] | None = None,
               tuning: Sequence[str] = ()) -> TableText:
    """Resolve the labels and count the runs of an accuracy table.

    ``labels``, ``experiment_labels`` and ``tuning`` as in :func:`.tables.write_table`. Raises
    ``ValueError`` for a malformed or empty table, or labels that make two columns look
    the same.
    """
    tidy = tidy_table(table)
    if tidy.empty:
        raise ValueError("write_table: the table has no cell with runs")
    key_names, keys, metric_names = table_layout(table)
    by_experiment = key_names[0] == "experiment"
    exp_shown, part_shown = _shown_labels(table, keys, by_experiment, labels, experiment_labels)
    counts = _cell_counts(table, keys, metric_names)
    diverged = table.attrs.get("diverged") or {}
    filled = [n for n in counts.values() if n > 0]
    frequency = Counter(filled)
    cells = [[([(float(table.loc[method, column_key(key, m, "mean", metric_names)]),
                 float(table.loc[method, column_key(key, m, "std", metric_names)]))
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
                     tuning=list(tuning), names=method_names(str(m) for m in table.index))


def render_markdown(text: TableText) -> str:
    """The Markdown of a table: ``Table: <caption>``, a pipe table, the note."""
    lines = [f"Table: {text.caption}", "",
             "| method | " + " | ".join(_md_escape(text.header(k)) for k in text.keys) + " |",
             "|:--|" + "--:|" * len(text.keys)]
    for method, row in zip(text.methods, text.cell_texts(_MD), strict=True):
        lines.append(f"| {_md_escape(text.name(method))} | " + " | ".join(row) + " |")
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
        tex.append(f"    {_latex_escape(text.name(method))} & " + " & ".join(row) + " \\\\")
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
