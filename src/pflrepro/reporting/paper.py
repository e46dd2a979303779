"""The papers' own numbers beside ours: the paper-vs-ours tables.

A numbers file (``config/paper_numbers.csv``; ``#`` lines are comments) has one row per
cell of a paper's result table, with :data:`COLUMNS`:

``id``
    unique, lower case, digits and ``-``.
``paper``, ``table``, ``table_id``, ``setting``, ``paper_method``
    the paper (one of :data:`pflrepro.reporting.claims.parse.PAPERS`), its table as the text
    names it, our slug for that table (the output name, see :func:`output_name`), the
    cell's column (data set, split, participation) and row (the method as the paper
    names it).
``quantity``, ``value``, ``unit``, ``metric``
    ``accuracy`` in ``%`` (``metric``: the per-run accuracy of ours it is set against,
    ``weighted_final``, ``mean_bmta`` or ``mean_final`` of
    :mod:`pflrepro.reporting.tables`) or ``communication`` in ``1e7 parameters``
    (``metric`` ``total_communication``: scalars sent and received per run, summed over
    clients and rounds, :mod:`pflrepro.reporting.communication`). ``value`` is the
    number the text gives, or empty where it gives none: never a number of ours.
``where``
    where in the text the number (or the table) is.
``experiment``, ``partition``, ``method``
    our paper-scale cell: experiment and method names of ``config.yaml``, and the
    partition's display label (empty: the experiment's only partition).
``cpu_experiment``, ``cpu_partition``
    a CPU-scale experiment of the same design (a *design analogue*: other data, model
    and rounds, not expected to match the paper's number), or empty.
``planned``
    ``true`` when the paper-scale experiment or the method is not in ``config.yaml``
    yet (the row then shows "not run").
``note``
    free text.

:func:`compare` sets each row against our runs: ours = mean ± std (``ddof=1``) over
the runs of the cell, in the paper's unit; difference = ours − paper; *inside our
std* when ``|difference| <= std`` (undecided with fewer than two runs or without a
paper number). Ours is compared with the paper's number only in the paper's setting:
at the paper scale (the paper's design and model; the runs' tables do not record the
model) and where the runs' data set is the one the row's ``setting`` names. Elsewhere
(every CPU-scale design analogue, or another data set) the status says "different
setting" and no difference is computed. Methods whose per-run values are equal in
every run of every setting of the table (to full precision) are named in the
Markdown's note (:func:`pflrepro.reporting.render.equal_rows`).
"""

from __future__ import annotations

import csv
import io
import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pflrepro.config import SCALES
from pflrepro.reporting.paper_cell import PaperCell
from pflrepro.reporting.paper_settings import equal_groups, other_setting, per_run

if TYPE_CHECKING:  # the workflow parse loads the numbers without pandas
    import pandas as pd

    from pflrepro.config import WorkflowConfig

#: Columns of a numbers file, in order.
COLUMNS = ("id", "paper", "table", "table_id", "setting", "paper_method", "quantity",
           "value", "unit", "where", "metric", "experiment", "partition", "method",
           "cpu_experiment", "cpu_partition", "planned", "note")
#: Quantity -> (its unit, the metrics of ours it may be set against).
QUANTITIES: Mapping[str, tuple[str, tuple[str, ...]]] = {
    "accuracy": ("%", ("weighted_final", "mean_bmta", "mean_final")),
    "communication": ("1e7 parameters", ("total_communication",)),
}
#: Our numbers are divided by this to be in the paper's unit.
UNIT_SCALE: Mapping[str, float] = {"%": 0.01, "1e7 parameters": 1e7}
#: Columns of :func:`compare`'s frame (and of the CSV).
RESULT_COLUMNS = ("id", "paper", "table", "setting", "paper_method", "quantity", "unit",
                  "paper_value", "where", "scale", "experiment", "partition", "method",
                  "metric", "ours_mean", "ours_std", "ours_n", "difference", "within_std",
                  "status", "scale_note", "note")
