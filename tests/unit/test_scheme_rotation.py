import numpy as np
import pandas as pd
import pytest
from _partition_checks import check_partition

from pflrepro.data.partition import from_spec
from pflrepro.data.schemes.rotation import RotationPartitioner

SEEDS = range(10)
LABELS = np.random.default_rng(3).permutation(np.repeat(np.arange(10), 40))  # 400 samples



@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("clients, groups, angles", [
    (20, 4, (0, 90, 180, 270)), (7, 2, (0, 180)), (4, 4, (270, 0, 90, 180)), (3, 1, (90,)),
])
def test_invariants(seed, clients, groups, angles):
    frame = RotationPartitioner(clients=clients, groups=groups, angles=angles).split(
        LABELS, 10, seed)
    check_partition(frame, clients, len(LABELS))
    assert len(frame) == len(LABELS)  # IID split uses everything
    sizes = frame.groupby("client").size()
    assert sizes.max() - sizes.min() <= 1
    assert frame["rotation"].dtype == np.int16
    per_client = frame.groupby("client").agg(group=("group", "unique"),
                                             rotation=("rotation", "unique"))
    assert all(len(g) == 1 for g in per_client["group"])
    assert all(len(r) == 1 for r in per_client["rotation"])
    group = per_client["group"].str[0]
    rotation = per_client["rotation"].str[0]
    assert (rotation == [angles[g] for g in group]).all()
    members = group.value_counts()
    assert len(members) == groups  # every group has a client
    assert members.max() - members.min() <= 1  # balanced


def test_groups_are_a_seeded_permutation():
    p = RotationPartitioner(clients=8, groups=4)
    draws = {tuple(p.split(LABELS, 10, s).groupby("client")["group"].first()) for s in SEEDS}
    assert len(draws) > 1


@pytest.mark.parametrize("seed", SEEDS)
def test_determinism(seed):
    p = RotationPartitioner(clients=6, groups=2, angles=(0, 90))
    pd.testing.assert_frame_equal(p.split(LABELS, 10, seed), p.split(LABELS, 10, seed))
    assert not p.split(LABELS, 10, seed).equals(p.split(LABELS, 10, seed + 1))


def test_defaults_and_spec_round_trip():
    p = RotationPartitioner(clients=8)
    assert (p.groups, p.angles) == (4, (0, 90, 180, 270))
    assert p.id == "rotation-clients8-test_fraction0.2-max_samples0-groups4-angles0_90_180_270"
    q = from_spec({"scheme": "rotation", "clients": 8, "groups": 2, "angles": [0, 180]})
    assert q.angles == (0, 180)
    assert from_spec(q.spec()) == q


@pytest.mark.parametrize("kwargs, message", [
    ({"clients": 4, "groups": 0, "angles": ()}, "groups must be >= 1"),
    ({"clients": 3, "groups": 4}, "more groups"),
    ({"clients": 4, "groups": 2, "angles": (0, 45)}, "multiples of 90"),
    ({"clients": 4, "groups": 2, "angles": (0, 360)}, "multiples of 90"),
    ({"clients": 4, "groups": 2, "angles": (0, -90)}, "multiples of 90"),
    ({"clients": 4, "groups": 2, "angles": (90, 90)}, "distinct"),
    ({"clients": 4, "groups": 2}, "2 groups need 2 angles"),
    ({"clients": 4, "groups": 2, "angles": (0, 90.0)}, "integers"),
    ({"clients": 4, "groups": 1, "angles": "0"}, "list of integers"),
])
def test_parameter_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        RotationPartitioner(**kwargs)


def test_too_few_samples():
    with pytest.raises(ValueError, match="cannot give 6 clients two samples"):
        RotationPartitioner(clients=6, groups=1, angles=(0,)).split(np.zeros(11, int), 1, 0)
