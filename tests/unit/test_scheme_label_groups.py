import numpy as np
import pandas as pd
import pytest
from _partition_checks import check_partition

from pflrepro.data.partition import from_spec
from pflrepro.data.schemes.label_groups import LabelGroupsPartitioner, assign_clients
from pflrepro.seeding import NO_CLIENT, SETUP_ROUND, numpy_generator

SEEDS = range(10)
LABELS = np.random.default_rng(7).permutation(np.repeat(np.arange(10), 40))  # 400 samples
ASSIGNMENTS = ["random", "balanced"]


def client_rng(seed: int) -> np.random.Generator:
    """The generator the scheme assigns clients with (documented purpose tag)."""
    return numpy_generator(seed, SETUP_ROUND, NO_CLIENT, "partition:label_groups:clients")


def group_per_client(frame: pd.DataFrame) -> np.ndarray:
    return frame.groupby("client")["group"].first().to_numpy()


def client_labels(frame: pd.DataFrame, labels: np.ndarray) -> dict[int, set[int]]:
    return {c: set(labels[g["index"]].tolist()) for c, g in frame.groupby("client")}


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("alpha", [0.0, 0.4, 1e-3])
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_invariants_and_group_structure(seed, alpha, assignment):
    p = LabelGroupsPartitioner(clients=8, groups=4, alpha=alpha, assignment=assignment)
    frame = p.split(LABELS, 10, seed)
    check_partition(frame, 8, len(LABELS))
    assert len(frame) == len(LABELS)  # every sample used
    group_of = frame.groupby("client")["group"].agg(lambda g: g.unique().tolist())
    assert all(len(g) == 1 for g in group_of)
    group_of = group_of.str[0]
    sizes = group_of.value_counts()
    assert sorted(sizes.index) == [0, 1, 2, 3] and sizes.sum() == 8  # every group has clients
    if assignment == "balanced":
        assert sorted(sizes.tolist()) == [2, 2, 2, 2]
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
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_equal_shares_within_group(seed, assignment):
    p = LabelGroupsPartitioner(clients=9, groups=3, assignment=assignment)
    frame = p.split(LABELS, 10, seed)
    for _, g in frame.groupby("group"):
        sizes = g.groupby("client").size()
        if assignment == "balanced":
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


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_clients_assignment_is_seeded(assignment):
    p = LabelGroupsPartitioner(clients=8, groups=4, assignment=assignment)
    groups = {tuple(group_per_client(p.split(LABELS, 10, s))) for s in SEEDS}
    assert len(groups) > 1


def test_random_assignment_gives_unequal_group_sizes():
    # FedeRiCo Fig. 3: one client alone in its distribution, three in another; an
    # equal-sizes assignment (2/2/2/2 for 8 clients, 4 groups) never shows that
    p = LabelGroupsPartitioner(clients=8, groups=4)  # the default assignment
    sizes = [sorted(np.bincount(group_per_client(p.split(LABELS, 10, s)), minlength=4))
             for s in SEEDS]
    assert any(s != [2, 2, 2, 2] for s in sizes)
    assert any(s[0] == 1 for s in sizes)  # some split has a client alone
    assert all(min(s) >= 1 for s in sizes)
    assert p.assignment == "random"


def test_random_assignment_follows_documented_procedure():
    # one random client per group first, then uniform groups for the rest
    for seed in SEEDS:
        rng = client_rng(seed)
        perm = rng.permutation(8)
        expected = np.empty(8, dtype=np.int64)
        expected[perm[:4]] = [0, 1, 2, 3]
        expected[perm[4:]] = rng.integers(4, size=4)
        got = group_per_client(LabelGroupsPartitioner(clients=8, groups=4).split(LABELS, 10, seed))
        np.testing.assert_array_equal(got, expected)


def test_balanced_reproduces_the_old_assignment():
    # the assignment before `assignment` existed: a seeded permutation of k % groups
    for seed in SEEDS:
        old = client_rng(seed).permutation(np.arange(8) % 4)
        p = LabelGroupsPartitioner(clients=8, groups=4, assignment="balanced")
        np.testing.assert_array_equal(group_per_client(p.split(LABELS, 10, seed)), old)


@pytest.mark.parametrize(("clients", "groups"), [(8, 1), (8, 2), (8, 4), (8, 5), (8, 8), (20, 7)])
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_assign_clients_every_group_non_empty(clients, groups, assignment):
    for seed in range(200):
        group = assign_clients(clients, groups, assignment, client_rng(seed))
        assert group.shape == (clients,)
        counts = np.bincount(group, minlength=groups)
        assert len(counts) == groups and counts.min() >= 1
        if assignment == "balanced":
            assert counts.max() - counts.min() <= 1


def test_assign_clients_random_is_unbiased_across_groups():
    # 8 clients, 4 groups: each group holds 1 + Binomial(4, 1/4) clients, mean 2
    sizes = np.array([np.bincount(assign_clients(8, 4, "random", client_rng(s)), minlength=4)
                      for s in range(400)])
    assert np.all(np.abs(sizes.mean(axis=0) - 2.0) < 0.2)
    assert sizes.max() == 5  # a group can get all four of the remaining clients


