import numpy as np
import pandas as pd
import pytest
from _partition_checks import check_partition

from pflrepro.data.schemes.natural import NaturalPartitioner

SEEDS = range(10)
_rng = np.random.default_rng(11)
# 30 writers with 1..40 samples each, interleaved in the file as in a pooled data set
SIZES = np.concatenate([[1, 1, 2], _rng.integers(3, 41, size=27)])
WRITER = _rng.permutation(np.repeat(np.arange(30), SIZES))
LABELS = _rng.integers(0, 62, size=len(WRITER))
EXTRAS = {"writer": WRITER}



@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("clients, min_samples", [(1, 2), (10, 2), (28, 2), (5, 20)])
def test_invariants(seed, clients, min_samples):
    p = NaturalPartitioner(clients=clients, min_samples=min_samples)
    frame = p.split(LABELS, 62, seed, extras=EXTRAS)
    check_partition(frame, clients, len(LABELS))
    assert (frame["group"] == -1).all()
    writers = frame.groupby("client")["index"].agg(lambda i: set(WRITER[i].tolist()))
    assert all(len(w) == 1 for w in writers)  # one writer per client ...
    chosen = [next(iter(w)) for w in writers]
    assert chosen == sorted(set(chosen))  # ... distinct, in writer order
    for client, w in enumerate(chosen):  # ... holding all of its samples
        held = frame.loc[frame["client"] == client, "index"].to_numpy()
        assert sorted(held.tolist()) == np.flatnonzero(WRITER == w).tolist()
        assert SIZES[w] >= min_samples


def test_all_eligible_writers_regardless_of_seed():
    frames = [NaturalPartitioner(clients=28).split(LABELS, 62, s, extras=EXTRAS) for s in SEEDS]
    held = {frozenset(f["index"].tolist()) for f in frames}
    assert len(held) == 1
    assert held.pop() == frozenset(np.flatnonzero(SIZES[WRITER] >= 2).tolist())


def test_writer_sample_is_seeded():
    draws = {tuple(sorted(set(WRITER[NaturalPartitioner(clients=5).split(
        LABELS, 62, s, extras=EXTRAS)["index"]].tolist()))) for s in SEEDS}
    assert len(draws) > 1


@pytest.mark.parametrize("seed", SEEDS)
def test_determinism(seed):
    p = NaturalPartitioner(clients=8)
    a = p.split(LABELS, 62, seed, extras=EXTRAS)
    pd.testing.assert_frame_equal(a, p.split(LABELS, 62, seed, extras=EXTRAS))
    assert not a.equals(p.split(LABELS, 62, seed + 1, extras=EXTRAS))


def test_needs_writer_ids():
    message = "scheme natural needs a data set with writer ids, e.g. femnist"
    with pytest.raises(ValueError, match=message):
        NaturalPartitioner(clients=2).split(LABELS, 62, 0)
    with pytest.raises(ValueError, match=message):
        NaturalPartitioner(clients=2).split(LABELS, 62, 0, extras={"domain": WRITER})


def test_too_many_clients():
    with pytest.raises(ValueError, match="only 28 writers have >= 2 samples"):
        NaturalPartitioner(clients=29).split(LABELS, 62, 0, extras=EXTRAS)


def test_bad_writer_arrays():
    with pytest.raises(ValueError, match="shape"):
        NaturalPartitioner(clients=2).split(LABELS, 62, 0, extras={"writer": WRITER[:-1]})
    with pytest.raises(ValueError, match=">= 0"):
        NaturalPartitioner(clients=2).split(LABELS, 62, 0, extras={"writer": WRITER - 1})


def test_parameter_errors():
    with pytest.raises(ValueError, match="min_samples must be >= 2"):
        NaturalPartitioner(clients=2, min_samples=1)