#: What each scale's numbers are (the ``scale_note`` column).
SCALE_NOTES: Mapping[str, str] = {
    "paper": "paper scale: the paper's design, our choices where the text is silent",
    "cpu": "CPU-scale design analogue: other data, model and rounds; not expected to match",
}
_ID = re.compile(r"^[a-z0-9][a-z0-9-]*$")
_SLUG = re.compile(r"^[a-z0-9][a-z0-9_]*$")


class PaperNumbersError(ValueError):
    """A problem in a numbers file; the message names the row and the column."""


# --------------------------------------------------------------------------- loading
def load_paper_numbers(path: str | os.PathLike[str]) -> list[PaperCell]:
    """Read and check a numbers file; raise :class:`PaperNumbersError` naming the problem."""
    try:
        with open(path, encoding="utf-8", newline="") as fh:
            text = fh.read()
    except OSError as err:
        raise PaperNumbersError(f"{path}: cannot read: {err}") from None
    return parse_paper_numbers(text, str(path))


def parse_paper_numbers(text: str, where: str = "paper numbers") -> list[PaperCell]:
    """Check the text of a numbers file (CSV, ``#`` comment lines) and return its rows."""
    from pflrepro.reporting.claims.parse import PAPERS

    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    reader = csv.DictReader(io.StringIO("\n".join(lines)))
    header = tuple(reader.fieldnames or ())
    if header != COLUMNS:
        raise PaperNumbersError(f"{where}: expected the columns {list(COLUMNS)}, got "
                                f"{list(header)}")
    cells: list[PaperCell] = []
    seen: set[str] = set()
    for k, row in enumerate(reader):
        label = f"{where}: row {k + 1}" + (f" (id {row['id']!r})" if row.get("id") else "")
        if None in row or any(v is None for v in row.values()):
            raise PaperNumbersError(f"{label}: expected {len(COLUMNS)} fields")
        cell = _cell(row, label, PAPERS)
        if cell.id in seen:
            raise PaperNumbersError(f"{label}: id {cell.id!r} is used twice")
        seen.add(cell.id)
        cells.append(cell)
    if not cells:
        raise PaperNumbersError(f"{where}: no rows")
    keys: dict[tuple[str, ...], str] = {}
    for cell in cells:
        key = (cell.table_id, cell.setting, cell.paper_method, cell.quantity)
        if key in keys:
            raise PaperNumbersError(f"{where}: rows {keys[key]!r} and {cell.id!r} are the same "
                                    f"cell {list(key)}")
        keys[key] = cell.id
    return cells


