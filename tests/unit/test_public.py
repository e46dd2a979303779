import numpy as np
import pytest

from pflrepro.data.public import public_split, read_public, write_public

SEEDS = range(10)


@pytest.mark.parametrize("seed", SEEDS)
def test_disjoint_sorted_unique(seed):
    exclude = np.random.default_rng(seed).choice(1000, size=600, replace=False)
    rows = public_split(1000, 200, seed, exclude)
    assert rows.dtype == np.int64 and len(rows) == 200
    assert (np.diff(rows) > 0).all()  # sorted, no repeats
    assert rows.min() >= 0 and rows.max() < 1000
    assert not set(rows.tolist()) & set(exclude.tolist())


@pytest.mark.parametrize("seed", SEEDS)
def test_determinism(seed):
    labels = np.arange(500) % 10
    a = public_split(labels, 50, seed)
    np.testing.assert_array_equal(a, public_split(500, 50, seed))  # labels: only the length
    assert not np.array_equal(a, public_split(500, 50, seed + 1))


def test_uses_every_free_row_when_asked():
    exclude = np.arange(0, 100, 2)
    np.testing.assert_array_equal(public_split(100, 50, 0, exclude), np.arange(1, 100, 2))


def test_roughly_uniform():
    hits = np.zeros(100)
    for seed in range(400):
        hits[public_split(100, 10, seed)] += 1
    assert hits.min() > 15 and hits.max() < 70  # expected 40 each


@pytest.mark.parametrize("size", [0, -1, 2.5, True])
def test_bad_size(size):
    with pytest.raises(ValueError, match="size must be an integer >= 1"):
        public_split(100, size, 0)


def test_too_large():
    with pytest.raises(ValueError, match="only 40 of 100 rows"):
        public_split(100, 41, 0, np.arange(60))
    with pytest.raises(ValueError, match="only 10 of 10 rows"):
        public_split(10, 11, 0)


def test_bad_exclude():
    with pytest.raises(ValueError, match="outside 0..9"):
        public_split(10, 2, 0, np.array([10]))
    with pytest.raises(ValueError, match="outside"):
        public_split(10, 2, 0, np.array([-1]))
    with pytest.raises(ValueError, match="integers"):
        public_split(10, 2, 0, np.array([1.0]))
    with pytest.raises(ValueError, match="at least one row"):
        public_split(0, 1, 0)


def test_write_read_round_trip(tmp_path):
    rows = public_split(2000, 100, 3)
    path = tmp_path / "sub" / "public.parquet"
    write_public(rows, str(path), dataset="cifar100", seed=3)
    back, meta = read_public(str(path))
    np.testing.assert_array_equal(back, rows)
    assert back.dtype == np.int64
    assert meta == {"dataset": "cifar100", "seed": 3, "size": 100}
    assert sorted(p.name for p in path.parent.iterdir()) == [".digests", "public.parquet"]
    assert (path.parent / ".digests" / "public.parquet.sha256").is_file()
