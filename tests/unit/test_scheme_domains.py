import numpy as np
import pandas as pd
import pytest
from _partition_checks import check_partition

from pflrepro.data.schemes.domains import DomainsPartitioner

SEEDS = range(10)
_rng = np.random.default_rng(13)
DOMAIN = _rng.permutation(np.repeat(np.arange(4), [60, 45, 80, 51]))  # Office-Home-like
LABELS = _rng.integers(0, 65, size=len(DOMAIN))
EXTRAS = {"domain": DOMAIN}



@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("clients", [4, 6, 8, 13, 22])
def test_invariants(seed, clients):
    frame = DomainsPartitioner(clients=clients).split(LABELS, 65, seed, extras=EXTRAS)
    check_partition(frame, clients, len(LABELS))
    assert len(frame) == len(LABELS)  # every sample used
    # every row's group is its sample's domain, one domain per client
    np.testing.assert_array_equal(frame["group"].to_numpy(), DOMAIN[frame["index"]])
    group = frame.groupby("client")["group"].agg(lambda g: g.unique().tolist())
    assert all(len(g) == 1 for g in group)
    members = group.str[0].value_counts()
    assert sorted(members.index) == [0, 1, 2, 3]
    assert members.max() - members.min() <= 1
    for _, rows in frame.groupby("group"):  # equal shares within a domain
        sizes = rows.groupby("client").size()
        assert sizes.max() - sizes.min() <= 1


def test_domain_ids_need_not_be_contiguous():
    domain = np.where(DOMAIN == 3, 7, DOMAIN)
    frame = DomainsPartitioner(clients=5).split(LABELS, 65, 0, extras={"domain": domain})
    assert set(frame["group"]) == {0, 1, 2, 7}


def test_clients_assignment_is_seeded_permutation():
    p = DomainsPartitioner(clients=8)
    draws = {tuple(p.split(LABELS, 65, s, extras=EXTRAS).groupby("client")["group"].first())
             for s in SEEDS}
    assert len(draws) > 1


@pytest.mark.parametrize("seed", SEEDS)
def test_determinism(seed):
    p = DomainsPartitioner(clients=8)
    a = p.split(LABELS, 65, seed, extras=EXTRAS)
    pd.testing.assert_frame_equal(a, p.split(LABELS, 65, seed, extras=EXTRAS))
    assert not a.equals(p.split(LABELS, 65, seed + 1, extras=EXTRAS))


def test_needs_domain_ids():
    with pytest.raises(ValueError, match="scheme domains needs a data set with domain ids"):
        DomainsPartitioner(clients=4).split(LABELS, 65, 0)


def test_fewer_clients_than_domains():
    with pytest.raises(ValueError, match="4 domains need at least 4 clients, got 3"):
        DomainsPartitioner(clients=3).split(LABELS, 65, 0, extras=EXTRAS)


def test_domain_too_small():
    domain = np.array([0] * 50 + [1] * 3)
    with pytest.raises(ValueError, match="domain 1 has 3 samples"):
        DomainsPartitioner(clients=4).split(np.zeros(53, int), 1, 0, extras={"domain": domain})


def test_negative_domain_ids():
    with pytest.raises(ValueError, match=">= 0"):
        DomainsPartitioner(clients=4).split(LABELS, 65, 0, extras={"domain": DOMAIN - 1})