def _cell(row: Mapping[str, str], label: str, papers: Sequence[str]) -> PaperCell:
    values = {k: row[k].strip() for k in COLUMNS}
    for name in ("id", "paper", "table", "table_id", "setting", "paper_method", "quantity",
                 "unit", "where", "metric", "method", "planned"):
        if not values[name]:
            raise PaperNumbersError(f"{label}: column {name!r} is empty")
    if not _ID.match(values["id"]):
        raise PaperNumbersError(f"{label}: id {values['id']!r} must be lower case letters, "
                                "digits and '-'")
    if not _SLUG.match(values["table_id"]):
        raise PaperNumbersError(f"{label}: table_id {values['table_id']!r} must be lower case "
                                "letters, digits and '_'")
    if values["paper"] not in papers:
        raise PaperNumbersError(f"{label}: paper {values['paper']!r} is not one of "
                                f"{list(papers)}")
    quantity = values["quantity"]
    if quantity not in QUANTITIES:
        raise PaperNumbersError(f"{label}: quantity {quantity!r} is not one of "
                                f"{list(QUANTITIES)}")
    unit, metrics = QUANTITIES[quantity]
    if values["unit"] != unit:
        raise PaperNumbersError(f"{label}: the unit of {quantity} is {unit!r}, got "
                                f"{values['unit']!r}")
    if values["metric"] not in metrics:
        raise PaperNumbersError(f"{label}: metric {values['metric']!r} of {quantity} is not "
                                f"one of {list(metrics)}")
    value: float | None = None
    if values["value"]:
        try:
            value = float(values["value"])
        except ValueError:
            raise PaperNumbersError(f"{label}: value {values['value']!r} is not a number "
                                    "(leave it empty where the text gives none)") from None
        if not math.isfinite(value) or value < 0 or (unit == "%" and value > 100):
            raise PaperNumbersError(f"{label}: value {value:g} is outside the range of "
                                    f"{unit!r}")
    if values["planned"] not in ("true", "false"):
        raise PaperNumbersError(f"{label}: planned must be true or false, got "
                                f"{values['planned']!r}")
    if not values["experiment"] and not values["cpu_experiment"]:
        raise PaperNumbersError(f"{label}: neither experiment nor cpu_experiment is given")
    if values["cpu_partition"] and not values["cpu_experiment"]:
        raise PaperNumbersError(f"{label}: cpu_partition without cpu_experiment")
    if values["partition"] and not values["experiment"]:
        raise PaperNumbersError(f"{label}: partition without experiment")
    return PaperCell(**{**values, "value": value,  # type: ignore[arg-type]
                        "planned": values["planned"] == "true"})


def check_against_config(cells: Iterable[PaperCell], cfg: WorkflowConfig, *,
                         present_only: bool = False, where: str = "paper numbers") -> None:
    """Check that every name a row uses is in ``cfg``, or the row is ``planned``.

    Not planned: the paper-scale experiment exists and lists the method, and the
    partition label is one of its partitions' (or it has one partition). The CPU
    experiment, when given, must exist at the ``cpu`` scale with the partition; a CPU
    experiment without the row's method shows "not run". Raises
    :class:`PaperNumbersError` naming ``where`` (the numbers file) and the row.

    ``present_only``: check a row's paper side only where ``cfg`` has its experiment,
    and its CPU side only where ``cfg`` has its CPU experiment. The workflow checks
    every config so: a config of other experiments (a user's, a test project's, the
    demo) tables none of the rows, and one that keeps a paper experiment but renames
    its method is refused, naming the row.
    """
    for cell in cells:
        label = f"{where}: row {cell.id!r}"
        paper_side = not present_only or cell.experiment in cfg.experiments
        if paper_side and not cell.planned:
            if cell.method not in cfg.methods:
                raise PaperNumbersError(f"{label}: method {cell.method!r} is not under "
                                        "`methods:` of the config (mark the row planned)")
            if cell.experiment:
                exp = cfg.experiments.get(cell.experiment)
                if exp is None:
                    raise PaperNumbersError(f"{label}: experiment {cell.experiment!r} is not "
                                            "in the config (mark the row planned)")
                if cell.method not in exp.methods:
                    raise PaperNumbersError(f"{label}: experiment {cell.experiment!r} has no "
                                            f"method {cell.method!r}")
                if exp.scale != "paper":
                    raise PaperNumbersError(f"{label}: experiment {cell.experiment!r} is at "
                                            f"the {exp.scale} scale, not the paper scale")
                _partition_id(exp.partition_labels, [p.id for p in exp.partitions],
                              cell.partition, f"{label}, experiment {cell.experiment!r}")
        elif paper_side and cell.experiment in cfg.experiments:
            exp = cfg.experiments[cell.experiment]
            _partition_id(exp.partition_labels, [p.id for p in exp.partitions],
                          cell.partition, f"{label}, experiment {cell.experiment!r}")
        if cell.cpu_experiment and (not present_only
                                    or cell.cpu_experiment in cfg.experiments):
            exp = cfg.experiments.get(cell.cpu_experiment)
            if exp is None or exp.scale != "cpu":
                raise PaperNumbersError(f"{label}: cpu_experiment {cell.cpu_experiment!r} is "
                                        "not a cpu-scale experiment of the config")
            ids = [p.id for p in exp.partitions]
            if present_only and cell.cpu_partition and not any(
                    exp.partition_labels.get(i, i) == cell.cpu_partition or i == cell.cpu_partition
                    for i in ids):
                continue  # a CPU experiment cut to fewer partitions: the cell shows "not run"
            _partition_id(exp.partition_labels, ids, cell.cpu_partition,
                          f"{label}, experiment {cell.cpu_experiment!r}")


