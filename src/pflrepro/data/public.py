"""A public unlabeled set for distillation, drawn once per split seed.

PerFed-CKT (Cho et al., clustered knowledge transfer) co-distills clients on a
small public data set whose labels are never used: "2000 unlabeled data-samples
per experiment that are sampled uniformly at random from CIFAR100", while the
clients hold CIFAR-10. :func:`public_split` draws such a set as rows of a prepared
data set: ``size`` rows uniformly without replacement, seeded by the split seed,
and disjoint from ``exclude`` (the rows clients hold, when the public set comes
from the clients' own data set; nothing when it comes from another one, as in
PerFed-CKT).

On disk it is a one-column Parquet table (``index``, ``int64``, sorted) whose
metadata records the data set, seed and size (:func:`write_public`,
:func:`read_public`). Only row numbers are stored: labels are withheld by the
consumer, which must read ``x`` alone for these rows.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from pflrepro.seeding import NO_CLIENT, SETUP_ROUND, numpy_generator
from pflrepro.store.io import PUBLIC_KEY, atomic_digested_path, read_verified

METADATA_KEY = PUBLIC_KEY


def public_split(labels_or_size: int | np.ndarray, size: int, seed: int,
                 exclude: np.ndarray | None = None) -> np.ndarray:
    """Return ``size`` sorted rows of ``range(N)``, none in ``exclude``, drawn by ``seed``.

    ``labels_or_size`` is the data set's size ``N`` or its label vector (only its
    length is used). The rows are a uniform sample without replacement of the rows
    not excluded; the draw depends only on ``N``, ``exclude``, ``size`` and ``seed``.
    Raises :class:`ValueError` when ``size < 1``, when ``exclude`` holds a row outside
    ``0 .. N-1`` or when fewer than ``size`` rows are left.
    """
    n = _length(labels_or_size)
    if isinstance(size, bool) or int(size) != size or size < 1:
        raise ValueError(f"public set size must be an integer >= 1, got {size!r}")
    excluded = np.zeros(n, dtype=bool)
    if exclude is not None:
        rows = np.asarray(exclude).reshape(-1)
        if rows.size and not np.issubdtype(rows.dtype, np.integer):
            raise ValueError(f"exclude must hold row numbers (integers), got {rows.dtype}")
        if rows.size and not 0 <= rows.min() <= rows.max() < n:
            raise ValueError(f"exclude holds rows outside 0..{n - 1}")
        excluded[rows] = True
    pool = np.flatnonzero(~excluded)
    if size > len(pool):
        raise ValueError(f"public set of {size} samples requested, but only {len(pool)} of "
                         f"{n} rows are not excluded")
    rng = numpy_generator(seed, SETUP_ROUND, NO_CLIENT, "public")
    return np.sort(rng.choice(pool, size=int(size), replace=False)).astype(np.int64)


def write_public(indices: np.ndarray, path: str, *, dataset: str, seed: int) -> None:
    """Write public-set rows atomically as a one-column Parquet table with metadata."""
    indices = np.asarray(indices, dtype=np.int64)
    table = pa.table({"index": pa.array(indices, type=pa.int64())})
    meta = {"dataset": dataset, "seed": int(seed), "size": int(len(indices))}
    table = table.replace_schema_metadata({METADATA_KEY: json.dumps(meta).encode()})
    with atomic_digested_path(path) as tmp:
        pq.write_table(table, tmp)


def read_public(path: str) -> tuple[np.ndarray, dict[str, Any]]:
    """Read the rows and the metadata :func:`write_public` stored.

    Checked against the file's digest record and what it says it is (a public set,
    and under ``results/public/`` the one of its path) first; a damaged file is marked
    for rebuilding and :class:`pflrepro.store.io.CorruptFileError` names it
    (:func:`pflrepro.store.io.read_verified`).
    """
    table = read_verified(path, pq.read_table, kinds=("public",))
    meta = json.loads((table.schema.metadata or {}).get(METADATA_KEY, b"{}"))
    if table.column_names != ["index"]:
        raise ValueError(f"{path}: expected one column 'index', got {table.column_names}")
    return table.column("index").to_numpy().astype(np.int64), meta


def _length(labels_or_size: int | np.ndarray) -> int:
    if isinstance(labels_or_size, (int, np.integer)) and not isinstance(labels_or_size, bool):
        n = int(labels_or_size)
    else:
        n = len(labels_or_size)
    if n < 1:
        raise ValueError(f"the data set must have at least one row, got {n}")
    return n