def test_assign_clients_is_deterministic():
    for seed in SEEDS:
        for assignment in ASSIGNMENTS:
            np.testing.assert_array_equal(assign_clients(8, 4, assignment, client_rng(seed)),
                                          assign_clients(8, 4, assignment, client_rng(seed)))


def test_assignment_is_part_of_the_id():
    random = LabelGroupsPartitioner(clients=8, groups=4)
    balanced = LabelGroupsPartitioner(clients=8, groups=4, assignment="balanced")
    assert random.id.endswith("-alpha0.0-assignmentrandom")
    assert balanced.id.endswith("-alpha0.0-assignmentbalanced")
    assert random.spec()["assignment"] == "random"


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_determinism(seed, assignment):
    p = LabelGroupsPartitioner(clients=8, groups=4, alpha=0.4, assignment=assignment)
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
    ({"clients": 3, "groups": 2, "assignment": "equal"},
     r"assignment must be one of \['random', 'balanced'\], got 'equal'"),
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
        LabelGroupsPartitioner(clients=4, groups=2, assignment="balanced").split(labels, 2, 0)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_group_with_too_few_samples_for_its_clients(seed, assignment):
    # 2 groups of 3 samples, 3 clients: one group has 2 clients, who need 2 * 2 = 4 samples
    labels = np.array([0, 0, 0, 1, 1, 1])
    message = (rf"has 3 samples, too few for its 2 of 3 clients with 2 each "
               rf"\(assignment '{assignment}', split seed {seed}\)")
    with pytest.raises(ValueError, match=message):
        LabelGroupsPartitioner(clients=3, groups=2, assignment=assignment).split(labels, 2, seed)


def test_labels_out_of_range():
    with pytest.raises(ValueError, match="labels must lie"):
        LabelGroupsPartitioner(clients=2, groups=2).split(np.arange(20) % 5, 3, 0)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_equal_sizes_give_every_client_the_same_rows(seed, assignment):
    # 40 rows per label; 8 clients in 4 groups of 3/3/2/2 labels (120/120/80/80 rows):
    # every client gets min_g floor(rows_g / clients_g) rows of its group's labels
    p = LabelGroupsPartitioner(clients=8, groups=4, assignment=assignment, sizes="equal")
    frame = p.split(LABELS, 10, seed)
    check_partition(frame, 8, len(LABELS))
    label_rng = numpy_generator(seed, SETUP_ROUND, NO_CLIENT, "partition:label_groups:labels")
    label_sets = np.array_split(label_rng.permutation(10), 4)
    groups = group_per_client(frame)
    per = min(40 * len(label_sets[g]) // int((groups == g).sum()) for g in range(4))
    assert (frame.groupby("client").size() == per).all()
    held = client_labels(frame, LABELS)
    for c in range(8):  # labels stay within the client's group
        assert held[c] <= set(label_sets[groups[c]].tolist())
    by = LabelGroupsPartitioner(clients=8, groups=4, assignment=assignment).split(LABELS, 10,
                                                                                 seed)
    np.testing.assert_array_equal(group_per_client(by), groups)  # same assignment


def test_equal_sizes_by_hand():
    # 2 groups of 5 labels (200 rows each); balanced: 4 clients each -> 50 rows, all used.
    # 3 clients, 2 groups (one group has 2 clients, the other 1): by_group gives 100/100
    # and 200; equal gives min(200 // 2, 200 // 1) = 100 to each
    eq = LabelGroupsPartitioner(clients=3, groups=2, sizes="equal").split(LABELS, 10, 0)
    by = LabelGroupsPartitioner(clients=3, groups=2).split(LABELS, 10, 0)
    assert sorted(by.groupby("client").size().tolist()) == [100, 100, 200]
    assert eq.groupby("client").size().tolist() == [100, 100, 100]
    # the lone client's 100 rows are a subset of what by_group gives it
    lone = int(np.flatnonzero(np.bincount(group_per_client(eq)) == 1)[0])
    lone_client = int(np.flatnonzero(group_per_client(eq) == lone)[0])
    assert set(eq[eq.client == lone_client]["index"]) <= set(by[by.client == lone_client]["index"])


def test_sizes_default_is_by_group_and_bad_values_are_rejected():
    assert LabelGroupsPartitioner(clients=8, groups=4).sizes == "by_group"
    with pytest.raises(ValueError, match="sizes"):
        LabelGroupsPartitioner(clients=8, groups=4, sizes="same")
    with pytest.raises(ValueError, match="alpha 0"):
        LabelGroupsPartitioner(clients=8, groups=4, sizes="equal", alpha=0.5)


def test_sizes_enter_the_id_only_when_equal():
    by = LabelGroupsPartitioner(clients=8, groups=4)
    eq = LabelGroupsPartitioner(clients=8, groups=4, sizes="equal")
    assert by.id.endswith("-alpha0.0-assignmentrandom")
    assert eq.id == by.id + "-sizesequal"
    assert "sizes" not in by.spec() and eq.spec()["sizes"] == "equal"
    assert from_spec(eq.spec()) == eq and from_spec(by.spec()) == by
