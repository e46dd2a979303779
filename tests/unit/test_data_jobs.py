"""pflrepro.data.jobs: the partition and public-set jobs on the digits data set."""

from pathlib import Path

import numpy as np
import pytest

from pflrepro.data.datasets import prepare_dataset
from pflrepro.data.jobs import make_partition, make_public
from pflrepro.data.partition import from_spec, read_partition
from pflrepro.data.public import public_split, read_public
from pflrepro.data.store import load_dataset


@pytest.fixture(scope="module")
def digits(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("data") / "digits"
    prepare_dataset("digits", out, out.parent / "raw")
    return out


def test_make_partition_writes_the_schemes_split(digits: Path, tmp_path: Path) -> None:
    spec = {"scheme": "iid", "clients": 3}
    out = tmp_path / "split0.parquet"
    make_partition(digits, "digits", spec, 0, out)
    frame, _ = read_partition(str(out))
    data = load_dataset(digits)
    expected = from_spec(spec).split(data.y[:], data.meta.num_classes, 0)
    assert sorted(frame["client"].unique()) == [0, 1, 2]
    assert frame.reset_index(drop=True).equals(expected.reset_index(drop=True))


def test_make_public_avoids_the_clients_rows(digits: Path, tmp_path: Path) -> None:
    part = tmp_path / "split0.parquet"
    make_partition(digits, "digits", {"scheme": "iid", "clients": 2, "max_samples": 600},
                   0, part)
    clients = read_partition(str(part))[0]["index"].to_numpy()
    out = tmp_path / "public.parquet"
    make_public(digits, 50, 3, out, exclude_partition=part)
    rows, meta = read_public(str(out))
    assert meta == {"dataset": "digits", "seed": 3, "size": 50}
    assert len(rows) == 50 and not np.isin(rows, clients).any()
    size = load_dataset(digits).meta.size  # 1797 digits, 600 held by the clients
    assert np.array_equal(rows, public_split(size, 50, 3, exclude=clients))
    whole = tmp_path / "whole.parquet"  # no partition: any row may be drawn
    make_public(digits, 50, 3, whole)
    assert np.array_equal(read_public(str(whole))[0], public_split(size, 50, 3))
