"""The long-format results table written by every training run.

One row per (round, client, peer, metric):

===============  =======  ====================================================
column           dtype    meaning
===============  =======  ====================================================
round            int32    round after which the value was measured (0 = before
                          training; static facts such as sizes use round 0)
client           int32    client id, ``-1`` for values that belong to no client
peer             int32    second client/component for pairwise values (weights
                          ``w_ij``: client ``i``, peer ``j``), else ``-1``
metric           string   e.g. ``test_accuracy``, ``test_loss``, ``n_test``,
                          ``n_train``, ``group``, ``train_loss``, ``weight``
value            float64
experiment ...   string   config columns (see :data:`CONFIG_COLUMNS`), constant
                          within a run
===============  =======  ====================================================

Aggregation concatenates run tables; reporting reads only aggregated tables.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pflrepro import __version__

#: Config columns, in order, that every run table carries.
CONFIG_COLUMNS = (
    "experiment", "dataset", "partition", "method", "algorithm", "params",
    "split_seed", "train_seed", "package_version", "git_revision",
)
VALUE_COLUMNS = ("round", "client", "peer", "metric", "value")

# Metric names used across the package (one place, so reporting and algorithms agree).
TEST_ACCURACY = "test_accuracy"
TEST_LOSS = "test_loss"
TRAIN_LOSS = "train_loss"
N_TRAIN = "n_train"
N_TEST = "n_test"
GROUP = "group"
WEIGHT = "weight"


@dataclass
class MetricLog:
    """Collects rows in column lists (cheap appends, one DataFrame at the end)."""

    rounds: list[int] = field(default_factory=list)
    clients: list[int] = field(default_factory=list)
    peers: list[int] = field(default_factory=list)
    metrics: list[str] = field(default_factory=list)
    values: list[float] = field(default_factory=list)

    def add(self, round_: int, client: int, metric: str, value: float, peer: int = -1) -> None:
        """Append one row."""
        self.rounds.append(int(round_))
        self.clients.append(int(client))
        self.peers.append(int(peer))
        self.metrics.append(metric)
        self.values.append(float(value))

    def add_per_client(self, round_: int, metric: str, values: Iterable[float]) -> None:
        """Append one row per client, client ``k`` taking ``values[k]``."""
        for client, value in enumerate(values):
            self.add(round_, client, metric, value)

    def add_matrix(self, round_: int, metric: str, matrix: np.ndarray) -> None:
        """Append one row per entry ``(i, j)`` of a client × peer matrix."""
        for i, row in enumerate(np.asarray(matrix, dtype=np.float64)):
            for j, value in enumerate(row):
                self.add(round_, i, metric, value, peer=j)

    def __len__(self) -> int:
        return len(self.values)

    def to_frame(self, config: Mapping[str, Any]) -> pd.DataFrame:
        """Return the run table, config columns appended (missing ones raise)."""
        missing = [c for c in CONFIG_COLUMNS if c not in config]
        if missing:
            raise KeyError(f"config columns missing: {missing}")
        frame = pd.DataFrame({
            "round": np.asarray(self.rounds, dtype=np.int32),
            "client": np.asarray(self.clients, dtype=np.int32),
            "peer": np.asarray(self.peers, dtype=np.int32),
            "metric": pd.array(self.metrics, dtype="string"),
            "value": np.asarray(self.values, dtype=np.float64),
        })
        for col in CONFIG_COLUMNS:
            value = config[col]
            if col in ("split_seed", "train_seed"):
                frame[col] = np.int64(value)
            else:
                frame[col] = pd.array([str(value)] * len(frame), dtype="string")
        return frame


def git_revision(path: str | Path | None = None) -> str:
    """The git commit of the code that ran (``+dirty`` with uncommitted changes).

    Looks at ``path`` if given, else at this package's source directory (an editable
    install lives in the repository), then at the working directory (Snakemake runs
    jobs in the workflow's directory); ``unknown`` when none is in a git checkout.
    """
    candidates = [Path(path)] if path is not None else [Path(__file__).resolve().parent,
                                                       Path.cwd()]
    for where in candidates:
        rev = _git_revision_at(where)
        if rev != "unknown":
            return rev
    return "unknown"


def _git_revision_at(where: Path) -> str:
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=where, capture_output=True,
                             text=True, check=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=where, capture_output=True, text=True, check=True,
                               timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return rev + ("+dirty" if dirty else "")


def package_version() -> str:
    """The installed version of this package."""
    return __version__
