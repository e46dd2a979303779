import numpy as np
import pandas as pd
import pytest
from _partition_checks import check_partition

from pflrepro.data.schemes.iid import IIDPartitioner

SEEDS = range(10)
LABELS = np.repeat(np.arange(10), 37)  # 370 samples



@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("clients", [1, 7, 20, 185])
def test_invariants(seed, clients):
    frame = IIDPartitioner(clients=clients).split(LABELS, 10, seed)
    check_partition(frame, clients, len(LABELS))
    sizes = frame.groupby("client").size()
    assert sizes.max() - sizes.min() <= 1
    assert len(frame) == len(LABELS)  # everything used
    assert (frame["group"] == -1).all()


@pytest.mark.parametrize("seed", SEEDS)
def test_determinism(seed):
    p = IIDPartitioner(clients=6)
    pd.testing.assert_frame_equal(p.split(LABELS, 10, seed), p.split(LABELS, 10, seed))
    assert not p.split(LABELS, 10, seed).equals(p.split(LABELS, 10, seed + 1))


def test_labels_are_mixed():
    frame = IIDPartitioner(clients=5).split(np.repeat(np.arange(10), 100), 10, seed=0)
    labels = np.repeat(np.arange(10), 100)[frame["index"]]
    assert all(len(set(labels[frame["client"] == c])) == 10 for c in range(5))


def test_too_few_samples():
    with pytest.raises(ValueError, match="cannot give 6 clients two samples"):
        IIDPartitioner(clients=6).split(np.zeros(11, dtype=int), 1, seed=0)
