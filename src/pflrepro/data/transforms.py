"""Per-row transforms a partition table applies to its data set (NumPy only).

Schemes may add columns to the rows they assign: ``target`` relabels a sample (label
permutation), ``rotation`` turns an image (rotation; applied to the images on the
device by :class:`pflrepro.data.federated.FederatedData`). Partitioners use each
data-set row once; a row listed twice must carry the same values.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["partition_labels", "per_used_row"]


def per_used_row(partition: pd.DataFrame, column: str, first: np.ndarray,
                 inverse: np.ndarray) -> np.ndarray:
    """``column``'s value for each distinct data-set row (``np.unique`` order)."""
    values = partition[column].to_numpy()
    per_row = values[first]
    if not np.array_equal(per_row[inverse.reshape(-1)], values):
        raise ValueError(f"partition gives a data-set row two different {column!r} values")
    return per_row


def partition_labels(labels: np.ndarray, partition: pd.DataFrame,
                     num_classes: int) -> np.ndarray:
    """Every data-set row's label (int64) with the partition's ``target`` column applied.

    Schemes that relabel samples (label permutation) give a ``target`` per partition
    row; a row listed twice must carry the same target, and targets must lie in
    ``0..num_classes - 1``.
    """
    out = np.array(labels, dtype=np.int64, copy=True)
    if "target" in partition:
        index = partition["index"].to_numpy()
        used, first, inverse = np.unique(index, return_index=True, return_inverse=True)
        targets = per_used_row(partition, "target", first, inverse).astype(np.int64)
        if targets.size and not 0 <= targets.min() <= targets.max() < num_classes:
            raise ValueError(f"partition column 'target' must lie in 0..{num_classes - 1}")
        out[used] = targets
    return out
