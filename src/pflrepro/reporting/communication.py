"""Communication cost per method: what its clients sent and received, beside its accuracy.

Reads the ``comm_up`` / ``comm_down`` rows every run logs (:mod:`pflrepro.training.communication`:
scalars per client and round, up = sent, down = received) and sums them per run:
``total`` = Σ over clients and rounds (round 0 included: what initialisation
exchanged) of up + down, the number PerFed-CKT's tables call "communicated
parameters". Per (method, partition) the table gives the mean over runs of that total,
of the mean scalars per client and round each way, and of the final weighted test
accuracy, with the number of runs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import pandas as pd

from pflrepro.reporting.accuracy import RUN_KEYS, final_accuracy
from pflrepro.reporting.names import method_name
from pflrepro.reporting.ordering import order_values
from pflrepro.store.io import write_csv, write_text
from pflrepro.store.results import COMM_DOWN, COMM_UP

#: Columns of :func:`communication_table`.
COLUMNS = ("method", "partition", "runs", "accuracy", "up_per_client_round",
           "down_per_client_round", "total")


def per_run_traffic(agg: pd.DataFrame) -> pd.DataFrame:
    """One row per run: its config columns and its traffic.

    ``total`` sums up and down over clients and rounds; ``up_per_client_round`` and
    ``down_per_client_round`` are means over clients and rounds >= 1. Raises
    ``ValueError`` when some run logged no traffic (a run table written before traffic
    was counted: rerun it).
    """
    keys = list(RUN_KEYS)
    rows = agg[agg["metric"].isin([COMM_UP, COMM_DOWN])]
    runs = agg[keys].drop_duplicates()
    if rows.empty:
        raise ValueError("communication: the aggregate has no comm_up/comm_down rows; its "
                         "runs predate traffic counting: rerun them")
    total = rows.groupby(keys, dropna=False, sort=False)["value"].sum().rename("total")
    later = rows[rows["round"] >= 1]
    mean = (later.groupby([*keys, "metric"], dropna=False, sort=False)["value"].mean()
            .unstack("metric"))
    mean = mean.rename(columns={COMM_UP: "up_per_client_round",
                                COMM_DOWN: "down_per_client_round"})
    out = runs.merge(total.reset_index(), on=keys, how="left").merge(
        mean.reset_index(), on=keys, how="left")
    lacking = out[out["total"].isna()]
    if not lacking.empty:
        row = lacking.iloc[0]
        raise ValueError(f"communication: run {row['method']} / {row['partition']} (split "
                         f"{row['split_seed']}, seed {row['train_seed']}) logged no traffic; "
                         "rerun it")
    return out.fillna({"up_per_client_round": 0.0, "down_per_client_round": 0.0})


def communication_table(agg: pd.DataFrame,
                        methods_order: Sequence[str] | None = None) -> pd.DataFrame:
    """Per (method, partition): runs, mean final weighted accuracy (%) and mean traffic."""
    traffic = per_run_traffic(agg)
    acc = final_accuracy(agg).rename(columns={"weighted_accuracy": "accuracy"})
    keys = list(RUN_KEYS)
    runs = traffic.merge(acc[[*keys, "accuracy"]], on=keys, how="left")
    runs["accuracy"] = runs["accuracy"] * 100.0
    table = (runs.groupby(["method", "partition"], sort=False)
             .agg(runs=("total", "size"), accuracy=("accuracy", "mean"),
                  up_per_client_round=("up_per_client_round", "mean"),
                  down_per_client_round=("down_per_client_round", "mean"),
                  total=("total", "mean"))
             .reset_index())
    methods = order_values(table["method"], methods_order, "communication_table methods")
    table["method"] = pd.Categorical(table["method"], categories=methods, ordered=True)
    table = table.sort_values(["method", "partition"], kind="stable")
    table["method"] = table["method"].astype(str)
    return table[list(COLUMNS)].reset_index(drop=True)


def _sci(value: float) -> str:
    """Scalars in the papers' style: ``5.2e+07`` (``0`` for none)."""
    return "0" if value == 0 else f"{value:.2e}"


def write_communication(table: pd.DataFrame, md_path: str | os.PathLike[str],
                        csv_path: str | os.PathLike[str], caption: str,
                        labels: Mapping[str, str] | None = None,
                        tuning: Sequence[str] = ()) -> None:
    """Write :func:`communication_table` as Markdown and CSV (atomically).

    ``labels`` (partition id -> shown label) name the partitions in the Markdown, and
    methods show by their papers' names (:mod:`pflrepro.reporting.names`); the CSV
    keeps the ids. ``tuning``: sentences appended to the note, one per tuned method
    (:func:`pflrepro.reporting.tuning_note.table_notes`).
    """
    labels = labels or {}
    lines = [f"Table: {caption}", "",
             "| method | partition | runs | accuracy (%) | up / client / round | "
             "down / client / round | total per run |",
             "|:--|:--|--:|--:|--:|--:|--:|"]
    for row in table.itertuples(index=False):
        shown = labels.get(str(row.partition), str(row.partition))
        lines.append(f"| {method_name(row.method)} | {shown} | {row.runs} | {row.accuracy:.1f} | "
                     f"{_sci(row.up_per_client_round)} | {_sci(row.down_per_client_round)} | "
                     f"{_sci(row.total)} |")
    lines += ["", "Scalars (parameters, logits, losses, control variates) a client sent (up) "
              "and received (down), mean per client and round; total per run = sum over "
              "clients and rounds of both, initialisation included; accuracy = final test "
              "accuracy weighted by client test-set size; means over the runs."
              + "".join(f" {line}" for line in tuning)]
    write_text(md_path, "\n".join(lines) + "\n")
    write_csv(table, csv_path)
