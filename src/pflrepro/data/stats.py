"""Per-client statistics of a partition table, and a short summary of them."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd


def partition_stats(frame: pd.DataFrame, labels: np.ndarray, num_classes: int) -> pd.DataFrame:
    """Return one row per client ``0 .. max(client)``, clients without rows included.

    Columns: ``client``, ``group`` (``-1`` for a client without rows), ``n_train``,
    ``n_test``, ``n``, ``n_labels`` (distinct labels) and ``label_<c>`` (count of
    label ``c``) for ``c`` in ``0 .. num_classes-1``.
    """
    labels = np.asarray(labels)
    clients = int(frame["client"].max()) + 1 if len(frame) else 0
    client = frame["client"].to_numpy(dtype=np.int64)
    sample_labels = labels[frame["index"].to_numpy(dtype=np.int64)]
    if sample_labels.size and not 0 <= sample_labels.min() <= sample_labels.max() < num_classes:
        raise ValueError(f"partition_stats: labels must lie in 0..{num_classes - 1}")
    counts = np.zeros((clients, num_classes), dtype=np.int64)
    np.add.at(counts, (client, sample_labels), 1)
    is_train = (frame["split"] == "train").to_numpy(dtype=bool)
    is_test = (frame["split"] == "test").to_numpy(dtype=bool)
    group = np.full(clients, -1, dtype=np.int64)
    group[client] = frame["group"].to_numpy(dtype=np.int64)

    out = pd.DataFrame({
        "client": np.arange(clients, dtype=np.int64),
        "group": group,
        "n_train": np.bincount(client[is_train], minlength=clients),
        "n_test": np.bincount(client[is_test], minlength=clients),
        "n": counts.sum(axis=1),
        "n_labels": (counts > 0).sum(axis=1),
    })
    label_cols = pd.DataFrame(counts, columns=[f"label_{c}" for c in range(num_classes)])
    return pd.concat([out, label_cols], axis=1)


def summary_stats(per_client: pd.DataFrame) -> dict[str, Any]:
    """Summarise :func:`partition_stats` output in plain Python numbers.

    Keys: ``clients``, ``samples_min``/``samples_median``/``samples_max``,
    ``labels_min``/``labels_median``/``labels_max`` and ``empty_clients`` (clients
    with no sample); for a scheme with distribution ids (some ``group >= 0``) also
    ``clients_per_group``: ``{group id: number of clients}`` for every id ``0 ..
    max(group)`` (``0`` for an id no client has). Values are plain Python numbers.
    """
    n = per_client["n"].to_numpy()
    k = per_client["n_labels"].to_numpy()

    def q(values: np.ndarray) -> tuple[int, float, int]:
        if not len(values):
            return 0, 0.0, 0
        return int(values.min()), float(np.median(values)), int(values.max())

    s_min, s_med, s_max = q(n)
    l_min, l_med, l_max = q(k)
    out: dict[str, Any] = {
        "clients": int(len(per_client)),
        "samples_min": s_min, "samples_median": s_med, "samples_max": s_max,
        "labels_min": l_min, "labels_median": l_med, "labels_max": l_max,
        "empty_clients": int((n == 0).sum()),
    }
    group = per_client["group"].to_numpy(dtype=np.int64)
    group = group[group >= 0]
    if group.size:
        out["clients_per_group"] = {g: int(c) for g, c in enumerate(np.bincount(group))}
    return out
