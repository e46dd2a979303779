"""One projection of the paper-scale grid, from every built experiment's measured rates.

Each experiment's cost table (:mod:`pflrepro.reporting.cost`) measures its own jobs;
projecting the paper grid from each of them gave as many different totals for one grid
as there were experiments. Here the measured tables of all experiments are read
together, in the config's order, and each algorithm is priced at the rate of the first
experiment that measured it (the ``rate_from`` column names the method, experiment and
device), so the grid has one projection (:func:`pflrepro.reporting.cost.projection`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

#: The one measured-rate projection of the paper grid (``ext``: md, csv).
COST_PROJECTION = "results/tables/cost-projection.{ext}"

if TYPE_CHECKING:
    import pandas as pd


def combined_rates(experiments: Sequence[str], tables: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """The measured rows of ``tables`` (one per experiment), the first per algorithm.

    ``method`` becomes ``<method> (<experiment>)``: where the rate was measured.
    """
    import pandas as pd

    if len(experiments) != len(tables) or not tables:
        raise ValueError(f"{len(tables)} cost table(s) for {len(experiments)} experiment(s)")
    rows = [t.assign(method=[f"{m} ({e})" for m in t["method"]])
            for e, t in zip(experiments, tables, strict=True)]
    return pd.concat(rows, ignore_index=True).drop_duplicates("algorithm", keep="first")


def projection_job(experiments: Sequence[str], costs: Sequence[str], project: str,
                   scale: str, md: str, csv: str) -> None:
    """``pflrepro cost-projection``: project ``project``'s ``scale`` grid, write MD and CSV."""
    import pandas as pd

    from pflrepro.config import check_config_paths
    from pflrepro.config.schema import build_schema
    from pflrepro.reporting.cost import projection, projection_text
    from pflrepro.store.io import write_csv, write_text

    rates = combined_rates(experiments, [pd.read_csv(c) for c in costs])
    projected = projection(rates, check_config_paths([project], build_schema()), scale=scale)
    head = ["# Compute cost of the paper-scale grid, projected", "",
            f"From the measured cost tables of {', '.join(experiments)} (each algorithm at "
            "the rate of the first of them that trained it; the CSV's rate_from column).", ""]
    write_text(md, "\n".join(head + projection_text(projected, rates)) + "\n")
    write_csv(projected, csv)
