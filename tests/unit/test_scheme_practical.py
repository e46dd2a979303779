import numpy as np
import pandas as pd
import pytest
from _partition_checks import check_partition

from pflrepro.data.schemes.practical import PracticalPartitioner

SEEDS = range(10)
LABELS = np.random.default_rng(11).permutation(np.repeat(np.arange(10), 100))  # 1000 samples
CIFAR = np.repeat(np.arange(10), 5000)



def count_table(frame: pd.DataFrame, labels: np.ndarray, num_classes: int) -> pd.DataFrame:
    table = frame.assign(label=labels[frame["index"]]).groupby(["client", "label"]).size()
    return table.unstack(fill_value=0).reindex(columns=range(num_classes), fill_value=0)


@pytest.mark.parametrize("seed", SEEDS)
def test_structure_by_hand(seed):
    # 10 clients, 5 groups of 2, 2 dominant classes per group; 100 samples per client:
    # 40 + 40 from the dominant classes, 20 over the 8 others (2 or 3 each)
    frame = PracticalPartitioner(clients=10, groups=5).split(LABELS, 10, seed)
    check_partition(frame, 10, len(LABELS))
    assert len(frame) == len(LABELS)
    table = count_table(frame, LABELS, 10)
    assert (table.sum(axis=1) == 100).all()
    group = frame.groupby("client")["group"].agg(lambda g: g.unique().tolist())
    assert all(len(g) == 1 for g in group)
    group = group.str[0]
    assert sorted(group.value_counts().tolist()) == [2] * 5
    dominant = {}
    for client, row in table.iterrows():
        dom = frozenset(np.flatnonzero(row.to_numpy() == 40).tolist())
        assert len(dom) == 2
        assert set(row[~row.index.isin(dom)]) <= {2, 3}
        assert dominant.setdefault(group[client], dom) == dom
    assert sorted(c for d in dominant.values() for c in d) == list(range(10))


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("clients, groups, share", [(20, 5, 0.8), (7, 3, 0.6), (12, 4, 1.0)])
def test_invariants_and_dominant_share(seed, clients, groups, share):
    p = PracticalPartitioner(clients=clients, groups=groups, dominant_share=share)
    frame = p.split(LABELS, 10, seed)
    check_partition(frame, clients, len(LABELS))
    sizes = frame.groupby("client").size()
    assert sizes.nunique() == 1
    n = int(sizes.iloc[0])
    table = count_table(frame, LABELS, 10).to_numpy()
    group = frame.groupby("client")["group"].first().to_numpy()
    for g in range(groups):
        rows = table[group == g]
        dom = np.argsort(-rows.sum(axis=0))[:len(np.array_split(range(10), groups)[g])]
        assert set(rows[:, dom].sum(axis=1)) == {int(np.floor(share * n + 0.5))}


def test_cifar_fedamp_setting_uses_everything():
    frame = PracticalPartitioner(clients=20, groups=5).split(CIFAR, 10, seed=0)
    check_partition(frame, 20, len(CIFAR))
    assert (frame.groupby("client").size() == 2500).all()


def test_samples_per_client():
    frame = PracticalPartitioner(clients=10, groups=5, samples_per_client=50).split(LABELS, 10, 1)
    check_partition(frame, 10, len(LABELS))
    assert (frame.groupby("client").size() == 50).all()
    table = count_table(frame, LABELS, 10)
    assert ((table == 20).sum(axis=1) == 2).all()


def test_samples_per_client_too_large():
    p = PracticalPartitioner(clients=10, groups=5, samples_per_client=101)
    with pytest.raises(ValueError, match=r"10 clients 101 samples.*largest possible: 100"):
        p.split(LABELS, 10, 0)


def test_scarce_class_limits_everyone():
    labels = np.repeat(np.arange(4), [100, 100, 100, 10])
    frame = PracticalPartitioner(clients=4, groups=2).split(labels, 4, seed=0)
    check_partition(frame, 4, len(labels))
    sizes = frame.groupby("client").size()
    assert sizes.nunique() == 1 and sizes.iloc[0] < 78


@pytest.mark.parametrize("seed", SEEDS)
def test_determinism(seed):
    p = PracticalPartitioner(clients=10, groups=5)
    pd.testing.assert_frame_equal(p.split(LABELS, 10, seed), p.split(LABELS, 10, seed))
    assert not p.split(LABELS, 10, seed).equals(p.split(LABELS, 10, seed + 1))


@pytest.mark.parametrize("kwargs, message", [
    ({"clients": 4, "groups": 1}, "groups must be >= 2"),
    ({"clients": 3, "groups": 4}, "more groups"),
    ({"clients": 4, "groups": 2, "dominant_share": 0.0}, "dominant_share"),
    ({"clients": 4, "groups": 2, "dominant_share": 1.5}, "dominant_share"),
    ({"clients": 4, "groups": 2, "samples_per_client": 1}, "samples_per_client"),
    ({"clients": 4, "groups": 2, "samples_per_client": -3}, "samples_per_client"),
])
def test_parameter_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        PracticalPartitioner(**kwargs)


def test_more_groups_than_classes():
    with pytest.raises(ValueError, match=r"more groups \(3\) than classes \(2\)"):
        PracticalPartitioner(clients=6, groups=3).split(LABELS % 2, 2, 0)


def test_too_few_samples():
    with pytest.raises(ValueError, match="cannot give"):
        PracticalPartitioner(clients=8, groups=2).split(np.arange(10) % 2, 2, 0)