def _partition_id(labels: Mapping[str, str], ids: Sequence[str], wanted: str,
                  where: str) -> str:
    """The partition id among ``ids`` whose label (or id) is ``wanted``; ``""``: the only one."""
    if not wanted:
        if len(ids) != 1:
            raise PaperNumbersError(f"{where}: has {len(ids)} partitions; name one (partition "
                                    f"labels {[labels.get(i, i) for i in ids]})")
        return ids[0]
    found = [i for i in ids if labels.get(i, i) == wanted or i == wanted]
    if len(found) != 1:
        raise PaperNumbersError(f"{where}: no partition labelled {wanted!r} (partition labels "
                                f"{[labels.get(i, i) for i in ids]})")
    return found[0]


# --------------------------------------------------------------------------- outputs
def output_name(table_id: str, scale: str) -> str:
    """Name of a paper-vs-ours table: ``table_id``, plus ``_cpu`` at the CPU scale."""
    if scale not in SCALES:
        raise ValueError(f"unknown scale {scale!r}; expected one of {list(SCALES)}")
    return table_id if scale == "paper" else f"{table_id}_{scale}"


def tables_at(cells: Iterable[PaperCell], scale: str,
              experiments: Iterable[str] | None = None) -> dict[str, str]:
    """Output name -> table id of the paper-vs-ours tables at ``scale``.

    A table is built when some row maps to an experiment at ``scale`` (and, with
    ``experiments`` given, one of those experiments is among them).
    """
    known = None if experiments is None else set(experiments)
    out: dict[str, str] = {}
    for cell in cells:
        exp = cell.experiment_at(scale)
        if exp and (known is None or exp in known):
            out.setdefault(output_name(cell.table_id, scale), cell.table_id)
    return out


def table_experiments(cells: Iterable[PaperCell], table_id: str, scale: str) -> list[str]:
    """The experiments a paper-vs-ours table reads at ``scale``, first appearance first."""
    return list(dict.fromkeys(c.experiment_at(scale) for c in cells
                              if c.table_id == table_id and c.experiment_at(scale)))


# --------------------------------------------------------------------------- comparing
def mean_std(values: Sequence[float]) -> tuple[float, float, int]:
    """Mean, sample std (``ddof=1``; NaN for fewer than two values) and count."""
    n = len(values)
    if n == 0:
        return math.nan, math.nan, 0
    mean = math.fsum(values) / n
    if n < 2:
        return mean, math.nan, n
    var = math.fsum((v - mean) ** 2 for v in values) / (n - 1)
    return mean, math.sqrt(var), n


def difference(paper: float | None, mean: float, std: float) -> tuple[float, str]:
    """(ours − paper, whether it is inside our std): ``yes``, ``no`` or ``n/a``.

    ``n/a`` when the paper gives no number, we have no runs, or our std is undefined
    (one run). E.g. paper 74.31, ours 73.00 ± 1.50 gives (−1.31, ``yes``).
    """
    if paper is None or math.isnan(mean):
        return math.nan, "n/a"
    diff = mean - paper
    if math.isnan(std):
        return diff, "n/a"
    return diff, "yes" if abs(diff) <= std else "no"


