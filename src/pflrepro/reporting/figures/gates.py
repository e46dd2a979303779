"""FedMix's gates: each client's mean p(z = k | x, θ_s) over its test inputs, per partition.

FedMix (:mod:`pflrepro.algorithms.fedmix`) logs, every round, each client's gate
averaged over its test inputs (``gate_mass`` rows: client s, peer = expert k). The
figure is a clients × experts heatmap of the final round of the run with the lowest
split seed (then train seed) of each partition, clients sorted by their distribution
(rotation angle, label permutation), so experts that specialise by group show as
blocks. :func:`gate_mass_by_group` gives the same numbers per group, over every run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from pflrepro.reporting.figures.common import PathLike, run_groups
from pflrepro.config.figure_kinds import FigureKind
from pflrepro.reporting.figures.weights import (
    WeightPanel,
    plot_client_weights,
    weight_panels,
)
from pflrepro.reporting.accuracy import RUN_KEYS, check_aggregate
from pflrepro.store.results import GATE_MASS

KIND = FigureKind(
    name="gates", file="gates-{method}", draw="plot_gate_mass",
    caption="FedMix gates of {method}: each client's weights on the experts.",
    label="gates: {method}", input="method", options=("method",), records=GATE_MASS,
    entry="weights")



def gate_panels(agg: pd.DataFrame, method: str = "fedmix",
                partitions_order: Sequence[str] | None = None) -> list[WeightPanel]:
    """The final-round clients × experts gate masses of the first run of each partition.

    Rows are clients sorted by (group, id) when every client's group is known; columns
    are experts. Raises ``ValueError`` naming ``method`` when it logged no gate masses.
    """
    return weight_panels(agg, method, GATE_MASS, peers_are_clients=False,
                         partitions_order=partitions_order)


def plot_gate_mass(agg: pd.DataFrame, pdf: PathLike, png: PathLike, method: str = "fedmix",
                   *, partitions_order: Sequence[str] | None = None,
                   labels: Mapping[str, str] | None = None) -> None:
    """Heatmaps of every client's mean gate per expert (final round), one per partition.

    Drawn as the weight heatmaps (:func:`~.weights.plot_client_weights`): a strip
    colours each client by its distribution, clients of one distribution are
    contiguous and outlined, colours on a fixed [0, 1] scale.
    """
    plot_client_weights(agg, pdf, png, method, GATE_MASS, peers_are_clients=False,
                        partitions_order=partitions_order, peer_label="expert $k$",
                        labels=labels,
                        value_label="mean gate $p(z = k \\mid x, \\theta_s)$ on test inputs")


def gate_mass_by_group(agg: pd.DataFrame, method: str = "fedmix") -> pd.DataFrame:
    """Mean final-round gate mass per (partition, group, expert), over clients and runs.

    Returns columns ``partition``, ``group``, ``expert``, ``mass`` (the mean over the
    group's clients of each run, then over runs) and ``runs``. Clients without a group
    row count as group ``-1``. Raises ``ValueError`` when ``method`` logged no gate masses.
    """
    what = "gate_mass_by_group"
    check_aggregate(agg, (), what)
    rows = agg[(agg["method"] == method) & (agg["metric"] == GATE_MASS)
               & (agg["client"] >= 0) & (agg["peer"] >= 0)]
    if rows.empty:
        raise ValueError(f"{what}: no {GATE_MASS!r} rows for method {method!r}")
    keys = list(RUN_KEYS)
    last = rows.groupby(keys, observed=True)["round"].transform("max")
    final = rows[rows["round"] == last]
    groups = run_groups(agg[agg["method"] == method])
    final = final.merge(groups, on=[*keys, "client"], how="left")
    final["group"] = final["group"].fillna(-1).astype(int)
    per_run = (final.groupby([*keys, "group", "peer"], observed=True)["value"].mean()
               .reset_index())
    out = (per_run.groupby(["partition", "group", "peer"], observed=True)
           .agg(mass=("value", "mean"), runs=("value", "size")).reset_index()
           .rename(columns={"peer": "expert"}))
    out["partition"] = out["partition"].astype(str)
    return out.sort_values(["partition", "group", "expert"], ignore_index=True)
