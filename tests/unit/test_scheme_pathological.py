import numpy as np
import pandas as pd
import pytest
from _partition_checks import check_partition, labels_per_client

from pflrepro.data.schemes import pathological
from pflrepro.data.schemes.pathological import (
    PathologicalPartitioner,
    column_deal,
    separate_labels,
    shard_counts,
)

SEEDS = range(10)
LABELS = np.random.default_rng(5).permutation(np.repeat(np.arange(10), 60))  # 600 samples
CIFAR = np.repeat(np.arange(10), 5000)
EMNIST_LIKE = np.random.default_rng(7).permutation(np.repeat(np.arange(47), 30))  # 1410 rows


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
    frame = PathologicalPartitioner(clients=5, shards="label_sorted").split(labels, 2, seed=0)
    check_partition(frame, 5, 100)
    assert sorted(labels_per_client(frame, labels).tolist()) == [1, 1, 1, 1, 2]


def test_per_label_caps_a_dominant_label():
    labels = np.array([0] * 90 + [1] * 10)  # quotas 9 and 1, at most 5 per label: 5 and 5
    frame = PathologicalPartitioner(clients=5).split(labels, 2, seed=0)
    check_partition(frame, 5, 100)
    assert (labels_per_client(frame, labels) == 2).all()
    # each client: a fifth of label 0 (18) and of label 1 (2)
    assert (frame.groupby("client").size() == 20).all()


def test_straddling_shards():
    labels = np.repeat(np.arange(3), [7, 11, 13])  # 31 samples, uneven
    frame = PathologicalPartitioner(clients=3, shards="label_sorted").split(labels, 3, seed=0)
    check_partition(frame, 3, 31)
    assert len(frame) == 31


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("classes", [47, 100])
def test_many_labels_two_per_client(seed, classes):
    # EMNIST-balanced (47) / CIFAR-100 (100) with 20 clients: 40 shards, fewer than the
    # labels, so label-sorted shards straddle 2+ labels; per-label shards never do
    labels = np.random.default_rng(seed).permutation(np.repeat(np.arange(classes), 30))
    frame = PathologicalPartitioner(clients=20).split(labels, classes, seed)
    check_partition(frame, 20, len(labels))
    assert (labels_per_client(frame, labels) == 2).all()
    # 40 labels get one shard each (a whole label, 30 rows); the others are left out
    assert (frame.groupby("client").size() == 60).all()
    assert pd.Series(labels[frame["index"]]).nunique() == 40


def test_label_sorted_reading_straddles_on_47_labels():
    frame = PathologicalPartitioner(clients=20, shards="label_sorted").split(EMNIST_LIKE, 47, 0)
    per_client = labels_per_client(frame, EMNIST_LIKE)
    # 1410 rows in 40 shards of 35-36 rows over labels of 30 rows: 2-3 labels per shard
    assert per_client.min() >= 4 and per_client.max() <= 6
    assert len(frame) == len(EMNIST_LIKE)


@pytest.mark.parametrize("seed", SEEDS)
def test_per_label_equals_label_sorted_when_shards_fit_labels(seed):
    # 60 rows per label, 40 shards: 4 shards of 15 per label either way, same draws
    a = PathologicalPartitioner(clients=20).split(LABELS, 10, seed)
    b = PathologicalPartitioner(clients=20, shards="label_sorted").split(LABELS, 10, seed)
    pd.testing.assert_frame_equal(a, b)


def test_unequal_label_counts_exact():
    labels = np.repeat(np.arange(10), [310, 290, 305, 295, 300, 300, 298, 302, 300, 300])
    frame = PathologicalPartitioner(clients=20).split(labels, 10, seed=3)
    assert (labels_per_client(frame, labels) == 2).all()
    assert len(frame) == len(labels)  # 4 shards per label: every row used


def test_shard_counts_by_hand():
    # quotas 3, 1.5, 0.5: floors 3, 1, 0; the last shard to the tie (1.5 vs 0.5 left
    # over by 0.5 each) with the lower rank
    assert shard_counts(np.array([6, 3, 1]), 5, 5, np.array([0, 1, 2])).tolist() == [3, 2, 0]
    assert shard_counts(np.array([6, 3, 1]), 5, 5, np.array([0, 2, 1])).tolist() == [3, 1, 1]
    # cap 5 per label: quotas 9 and 1 become 5 and 5
    assert shard_counts(np.array([90, 10]), 10, 5, np.arange(2)).tolist() == [5, 5]
    # 4 shards over 6 equal labels: the 4 lowest ranks get one
    assert shard_counts(np.full(6, 10), 4, 2, np.array([5, 0, 4, 1, 3, 2])).tolist() == \
        [0, 1, 0, 1, 1, 1]
    with pytest.raises(ValueError, match="at most 4 single-label shards"):
        shard_counts(np.array([2, 2]), 6, 3, np.arange(2))


def test_column_deal_by_hand():
    assert column_deal(3, 2).tolist() == [[0, 3], [1, 4], [2, 5]]


def test_column_deal_fallback(monkeypatch):
    # with the repair pass disabled, random deals clash; the column deal replaces them
    monkeypatch.setattr(pathological, "separate_labels", lambda deal, shard_labels: None)
    for seed in range(5):
        frame = PathologicalPartitioner(clients=20).split(LABELS, 10, seed)
        assert (labels_per_client(frame, LABELS) == 2).all()


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
    with pytest.raises(ValueError, match="shards must be one of"):
        PathologicalPartitioner(clients=3, shards="sorted")
