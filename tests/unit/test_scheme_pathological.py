import numpy as np
import pandas as pd
import pytest
from _partition_checks import check_partition, labels_per_client

from pflrepro.data.schemes.pathological import PathologicalPartitioner, separate_labels

SEEDS = range(10)
LABELS = np.random.default_rng(5).permutation(np.repeat(np.arange(10), 60))  # 600 samples
CIFAR = np.repeat(np.arange(10), 5000)




@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("clients, per_client", [(20, 2), (10, 3), (30, 2), (10, 1)])
def test_each_client_holds_exactly_its_labels(seed, clients, per_client):
    # 600 samples, 60 per label: shards of 15, 20 or 10 samples never straddle labels
    p = PathologicalPartitioner(clients=clients, classes_per_client=per_client)
    frame = p.split(LABELS, 10, seed)
    check_partition(frame, clients, len(LABELS))
    assert len(frame) == len(LABELS)
    assert (labels_per_client(frame, LABELS) == per_client).all()
    assert (frame.groupby("client").size() == 600 // clients).all()
    assert (frame["group"] == -1).all()


@pytest.mark.parametrize("seed", range(3))
def test_cifar_100_clients_two_labels(seed):
    frame = PathologicalPartitioner(clients=100).split(CIFAR, 10, seed)
    check_partition(frame, 100, len(CIFAR))
    assert (labels_per_client(frame, CIFAR) == 2).all()
    assert (frame.groupby("client").size() == 500).all()


def test_label_pairs_vary():
    pairs = set()
    frame = PathologicalPartitioner(clients=100).split(CIFAR, 10, seed=0)
    for _, g in frame.groupby("client"):
        pairs.add(tuple(sorted(set(CIFAR[g["index"]].tolist()))))
    assert len(pairs) > 20  # random shard draw, not a fixed pairing


def test_separate_labels_by_hand():
    deal = np.array([[0, 1], [2, 3]])
    shard_labels = [frozenset({0}), frozenset({0}), frozenset({1}), frozenset({1})]
    separate_labels(deal, shard_labels)
    for row in deal:
        assert shard_labels[row[0]] != shard_labels[row[1]]
    assert sorted(deal.ravel().tolist()) == [0, 1, 2, 3]


def test_unfixable_clash_terminates():
    labels = np.array([0] * 90 + [1] * 10)  # 9 label-0 shards, 1 label-1 shard
    frame = PathologicalPartitioner(clients=5).split(labels, 2, seed=0)
    check_partition(frame, 5, 100)
    assert sorted(labels_per_client(frame, labels).tolist()) == [1, 1, 1, 1, 2]


def test_straddling_shards():
    labels = np.repeat(np.arange(3), [7, 11, 13])  # 31 samples, uneven
    frame = PathologicalPartitioner(clients=3).split(labels, 3, seed=0)
    check_partition(frame, 3, 31)
    assert len(frame) == 31


@pytest.mark.parametrize("seed", SEEDS)
def test_determinism(seed):
    p = PathologicalPartitioner(clients=20)
    pd.testing.assert_frame_equal(p.split(LABELS, 10, seed), p.split(LABELS, 10, seed))
    assert not p.split(LABELS, 10, seed).equals(p.split(LABELS, 10, seed + 1))


def test_parameter_errors():
    with pytest.raises(ValueError, match="classes_per_client must be >= 1"):
        PathologicalPartitioner(clients=3, classes_per_client=0)
    with pytest.raises(ValueError, match=r"classes_per_client \(3\) exceeds"):
        PathologicalPartitioner(clients=3, classes_per_client=3).split(LABELS % 2, 2, 0)
    with pytest.raises(ValueError, match="fewer than 2 samples"):
        PathologicalPartitioner(clients=10, classes_per_client=1).split(np.arange(15) % 3, 3, 0)
    with pytest.raises(ValueError, match="fewer than 2 samples"):
        PathologicalPartitioner(clients=10).split(np.arange(15) % 3, 3, 0)
