import math

import numpy as np
import pandas as pd
import pytest
from _partition_checks import check_partition

from pflrepro.data.schemes.label_permutation import LabelPermutationPartitioner

SEEDS = range(10)
LABELS = np.random.default_rng(5).permutation(np.repeat(np.arange(10), 40))  # 400 samples



def mapping_of(rows: pd.DataFrame, labels: np.ndarray) -> dict[int, int]:
    pairs = set(zip(labels[rows["index"]].tolist(), rows["target"].tolist(), strict=True))
    out = dict(pairs)
    assert len(out) == len(pairs)  # a label never maps to two targets
    return out


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("clients, groups", [(8, 4), (10, 3), (5, 1), (4, 4)])
def test_invariants_and_permutations(seed, clients, groups):
    p = LabelPermutationPartitioner(clients=clients, groups=groups)
    frame = p.split(LABELS, 10, seed)
    check_partition(frame, clients, len(LABELS))
    assert len(frame) == len(LABELS)
    sizes = frame.groupby("client").size()
    assert sizes.max() - sizes.min() <= 1
    assert frame["target"].dtype == np.int64
    assert frame["target"].between(0, 9).all()
    group = frame.groupby("client")["group"].agg(lambda g: g.unique().tolist())
    assert all(len(g) == 1 for g in group)
    members = group.str[0].value_counts()
    assert len(members) == groups and members.max() - members.min() <= 1

    perms = p.permutations(10, seed)
    assert perms.shape == (groups, 10)
    np.testing.assert_array_equal(perms[0], np.arange(10))  # group 0: identity
    assert len({row.tobytes() for row in perms}) == groups  # distinct mappings
    for row in perms:
        assert sorted(row.tolist()) == list(range(10))
    np.testing.assert_array_equal(
        frame["target"].to_numpy(), perms[frame["group"], LABELS[frame["index"]]])
    for g, rows in frame.groupby("group"):  # same mapping for all clients of a group
        assert mapping_of(rows, LABELS) == {c: int(perms[g][c]) for c in
                                            set(LABELS[rows["index"]].tolist())}


def test_permutations_differ_between_seeds():
    p = LabelPermutationPartitioner(clients=4, groups=2)
    assert len({p.permutations(10, s)[1].tobytes() for s in SEEDS}) > 1


def test_all_permutations_of_few_labels():
    labels = np.arange(60) % 3
    p = LabelPermutationPartitioner(clients=6, groups=math.factorial(3))
    for seed in SEEDS:
        frame = p.split(labels, 3, seed)
        check_partition(frame, 6, 60)
        assert len({r.tobytes() for r in p.permutations(3, seed)}) == 6


def test_more_groups_than_permutations():
    with pytest.raises(ValueError, match="fewer than 3 groups"):
        LabelPermutationPartitioner(clients=3, groups=3).split(np.arange(20) % 2, 2, 0)


@pytest.mark.parametrize("seed", SEEDS)
def test_determinism(seed):
    p = LabelPermutationPartitioner(clients=6, groups=3)
    pd.testing.assert_frame_equal(p.split(LABELS, 10, seed), p.split(LABELS, 10, seed))
    assert not p.split(LABELS, 10, seed).equals(p.split(LABELS, 10, seed + 1))


@pytest.mark.parametrize("kwargs, message", [
    ({"clients": 3, "groups": 4}, "more groups"),
    ({"clients": 3, "groups": 0}, "groups must be >= 1"),
])
def test_parameter_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        LabelPermutationPartitioner(**kwargs)


def test_labels_out_of_range():
    with pytest.raises(ValueError, match="labels must lie"):
        LabelPermutationPartitioner(clients=2, groups=2).split(np.arange(20) % 5, 3, 0)


def test_too_few_samples():
    with pytest.raises(ValueError, match="cannot give 6 clients"):
        LabelPermutationPartitioner(clients=6, groups=2).split(np.zeros(11, int), 1, 0)
