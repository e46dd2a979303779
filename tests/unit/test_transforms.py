"""pflrepro.data.transforms: a partition's target column relabels its rows."""

import numpy as np
import pandas as pd
import pytest

from pflrepro.data.transforms import partition_labels, per_used_row


def test_targets_replace_the_labels_of_their_rows_only():
    labels = np.array([0, 1, 2, 0, 1], dtype=np.uint8)
    frame = pd.DataFrame({"index": [4, 1, 4], "target": [2, 0, 2]})
    out = partition_labels(labels, frame, num_classes=3)
    assert out.tolist() == [0, 0, 2, 0, 2] and out.dtype == np.int64
    assert labels.tolist() == [0, 1, 2, 0, 1]  # the input is not modified
    assert partition_labels(labels, frame.drop(columns="target"), 3).tolist() == [0, 1, 2, 0, 1]


def test_conflicts_and_range_are_refused():
    labels = np.zeros(3, dtype=np.int64)
    with pytest.raises(ValueError, match="two different 'target' values"):
        partition_labels(labels, pd.DataFrame({"index": [1, 1], "target": [0, 1]}), 3)
    with pytest.raises(ValueError, match=r"must lie in 0\.\.2"):
        partition_labels(labels, pd.DataFrame({"index": [0], "target": [3]}), 3)


def test_per_used_row_in_unique_order():
    frame = pd.DataFrame({"index": [5, 2, 5], "rotation": [90, 180, 90]})
    _, first, inverse = np.unique(frame["index"], return_index=True, return_inverse=True)
    assert per_used_row(frame, "rotation", first, inverse).tolist() == [180, 90]
