"""benchmarks/perfedckt_partitions.py: each partition reading by hand, and top_up is the scheme."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO / "benchmarks") not in sys.path:
    sys.path.insert(0, str(REPO / "benchmarks"))

import perfedckt_partitions as pp  # noqa: E402

from pflrepro.data.partition import from_spec  # noqa: E402
from pflrepro.data.schemes.dirichlet import DirichletPartitioner  # noqa: E402
from pflrepro.seeding import NO_CLIENT, SETUP_ROUND, numpy_generator  # noqa: E402

LABELS = np.random.default_rng(7).permutation(np.repeat(np.arange(10), 60))  # 600 rows


class OneHot:
    """A generator stand-in: every Dirichlet draw puts all mass on its first entry."""

    def __init__(self) -> None:
        self.picks: list[int] = []

    def dirichlet(self, alpha):
        p = np.zeros(len(alpha))
        p[0] = 1.0
        return p

    def integers(self, n):
        self.picks.append(n)
        return 0


def test_top_up_reading_is_the_dirichlet_scheme() -> None:
    spec = {"scheme": "dirichlet", "clients": 40, "alpha": 0.01, "min_samples": 5}
    for seed in range(3):
        ours = from_spec(spec).split(LABELS, 10, seed)
        built = pp.build("top_up", LABELS, 40, 0.01, seed)
        assert pp.given(built).split(LABELS, 10, seed).equals(ours)


def test_uncapped_draw_with_the_schemes_stream_is_the_schemes_draw() -> None:
    sizes = np.bincount(LABELS)
    rng = numpy_generator(4, SETUP_ROUND, NO_CLIENT, pp.DRAW_STREAM)
    np.testing.assert_array_equal(
        pp.per_class_draw(sizes, 30, 0.01, rng),
        DirichletPartitioner(clients=30, alpha=0.01).draw_counts(sizes, 4))


def test_balance_cap_by_hand() -> None:
    sizes = np.array([4, 4])
    # uncapped: both classes on client 0
    np.testing.assert_array_equal(pp.per_class_draw(sizes, 2, 0.01, OneHot()),
                                  [[4, 4], [0, 0]])
    # capped: client 0 holds 4 = N/K after class 0, so class 1 goes to the open client 1
    rng = OneHot()
    np.testing.assert_array_equal(pp.per_class_draw(sizes, 2, 0.01, rng, cap=True),
                                  [[4, 0], [0, 4]])
    assert rng.picks == [1]  # one open client to choose from


def test_per_client_draw_by_hand() -> None:
    # sizes 3 and 3; client 0 takes 3 of class 0; client 1 wants 3 of class 0, finds 1,
    # and draws a fresh mix over the classes left (class 1) for the other 2
    np.testing.assert_array_equal(pp.per_client_table(np.array([4, 2]), 2, 0.01, OneHot()),
                                  [[3, 0], [1, 2]])
    table = pp.per_client_table(np.bincount(LABELS), 8, 0.01,
                                numpy_generator(0, SETUP_ROUND, NO_CLIENT, "t"))
    np.testing.assert_array_equal(table.sum(axis=1), 75)  # equal sizes N / K
    np.testing.assert_array_equal(table.sum(axis=0), 60)  # every sample dealt once


def test_redraw_returns_the_first_passing_table_and_counts_passes() -> None:
    tables = [np.array([[5], [1]]), np.array([[3], [3]]), np.array([[2], [4]]),
              np.array([[4], [2]])]
    table, passes = pp.redraw(lambda a: tables[a], 2, 4)
    np.testing.assert_array_equal(table, tables[1])
    assert passes == 3  # smallest clients 1, 3, 2, 2
    assert pp.redraw(lambda a: tables[a], 4, 4) == (None, 0)


def test_deal_keeps_class_order_for_feddf() -> None:
    labels = np.array([1, 0, 1, 0, 1, 0])
    table = np.array([[1, 2], [2, 1]])
    rng = numpy_generator(0, SETUP_ROUND, NO_CLIENT, "t")
    lists = pp.deal(labels, table, rng, ordered=False)
    assert [labels[x].tolist() for x in lists] == [[0, 1, 1], [0, 0, 1]]
    assert sorted(np.concatenate(lists).tolist()) == list(range(6))


def test_drop_keeps_the_clients_the_draw_gave_five_samples() -> None:
    sizes = np.bincount(LABELS)
    drawn = DirichletPartitioner(clients=40, alpha=0.01).draw_counts(sizes, 1).sum(axis=1)
    built = pp.build("drop", LABELS, 40, 0.01, 1)
    assert sorted(len(x) for x in built.indices) == sorted(drawn[drawn >= 5].tolist())
    assert len(built.indices) < 40  # at this alpha some clients get nothing


def test_redrawing_readings_that_cannot_pass_give_no_partition() -> None:
    for reading in ("resample", "hetero_dir"):
        built = pp.build(reading, LABELS, 60, 0.01, 0, attempts=20)
        assert built.indices is None and built.passes == 0 and built.attempts == 20


def test_feddf_gives_equal_consecutive_pieces() -> None:
    built = pp.build("feddf", LABELS, 20, 0.01, 0)
    assert [len(x) for x in built.indices] == [30] * 20  # int(N / K) each
    flat = np.concatenate(built.indices)
    assert len(np.unique(flat)) == 600
    assert built.attempts == 2 * 1000 and built.passes >= 2  # two groups of 10 clients
    # a piece may straddle two drawn clients, so fewer pieces hold one class than
    # pieces of a per-client draw of the same sizes
    one_class = sum(len(np.unique(LABELS[x])) == 1 for x in built.indices)
    assert one_class < 20


@pytest.mark.parametrize("reading", pp.READINGS)
def test_every_reading_is_a_partition_and_deterministic(reading: str) -> None:
    a = pp.build(reading, LABELS, 20, 0.01, 2, attempts=50)
    b = pp.build(reading, LABELS, 20, 0.01, 2, attempts=50)
    assert (a.passes, a.attempts) == (b.passes, b.attempts)
    if a.indices is None:
        assert b.indices is None
        return
    for x, y in zip(a.indices, b.indices, strict=True):
        np.testing.assert_array_equal(x, y)
    flat = np.concatenate(a.indices)
    assert len(np.unique(flat)) == len(flat) <= 600


def test_unknown_reading_raises() -> None:
    with pytest.raises(ValueError, match="unknown partition reading"):
        pp.build("per_pixel", LABELS, 20, 0.01, 0)
