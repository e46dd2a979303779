import numpy as np
import pandas as pd
import pytest
from _partition_checks import check_partition, labels_per_client

from pflrepro.data.schemes import dirichlet as dirichlet_module
from pflrepro.data.schemes.dirichlet import DirichletPartitioner, apportion, top_up

SEEDS = range(10)
SMALL = np.random.default_rng(3).permutation(np.repeat(np.arange(10), 50))  # 500 samples
CIFAR = np.repeat(np.arange(10), 5000)  # CIFAR-10-sized




@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("alpha", [0.01, 0.1, 0.5])
@pytest.mark.parametrize("clients", [5, 20, 100])
def test_invariants_small(seed, alpha, clients):
    frame = DirichletPartitioner(clients=clients, alpha=alpha).split(SMALL, 10, seed)
    check_partition(frame, clients, len(SMALL))
    assert len(frame) == len(SMALL)  # the draw uses every sample; repair only moves
    assert (frame["group"] == -1).all()


@pytest.mark.parametrize("clients", [10, 20, 100])
def test_cifar_alpha_001_terminates_usable_and_skewed(clients):
    p = DirichletPartitioner(clients=clients, alpha=0.01)
    frame = p.split(CIFAR, 10, seed=0)
    check_partition(frame, clients, len(CIFAR))
    sizes = frame.groupby("client").size()
    assert sizes.min() >= 2
    assert sizes.max() / sizes.min() >= 1000
    assert labels_per_client(frame, CIFAR).median() <= 2
    # the draw itself leaves clients short at this alpha; the repair moved only a few samples
    drawn = p.draw_counts(np.bincount(CIFAR), seed=0)
    final = frame.assign(label=CIFAR[frame["index"]]).groupby(["client", "label"]).size()
    final = final.unstack(fill_value=0).reindex(columns=range(10), fill_value=0).to_numpy()
    moved = np.clip(final - drawn, 0, None).sum()
    assert moved <= 2 * clients


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("alpha", [0.1, 0.5])
@pytest.mark.parametrize("clients", [10, 20, 100])
def test_cifar_larger_alpha(seed, alpha, clients):
    frame = DirichletPartitioner(clients=clients, alpha=alpha).split(CIFAR, 10, seed)
    check_partition(frame, clients, len(CIFAR))
    assert len(frame) == len(CIFAR)


def test_skew_decreases_with_alpha():
    mean_labels = [labels_per_client(DirichletPartitioner(clients=20, alpha=a)
                                     .split(CIFAR, 10, 0), CIFAR).mean()
                   for a in (0.01, 0.1, 0.5, 100.0)]
    assert mean_labels == sorted(mean_labels)
    assert mean_labels[0] < 2.5 and mean_labels[-1] == 10


def test_extreme_alpha_tight_data_terminates():
    labels = np.repeat(np.arange(2), 100)  # 200 samples, exactly 2 per client
    frame = DirichletPartitioner(clients=100, alpha=1e-6).split(labels, 2, seed=1)
    check_partition(frame, 100, len(labels))
    assert (frame.groupby("client").size() == 2).all()


@pytest.mark.parametrize("seed", SEEDS)
def test_determinism(seed):
    p = DirichletPartitioner(clients=20, alpha=0.1)
    pd.testing.assert_frame_equal(p.split(SMALL, 10, seed), p.split(SMALL, 10, seed))
    assert not p.split(SMALL, 10, seed).equals(p.split(SMALL, 10, seed + 1))


def test_min_samples_field():
    frame = DirichletPartitioner(clients=50, alpha=0.01, min_samples=5).split(CIFAR, 10, 0)
    assert frame.groupby("client").size().min() >= 5


def test_apportion():
    assert apportion(10, np.array([0.5, 0.5])).tolist() == [5, 5]
    assert apportion(7, np.array([1.0, 0.0, 0.0])).tolist() == [7, 0, 0]
    assert apportion(5, np.full(3, 1 / 3)).tolist() == [2, 2, 1]
    assert apportion(10, np.array([0.26, 0.34, 0.4])).tolist() == [3, 3, 4]
    assert apportion(0, np.array([0.2, 0.8])).tolist() == [0, 0]


def test_top_up_by_hand():
    table = np.array([[10, 0], [0, 0], [0, 1]])
    top_up(table, 2)
    # client 1 (empty): two of the largest client's top class; client 2 holds class 1,
    # which no one can give, so one sample of the largest client's top class.
    assert table.tolist() == [[7, 0], [2, 0], [1, 1]]


def test_top_up_prefers_own_class():
    table = np.array([[8, 0, 0], [0, 5, 0], [0, 1, 0]])
    top_up(table, 3)
    assert table.tolist() == [[8, 0, 0], [0, 3, 0], [0, 3, 0]]


def test_top_up_never_starves_donors():
    rng = np.random.default_rng(0)
    for _ in range(50):
        table = rng.multinomial(40, rng.dirichlet(np.full(20, 0.05)), size=1).reshape(4, 5)
        table = np.vstack([table, np.zeros((16, 5), dtype=int)])
        before = table.sum()
        top_up(table, 2)
        assert table.sum() == before and table.min() >= 0
        assert (table.sum(axis=1) >= 2).all()


class _DegenerateRng:
    """A generator whose Dirichlet draws are NaN or all-zero; everything else is real."""

    def __init__(self, inner: np.random.Generator) -> None:
        self.inner = inner
        self.calls = 0

    def dirichlet(self, alpha):
        self.calls += 1
        return np.full(len(alpha), np.nan if self.calls % 2 else 0.0)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_nan_and_zero_draws_are_handled(monkeypatch):
    real = dirichlet_module.numpy_generator
    monkeypatch.setattr(dirichlet_module, "numpy_generator",
                        lambda *args: _DegenerateRng(real(*args)))
    p = DirichletPartitioner(clients=20, alpha=0.01)
    table = p.draw_counts(np.bincount(SMALL), seed=0)
    assert ((table > 0).sum(axis=0) == 1).all()  # each class on one client
    assert (table.sum(axis=0) == 50).all()
    frame = p.split(SMALL, 10, seed=0)
    check_partition(frame, 20, len(SMALL))


@pytest.mark.parametrize("kwargs, message", [
    ({"clients": 5, "alpha": 0.0}, "alpha must be a finite number > 0"),
    ({"clients": 5, "alpha": -1.0}, "alpha must be"),
    ({"clients": 5, "alpha": float("nan")}, "alpha must be"),
    ({"clients": 5, "alpha": float("inf")}, "alpha must be"),
    ({"clients": 5, "alpha": 0.1, "min_samples": 1}, "min_samples must be >= 2"),
])
def test_parameter_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        DirichletPartitioner(**kwargs)


def test_impossible_only_when_too_few_samples():
    with pytest.raises(ValueError, match="21 samples cannot give 11 clients 2 samples"):
        DirichletPartitioner(clients=11, alpha=0.01).split(np.zeros(21, dtype=int), 1, 0)
    frame = DirichletPartitioner(clients=11, alpha=0.01).split(np.zeros(22, dtype=int), 1, 0)
    check_partition(frame, 11, 22)


def test_labels_out_of_range():
    with pytest.raises(ValueError, match="labels must lie"):
        DirichletPartitioner(clients=2, alpha=0.5).split(np.arange(20) % 5, 3, 0)
