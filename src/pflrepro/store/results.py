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

Aggregation concatenates run tables (:func:`aggregate`); reporting reads only
aggregated tables.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from pflrepro import __version__

if TYPE_CHECKING:  # imported where used: the CLI and the workflow parse need no pandas
    import pandas as pd
    import pyarrow as pa

#: Config columns, in order, that every run table carries.
CONFIG_COLUMNS = (
    "experiment", "dataset", "partition", "method", "algorithm", "params",
    "split_seed", "train_seed", "client_training", "package_version", "git_revision",
)
VALUE_COLUMNS = ("round", "client", "peer", "metric", "value")
#: String columns: one value per run (config) or a handful (metric names).
STRING_COLUMNS = ("metric",) + tuple(c for c in CONFIG_COLUMNS if not c.endswith("_seed"))

# Metric names used across the package (one place, so reporting and algorithms agree).
TEST_ACCURACY = "test_accuracy"
TEST_LOSS = "test_loss"
TRAIN_LOSS = "train_loss"
N_TRAIN = "n_train"
N_TEST = "n_test"
GROUP = "group"
#: A client's architecture (index into ``training.architectures``) and its model's
#: scalar count, round 0, logged only when clients run different architectures.
ARCHITECTURE = "architecture"
MODEL_SIZE = "model_size"
WEIGHT = "weight"
#: Each client's cluster (Clustered FL) or chosen hypothesis (HypCluster) id per round.
CLUSTER = "cluster"
#: Mean squared per-parameter distance ‖w_i − w_j‖²/P between two clients' models.
MODEL_DISTANCE = "model_distance"
#: One row (client -1) in a run that diverged: the round its losses became non-finite.
DIVERGED = "diverged"
#: Scalars a client sent (up) and received (down) in a round
#: (:mod:`pflrepro.training.communication`).
COMM_UP = "comm_up"
COMM_DOWN = "comm_down"
#: FedMix: each client's mean gate over its test inputs (client s, peer = expert k).
GATE_MASS = "gate_mass"
#: FedMix: the global q(z = k | y = c) (the ``client`` column holds the class c, ``peer``
#: the expert k).
EXPERT_POSTERIOR = "expert_posterior"


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
        import pandas as pd

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


def aggregate(paths: Sequence[str | os.PathLike[str]], out: str | os.PathLike[str]) -> int:
    """Concatenate run (or aggregate) tables, in the order given, into ``out``; rows written.

    The string columns hold a few distinct values each, so they are read as
    dictionaries (no string per row is built), their dictionaries unified, and
    written dictionary-encoded as they came. The Arrow schema is not stored, so
    readers see the columns' Parquet types (strings, not dictionaries); the inputs'
    pandas metadata is, so ``pandas.read_parquet`` gives the run tables' dtypes.
    Files are read in parallel (Arrow's CPU count), each checked against its digest
    record and what it says it is first (:func:`pflrepro.store.io.read_verified`): damaged
    inputs are marked, so that Snakemake rebuilds them, and one :class:`ValueError`
    names every one. The output is written atomically, with its digest record, and
    says what it is in its :data:`pflrepro.store.io.KIND_KEY` metadata: the aggregate of one
    method's runs (``method_aggregate``, with its experiment and method), of one
    experiment's method aggregates (``experiment_aggregate``), else ``aggregate``.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pflrepro.store.io import (
        KIND_KEY,
        TABLE_KINDS,
        CorruptFileError,
        atomic_digested_path,
        read_verified,
        stored_identity,
    )

    if not paths:
        raise ValueError("aggregate: no input files")

    def parse(path: Path) -> pa.Table:
        with pq.ParquetFile(path, read_dictionary=STRING_COLUMNS) as file:
            return file.read(use_threads=False)

    def read(path: str | os.PathLike[str]) -> pa.Table | CorruptFileError:
        try:
            return read_verified(path, parse, kinds=TABLE_KINDS)
        except CorruptFileError as err:  # reported with the others once all are read
            return err

    with ThreadPoolExecutor(max_workers=max(1, min(pa.cpu_count(), len(paths)))) as pool:
        read_back = list(pool.map(read, paths))
    damaged = [str(r) for r in read_back if isinstance(r, CorruptFileError)]
    if damaged:
        raise ValueError(f"{len(damaged)} of {len(paths)} input(s) damaged:\n  "
                         + "\n  ".join(damaged))
    tables = [t for t in read_back if not isinstance(t, CorruptFileError)]
    table = pa.concat_tables(tables).unify_dictionaries()
    kind = _aggregate_kind([stored_identity(p)["kind"] for p in paths], table)
    metadata = {k: v for k, v in (table.schema.metadata or {}).items() if k != KIND_KEY}
    metadata[KIND_KEY] = json.dumps(kind, sort_keys=True).encode()
    with atomic_digested_path(out) as tmp:
        # Dictionary pages for the strings and the small integers, not for ``value``;
        # min/max statistics for the integers only (strings' cost more than they help).
        ints = [f.name for f in table.schema if pa.types.is_integer(f.type)]
        strings = [c for c in STRING_COLUMNS if c in table.column_names]
        with pq.ParquetWriter(tmp, table.schema, store_schema=False,
                              use_dictionary=strings + ints, write_statistics=ints) as writer:
            writer.write_table(table)
            # pandas metadata (pandas reads the dtypes it wrote) and what the file is
            writer.add_key_value_metadata(metadata)
    return table.num_rows


def _aggregate_kind(input_kinds: Sequence[str], table: pa.Table) -> dict[str, str]:
    """What an aggregate of inputs of ``input_kinds`` with rows ``table`` is."""
    def single(column: str) -> str | None:
        values = table.column(column).unique().to_pylist() if column in table.column_names \
            else []
        return str(values[0]) if len(values) == 1 else None

    experiment, method = single("experiment"), single("method")
    if set(input_kinds) == {"run"} and experiment is not None and method is not None:
        return {"kind": "method_aggregate", "experiment": experiment, "method": method}
    if set(input_kinds) == {"method_aggregate"} and experiment is not None:
        return {"kind": "experiment_aggregate", "experiment": experiment}
    return {"kind": "aggregate"}


def read_table(path: str | os.PathLike[str],
               columns: Sequence[str] | None = None) -> pd.DataFrame:
    """A run or aggregate table as written, checked against its digest record first.

    It must be a run or an aggregate, and under ``results/`` the one its path says. A
    damaged file is marked for rebuilding and :class:`pflrepro.store.io.CorruptFileError`
    names it (:func:`pflrepro.store.io.read_verified`).
    """
    import pandas as pd

    from pflrepro.store.io import TABLE_KINDS, read_verified

    return read_verified(path, lambda p: pd.read_parquet(p, columns=columns),
                         kinds=TABLE_KINDS)


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