def compare(cells: Sequence[PaperCell], agg: pd.DataFrame | None, scale: str, table_id: str,
            *, labels: Mapping[str, str] | None = None) -> pd.DataFrame:
    """The rows of paper table ``table_id`` at ``scale`` beside our runs in ``agg``.

    ``agg`` is a concatenation of aggregated run tables (``None``: no runs); ``labels``
    maps partition ids to the display labels the numbers file names. One row per cell
    with an experiment at ``scale``, in file order; columns :data:`RESULT_COLUMNS`.
    A cell whose experiment, partition or method has no runs in ``agg`` is "not run".
    Raises ``ValueError`` for an unknown scale or table.
    """
    import pandas as pd

    if scale not in SCALES:
        raise ValueError(f"paper-vs-ours: unknown scale {scale!r}; expected one of "
                         f"{list(SCALES)}")
    chosen = [c for c in cells if c.table_id == table_id and c.experiment_at(scale)]
    if not chosen:
        raise ValueError(f"paper-vs-ours: no row of table {table_id!r} has an experiment at "
                         f"the {scale} scale")
    labels = dict(labels or {})
    rows = []
    runs_of: list[dict[tuple[int, int], float]] = []
    for cell in chosen:
        experiment = cell.experiment_at(scale)
        base: dict[str, Any] = {
            "id": cell.id, "paper": cell.paper, "table": cell.table, "setting": cell.setting,
            "paper_method": cell.paper_method, "quantity": cell.quantity, "unit": cell.unit,
            "paper_value": math.nan if cell.value is None else cell.value,
            "where": cell.where, "scale": scale, "experiment": experiment,
            "partition": cell.partition_at(scale), "method": cell.method,
            "metric": cell.metric, "scale_note": SCALE_NOTES[scale], "note": cell.note}
        values: list[float] = []
        runs_by_seed: dict[tuple[int, int], float] = {}
        status = ""
        runs = None if agg is None else agg[agg["experiment"] == experiment]
        if runs is None or runs.empty:
            status = "not run (experiment not in this config)" if cell.planned or \
                agg is None else "not run (no runs of the experiment)"
        else:
            ids = sorted(str(p) for p in runs["partition"].unique())
            try:
                pid = _partition_id(labels, ids, cell.partition_at(scale), "")
            except PaperNumbersError:
                pid = None
            mine = runs[(runs["partition"] == pid) & (runs["method"] == cell.method)]
            if pid is None:
                shown = cell.partition_at(scale) or "(the only one)"
                status = f"not run (no partition {shown} in {experiment})"
            elif mine.empty:
                status = f"not run (no runs of {cell.method} in {experiment})"
            else:
                runs_by_seed = per_run(mine, cell.metric)
                values = [v / UNIT_SCALE[cell.unit] for v in runs_by_seed.values()]
        mean, std, n = mean_std(values)
        runs_of.append(runs_by_seed)
        elsewhere = "" if status or runs is None else other_setting(
            cell, scale, {str(d) for d in runs["dataset"].unique()})
        paper = None if elsewhere else cell.value  # no paper number to set ours against
        diff, within = difference(paper, mean, std)
        if not status:
            if cell.value is None:
                status = "the text gives no number"
            elif elsewhere:
                status = f"different setting ({elsewhere}): not compared"
            elif n < 2:
                status = "compared (one run: no std)"
            else:
                status = "compared"
        rows.append({**base, "ours_mean": mean, "ours_std": std, "ours_n": n,
                     "difference": diff, "within_std": within, "status": status})
    frame = pd.DataFrame(rows, columns=list(RESULT_COLUMNS))
    # what the Markdown's note names (not a column: the CSV keeps its columns)
    frame.attrs["equal_rows"] = equal_groups(frame, runs_of)
    return frame


# --------------------------------------------------------------------------- writing
def _md(text: Any) -> str:
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _fmt(value: float, unit: str) -> str:
    if math.isnan(value):
        return "—"
    if unit == "%":
        return f"{value:.2f}"
    return f"{value:.4g}"


