import numpy as np
import pandas as pd
import pytest
from _partition_checks import check_partition

from pflrepro.data.schemes.label_groups import LabelGroupsPartitioner

SEEDS = range(10)
LABELS = np.random.default_rng(7).permutation(np.repeat(np.arange(10), 40))  # 400 samples



def client_labels(frame: pd.DataFrame, labels: np.ndarray) -> dict[int, set[int]]:
    return {c: set(labels[g["index"]].tolist()) for c, g in frame.groupby("client")}


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("alpha", [0.0, 0.4, 1e-3])
def test_invariants_and_group_structure(seed, alpha):
    frame = LabelGroupsPartitioner(clients=8, groups=4, alpha=alpha).split(LABELS, 10, seed)
    check_partition(frame, 8, len(LABELS))
    assert len(frame) == len(LABELS)  # every sample used
    group_of = frame.groupby("client")["group"].agg(lambda g: g.unique().tolist())
    assert all(len(g) == 1 for g in group_of)
    group_of = group_of.str[0]
    assert sorted(group_of.value_counts().tolist()) == [2, 2, 2, 2]
    held = client_labels(frame, LABELS)
    for a in range(8):
        for b in range(8):
            if group_of[a] != group_of[b]:
                assert not held[a] & held[b]
    group_labels = [set().union(*(held[c] for c in range(8) if group_of[c] == g))
                    for g in range(4)]
    assert sorted(len(s) for s in group_labels) == [2, 2, 3, 3]
    assert set().union(*group_labels) == set(range(10))


@pytest.mark.parametrize("seed", SEEDS)
def test_equal_shares_within_group(seed):
    frame = LabelGroupsPartitioner(clients=9, groups=3).split(LABELS, 10, seed)
    for _, g in frame.groupby("group"):
        sizes = g.groupby("client").size()
        assert len(sizes) == 3
        assert sizes.max() - sizes.min() <= 1


def test_dirichlet_shares_are_unequal_but_usable():
    spreads = []
    for seed in SEEDS:
        frame = LabelGroupsPartitioner(clients=12, groups=3, alpha=0.1).split(LABELS, 10, seed)
        check_partition(frame, 12, len(LABELS))
        sizes = frame.groupby("client").size()
        assert sizes.min() >= 2
        spreads.append(sizes.max() - sizes.min())
    assert max(spreads) > 50


def test_clients_assignment_is_seeded_permutation():
    groups = {tuple(LabelGroupsPartitioner(clients=8, groups=4).split(LABELS, 10, s)
                    .groupby("client")["group"].first()) for s in SEEDS}
    assert len(groups) > 1


@pytest.mark.parametrize("seed", SEEDS)
def test_determinism(seed):
    p = LabelGroupsPartitioner(clients=8, groups=4, alpha=0.4)
    pd.testing.assert_frame_equal(p.split(LABELS, 10, seed), p.split(LABELS, 10, seed))
    assert not p.split(LABELS, 10, seed).equals(p.split(LABELS, 10, seed + 1))


def test_one_group_is_iid_like():
    frame = LabelGroupsPartitioner(clients=4, groups=1).split(LABELS, 10, seed=0)
    assert (frame["group"] == 0).all()
    assert len(frame) == len(LABELS)


@pytest.mark.parametrize("kwargs, message", [
    ({"clients": 3, "groups": 4}, "more groups"),
    ({"clients": 3, "groups": 0}, "groups must be >= 1"),
    ({"clients": 3, "groups": 2, "alpha": -0.1}, "alpha"),
    ({"clients": 3, "groups": 2, "alpha": float("nan")}, "alpha"),
])
def test_parameter_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        LabelGroupsPartitioner(**kwargs)


def test_more_groups_than_labels():
    with pytest.raises(ValueError, match=r"more groups \(4\) than labels \(3\)"):
        LabelGroupsPartitioner(clients=8, groups=4).split(np.repeat(np.arange(3), 10), 3, 0)


def test_group_with_too_few_samples():
    labels = np.array([0] * 40 + [1] * 3)
    with pytest.raises(ValueError, match="too few"):
        LabelGroupsPartitioner(clients=4, groups=2).split(labels, 2, 0)


def test_labels_out_of_range():
    with pytest.raises(ValueError, match="labels must lie"):
        LabelGroupsPartitioner(clients=2, groups=2).split(np.arange(20) % 5, 3, 0)
