"""The aggregate as the checks read it: per-run accuracies, weights, gates and traffic.

:class:`Data` restricts an aggregate to the design (the runs a claim's config asks
for), splits it by experiment and caches what the checks read: per-cell accuracy by
seed pair, per-run matrices of a recorded metric (:class:`WeightRun`) and per-run
traffic totals.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pflrepro.reporting.claims.parse import ACCURACY_METRICS, Design

if TYPE_CHECKING:  # imported where used, as the rest of the reporting code
    import numpy as np
    import pandas as pd


@dataclass
class WeightRun:
    """The weight rows of one run as a (rounds × clients × peers) array."""

    rounds: np.ndarray
    clients: np.ndarray
    peers: np.ndarray
    values: np.ndarray
    #: client id -> distribution id (``-1``: none).
    groups: dict[int, int]

    @property
    def final(self) -> np.ndarray:
        """The matrix of the last recorded round."""
        return self.values[-1]


#: A cell's per-run values: (split seed, training seed) -> value.
Runs = dict[tuple[int, int], Any]


@dataclass
class Data:
    """The aggregate, restricted to the design and split by experiment (cached)."""

    agg: pd.DataFrame | None
    design: Mapping[str, Design]
    labels: Mapping[str, str] = field(default_factory=dict)
    experiment_labels: Mapping[str, str] = field(default_factory=dict)
    _frames: dict[str, pd.DataFrame | None] = field(default_factory=dict)
    _cells: dict[tuple[Any, ...], dict[tuple[str, str], Runs]] = field(default_factory=dict)
    _groups: dict[str, dict[tuple[Any, ...], dict[int, int]]] = field(default_factory=dict)
    _weights: dict[tuple[str, str, str],
                   dict[str, dict[tuple[int, int], WeightRun]] | str] = field(
        default_factory=dict)
    _traffic: dict[str, dict[tuple[str, str], Runs]] = field(default_factory=dict)
    _rows: dict[str, dict[str, float]] = field(default_factory=dict)

    def frame(self, experiment: str) -> pd.DataFrame | None:
        """The rows of ``experiment``'s designed runs, or ``None`` when it has none.

        Runs outside the design (another partition, method or seed pair) are left out:
        a claim reads the runs its config asks for, no others.
        """
        import pandas as pd

        if experiment not in self._frames:
            rows = None
            design = self.design.get(experiment)
            if design is not None and self.agg is not None and not self.agg.empty:
                rows = self.agg[self.agg["experiment"] == experiment]
                wanted = set(design.seeds)
                seeded = [(int(a), int(b)) in wanted for a, b in
                          zip(rows["split_seed"], rows["train_seed"], strict=True)]
                keep = (rows["partition"].astype(str).isin(design.partitions)
                        & rows["method"].astype(str).isin(design.methods)
                        & pd.Series(seeded, index=rows.index, dtype=bool))
                rows = rows[keep]
                rows = None if rows.empty else rows.reset_index(drop=True)
            self._frames[experiment] = rows
        return self._frames[experiment]

    def seeds(self, experiment: str) -> tuple[tuple[int, int], ...]:
        """The designed (split seed, training seed) pairs of ``experiment``."""
        return self.design[experiment].seeds

    def run_groups(self, experiment: str) -> dict[tuple[Any, ...], dict[int, int]]:
        """Per run (a tuple of the run keys): client id -> distribution id."""
        from pflrepro.reporting.accuracy import RUN_KEYS
        from pflrepro.store.results import GROUP

        if experiment not in self._groups:
            frame = self.frame(experiment)
            out: dict[tuple[Any, ...], dict[int, int]] = {}
            if frame is not None:
                rows = frame[(frame["metric"] == GROUP) & (frame["client"] >= 0)
                             & (frame["peer"] < 0)]
                for key, run in rows.groupby(list(RUN_KEYS), sort=True, dropna=False):
                    out[tuple(key)] = {int(c): int(g) for c, g in
                                       zip(run["client"], run["value"], strict=True)}
            self._groups[experiment] = out
        return self._groups[experiment]

    def groups_of(self, experiment: str, method: str, partition: str,
                  seed: tuple[int, int]) -> dict[int, int]:
        """Client id -> distribution id of one run ({} when it has none)."""
        from pflrepro.reporting.accuracy import RUN_KEYS

        at = [RUN_KEYS.index(k) for k in ("method", "partition", "split_seed", "train_seed")]
        want = (method, partition, *seed)
        for key, groups in self.run_groups(experiment).items():
            if (str(key[at[0]]), str(key[at[1]]), int(key[at[2]]), int(key[at[3]])) == want:
                return groups
        return {}

    def distributions(self, experiment: str, partition: str) -> int:
        """Distinct non-negative group ids of a column's runs (the most over its runs)."""
        from pflrepro.reporting.accuracy import RUN_KEYS

        at = RUN_KEYS.index("partition")
        counts = [len({g for g in groups.values() if g >= 0})
                  for key, groups in self.run_groups(experiment).items()
                  if str(key[at]) == partition]
        return max(counts, default=0)

    def label(self, experiment: str, partition: str, several: bool) -> str:
        """Display label of a column (with its experiment's when a row spans several)."""
        text = self.labels.get(partition, partition)
        if several:
            text = f"{self.experiment_labels.get(experiment, experiment)} · {text}"
        return text

    def test_row(self, experiment: str, partition: str) -> float | None:
        """One test row of a column, in percentage points: 100 / the column's test rows.

        A run's test rows at a round are its evaluated clients' ``n_test`` summed (the
        ``n_test`` of :func:`pflrepro.reporting.accuracy.weighted_accuracy_per_round`);
        the column's are the fewest over its runs and rounds, so this is the coarsest
        step of an accuracy in the column. ``None`` without accuracy rows.
        """
        from pflrepro.reporting.accuracy import weighted_accuracy_per_round

        if experiment not in self._rows:
            frame = self.frame(experiment)
            sizes: dict[str, float] = {}
            if frame is not None:
                try:
                    per_round = weighted_accuracy_per_round(frame)
                except ValueError:  # no accuracy rows: the checks say so
                    per_round = None
                if per_round is not None:
                    least = per_round.groupby("partition", sort=True)["n_test"].min()
                    sizes = {str(p): float(n) for p, n in least.items() if n > 0}
            self._rows[experiment] = sizes
        rows = self._rows[experiment].get(partition)
        return None if rows is None else 100.0 / rows

    def accuracy_runs(self, experiment: str, partition: str, method: str, metric: str,
                      round_fraction: float | None) -> Runs:
        """A cell's per-run accuracy (percent) by seed pair; empty without runs."""
        key = (experiment, metric, round_fraction)
        if key not in self._cells:
            self._cells[key] = self._accuracy_cells(experiment, metric, round_fraction)
        return self._cells[key].get((method, partition), {})

    def _accuracy_cells(self, experiment: str, metric: str,
                        round_fraction: float | None) -> dict[tuple[str, str], Runs]:
        from pflrepro.reporting.accuracy import (
            RUN_KEYS,
            run_accuracies,
            weighted_accuracy_per_round,
        )
        from pflrepro.reporting.tables import accuracy_table

        frame = self.frame(experiment)
        if frame is None:
            return {}
        spec = ACCURACY_METRICS[metric]
        if spec is not None:  # the per-run numbers whose means are the table's cells
            table_metric, name = spec
            accuracy_table(frame, metric=table_metric, columns=("partition",))  # its checks
            runs = run_accuracies(frame, table_metric)
            values = runs[name]
        else:
            per_round = weighted_accuracy_per_round(frame)
            keys = list(RUN_KEYS)
            last = per_round.groupby(keys, dropna=False, sort=False)["round"].transform("max")
            due = per_round[per_round["round"] >= last * float(round_fraction or 0.0)]
            runs = due.sort_values("round").groupby(keys, dropna=False, sort=False).head(1)
            values = runs["weighted_accuracy"]
        out: dict[tuple[str, str], Runs] = {}
        for m, p, s, t, v in zip(runs["method"], runs["partition"], runs["split_seed"],
                                 runs["train_seed"], values, strict=True):
            out.setdefault((str(m), str(p)), {})[(int(s), int(t))] = float(v) * 100.0
        return out

    def traffic_runs(self, experiment: str, partition: str, method: str) -> Runs:
        """A cell's per-run total of scalars sent and received, by seed pair.

        The total is up + down over every client and round; a run that logged no
        traffic is absent from the result (so its cell is missing).
        """
        from pflrepro.reporting.accuracy import RUN_KEYS
        from pflrepro.store.results import COMM_DOWN, COMM_UP

        if experiment not in self._traffic:
            out: dict[tuple[str, str], Runs] = {}
            frame = self.frame(experiment)
            if frame is not None:
                rows = frame[frame["metric"].isin([COMM_UP, COMM_DOWN])]
                at = {k: RUN_KEYS.index(k)
                      for k in ("method", "partition", "split_seed", "train_seed")}
                for key, total in rows.groupby(list(RUN_KEYS), sort=True,
                                               dropna=False)["value"].sum().items():
                    cell = (str(key[at["method"]]), str(key[at["partition"]]))
                    seed = (int(key[at["split_seed"]]), int(key[at["train_seed"]]))
                    out.setdefault(cell, {})[seed] = float(total)
            self._traffic[experiment] = out
        return self._traffic[experiment].get((method, partition), {})

    def final_client_values(self, experiment: str, method: str, metric: str,
                            ) -> dict[str, dict[tuple[int, int], dict[int, float]]] | str:
        """Per partition and seed pair, ``method``'s per-client ``metric`` at its last round.

        Per-client rows (``peer < 0``), e.g. Clustered FL's ``cluster`` ids; the values
        of the last round the run recorded that metric in, client id -> value. A reason
        (text) when there are none.
        """
        from pflrepro.reporting.accuracy import RUN_KEYS

        frame = self.frame(experiment)
        if frame is None:
            return f"no results for {experiment}"
        rows = frame[(frame["method"] == method) & (frame["metric"] == metric)
                     & (frame["client"] >= 0) & (frame["peer"] < 0)]
        if rows.empty:
            return f"no {metric} rows of {method}"
        at = {k: RUN_KEYS.index(k) for k in ("partition", "split_seed", "train_seed")}
        out: dict[str, dict[tuple[int, int], dict[int, float]]] = {}
        for key, run in rows.groupby(list(RUN_KEYS), sort=True, dropna=False):
            last = run[run["round"] == run["round"].max()]
            seed = (int(key[at["split_seed"]]), int(key[at["train_seed"]]))
            out.setdefault(str(key[at["partition"]]), {})[seed] = {
                int(c): float(v) for c, v in zip(last["client"], last["value"], strict=True)}
        return out

    def weight_runs(self, experiment: str, method: str, metric: str | None = None,
                    ) -> dict[str, dict[tuple[int, int], WeightRun]] | str:
        """Per partition and seed pair, ``method``'s matrices of ``metric``; or a reason.

        ``metric``: the client weights (``weight``, the default) or FedMix's
        ``gate_mass`` (client x expert), one matrix per round.
        """
        from pflrepro.store.results import WEIGHT

        key = (experiment, method, metric or WEIGHT)
        if key not in self._weights:
            self._weights[key] = self._weight_runs(experiment, method, metric or WEIGHT)
        return self._weights[key]

    def _weight_runs(self, experiment: str, method: str,
                     metric: str) -> dict[str, dict[tuple[int, int], WeightRun]] | str:
        import numpy as np

        from pflrepro.reporting.accuracy import RUN_KEYS

        frame = self.frame(experiment)
        if frame is None:
            return f"no results for {experiment}"
        rows = frame[(frame["method"] == method) & (frame["metric"] == metric)
                     & (frame["client"] >= 0) & (frame["peer"] >= 0)]
        if rows.empty:
            return f"no {metric} rows of {method}"
        groups = self.run_groups(experiment)
        out: dict[str, dict[tuple[int, int], WeightRun]] = {}
        at = {k: RUN_KEYS.index(k) for k in ("partition", "split_seed", "train_seed")}
        for key, run in rows.groupby(list(RUN_KEYS), sort=True, dropna=False):
            rounds, r_at = np.unique(run["round"].to_numpy(), return_inverse=True)
            clients, c_at = np.unique(run["client"].to_numpy(), return_inverse=True)
            peers, p_at = np.unique(run["peer"].to_numpy(), return_inverse=True)
            values = np.full((len(rounds), len(clients), len(peers)), np.nan)
            values[r_at, c_at, p_at] = run["value"].to_numpy(dtype=float)
            if len(run) != values.size or np.isnan(values).any():
                raise ValueError(f"claims: the weight rows of {method} in a run of "
                                 f"{experiment} are not one full matrix per round "
                                 "(duplicates or gaps)")
            seed = (int(key[at["split_seed"]]), int(key[at["train_seed"]]))
            out.setdefault(str(key[at["partition"]]), {})[seed] = WeightRun(
                rounds=rounds, clients=clients, peers=peers, values=values,
                groups=groups.get(tuple(key), {}))
        return out