def _ours(row: Any) -> str:
    if row.ours_n == 0:
        return "—"
    std = "n/a" if math.isnan(row.ours_std) else _fmt(row.ours_std, row.unit)
    return f"{_fmt(row.ours_mean, row.unit)} ± {std} (n={row.ours_n})"


def write_paper_table(frame: pd.DataFrame, md_path: str | os.PathLike[str],
                      csv_path: str | os.PathLike[str], *, title: str,
                      tuning: Sequence[str] = ()) -> None:
    """Write a :func:`compare` frame as Markdown and CSV, atomically.

    ``tuning``: sentences on our runs' tuned values, one per tuned method
    (:func:`pflrepro.reporting.tuning_note.table_notes`), appended to the note.
    """
    from pflrepro.store.io import write_text

    missing = [c for c in RESULT_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"write_paper_table: the frame lacks column(s) {missing}")
    scales = sorted(set(frame["scale"]))
    given = int(frame["paper_value"].notna().sum())
    inside = int((frame["within_std"] == "yes").sum())
    elsewhere = frame["status"].str.startswith("different setting").any()
    outside = int((frame["within_std"] == "no").sum())
    lines = [f"# {title}", "",
             f"{len(frame)} cells; the text gives a number for {given}; ours inside our std "
             f"of it: {inside}, outside: {outside}. "
             + " ".join(SCALE_NOTES[s][0].upper() + SCALE_NOTES[s][1:] + "." for s in scales),
             "",
             "| setting | paper's method | quantity | paper | ours (mean ± std) | ours − paper "
             "| inside our std? | our cell | status | where in the text | note |",
             "|:--|:--|:--|--:|--:|--:|:--|:--|:--|:--|:--|"]
    for row in frame.itertuples(index=False):
        cell = f"{row.experiment}" + (f" · {row.partition}" if row.partition else "") \
            + f" · {row.method} ({row.metric})"
        diff = "—" if math.isnan(row.difference) else f"{row.difference:+.2f}" \
            if row.unit == "%" else f"{row.difference:+.3g}"
        items = [row.setting, row.paper_method, f"{row.quantity} ({row.unit})",
                 _fmt(row.paper_value, row.unit), _ours(row), diff, row.within_std, cell,
                 row.status, row.where, row.note]
        lines.append("| " + " | ".join(_md(i) for i in items) + " |")
    lines += ["", "Paper: the number the paper's text gives (— where it gives none; the "
              "file config/paper_numbers.csv says where). Ours: mean ± sample std over our "
              "runs (split seeds × training seeds) of the cell, in the paper's unit: "
              "accuracy in percent (weighted_final: final-round accuracy weighted by client "
              "test-set size; mean_bmta: best-over-rounds mean client accuracy, PerFed-CKT's "
              "'highest test accuracy' and FedAMP's BMTA), communication in 1e7 scalars "
              "sent and received per run. Inside our std: |ours − paper| <= our std (n/a "
              "with one run or no paper number)."
              + (" Different setting: our runs are not on the paper's data set and model "
                 "(a CPU-scale design analogue, or another data set), so ours is shown "
                 "but not compared." if elsewhere else "")
              + "".join(f" {_md(' = '.join(group))}: equal in every run ({quantity})."
                        for quantity, group in frame.attrs.get("equal_rows", []))
              + "".join(f" {_md(line)}" for line in tuning), ""]
    write_text(md_path, "\n".join(lines))
    write_text(csv_path, frame[list(RESULT_COLUMNS)].to_csv(index=False, lineterminator="\n"))


def title_of(cells: Sequence[PaperCell], table_id: str, scale: str) -> str:
    """The Markdown title of a paper-vs-ours table, e.g. ``PerFed-CKT Table 1: ...``."""
    first = next((c for c in cells if c.table_id == table_id), None)
    if first is None:
        raise ValueError(f"paper-vs-ours: no row of table {table_id!r}")
    return f"{first.paper} {first.table}: the paper's numbers and ours ({scale} scale)"
