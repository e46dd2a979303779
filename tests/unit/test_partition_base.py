import dataclasses

import numpy as np
import pandas as pd
import pytest

from pflrepro.data.partition import (
    PARTITIONERS,
    Assignment,
    Partitioner,
    from_spec,
    read_partition,
    register_partitioner,
    schema_properties,
    write_partition,
)
from pflrepro.data.partition import test_size as size_of_test
from pflrepro.data.schemes.dirichlet import DirichletPartitioner
from pflrepro.data.schemes.iid import IIDPartitioner
from pflrepro.data.schemes.label_groups import LabelGroupsPartitioner

BASE_FIELDS = {"clients", "test_fraction", "max_samples"}


def test_all_schemes_registered():
    assert set(PARTITIONERS) == {"iid", "label_groups", "dirichlet", "pathological",
                                 "practical", "rotation", "label_permutation", "natural",
                                 "domains"}


@pytest.mark.parametrize("scheme", sorted(PARTITIONERS))
def test_every_new_field_is_documented(scheme):
    cls = PARTITIONERS[scheme]
    new = {f.name for f in dataclasses.fields(cls)} - BASE_FIELDS
    assert set(cls.docs) == new
    props = schema_properties(cls)
    for name in new:
        assert props[name]["description"] == cls.docs[name]
        assert props[name]["type"] in ("integer", "number", "array", "string")


def test_id_format():
    assert IIDPartitioner(clients=5).id == "iid-clients5-test_fraction0.2-max_samples0"
    assert (LabelGroupsPartitioner(clients=8, groups=4).id
            == "label_groups-clients8-test_fraction0.2-max_samples0-groups4-alpha0.0"
               "-assignmentrandom")
    assert (DirichletPartitioner(clients=10, alpha=0.01).id
            == "dirichlet-clients10-test_fraction0.2-max_samples0-alpha0.01-min_samples2")
    for scheme, cls in PARTITIONERS.items():
        assert cls.__dataclass_params__.frozen
        assert scheme == cls.scheme


def test_id_differs_with_parameters():
    ids = {DirichletPartitioner(clients=10, alpha=a).id for a in (0.01, 0.1, 0.5)}
    assert len(ids) == 3


def test_from_spec_round_trip():
    p = from_spec({"scheme": "label_groups", "clients": 8, "groups": 4, "alpha": 0.4})
    assert isinstance(p, LabelGroupsPartitioner)
    assert from_spec(p.spec()) == p
    assert p.spec() == {"scheme": "label_groups", "clients": 8, "test_fraction": 0.2,
                        "max_samples": 0, "groups": 4, "alpha": 0.4, "assignment": "random"}


def test_from_spec_unknown_scheme():
    with pytest.raises(ValueError, match="unknown partition scheme 'nope'"):
        from_spec({"scheme": "nope", "clients": 3})
    with pytest.raises(ValueError, match="unknown partition scheme None"):
        from_spec({"clients": 3})


def test_from_spec_unknown_key():
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['beta'\]"):
        from_spec({"scheme": "dirichlet", "clients": 3, "alpha": 0.1, "beta": 1})


def test_from_spec_missing_required_field():
    # a TypeError ("missing 1 required positional argument") reached the user as a traceback
    with pytest.raises(ValueError, match="partition scheme 'dirichlet' needs alpha"):
        from_spec({"scheme": "dirichlet", "clients": 3})


@pytest.mark.parametrize("kwargs, message", [
    ({"clients": 0}, "clients must be >= 1"),
    ({"clients": 3, "test_fraction": 0.0}, "test_fraction"),
    ({"clients": 3, "test_fraction": 1.0}, "test_fraction"),
])
def test_base_validation(kwargs, message):
    with pytest.raises(ValueError, match=message):
        IIDPartitioner(**kwargs)


def test_register_twice_fails():
    @dataclasses.dataclass(frozen=True)
    class Twin(IIDPartitioner):
        pass

    before = dict(PARTITIONERS)
    with pytest.raises(ValueError, match="registered twice"):
        register_partitioner(Twin)
    assert PARTITIONERS == before


def test_write_read_round_trip(tmp_path):
    labels = np.repeat(np.arange(4), 10)
    p = LabelGroupsPartitioner(clients=4, groups=2)
    frame = p.split(labels, 4, seed=3)
    path = tmp_path / "sub" / "partition.parquet"
    write_partition(frame, str(path), partitioner=p, dataset="toy", seed=3)
    back, meta = read_partition(str(path))
    pd.testing.assert_frame_equal(back, frame)
    assert meta == {"dataset": "toy", "seed": 3, "spec": p.spec(), "id": p.id}
    assert from_spec(meta["spec"]) == p
    assert sorted(x.name for x in path.parent.iterdir()) == [".digests", "partition.parquet"]
    assert (path.parent / ".digests" / "partition.parquet.sha256").is_file()


@pytest.mark.parametrize("n, fraction, expected", [
    (0, 0.2, 0), (1, 0.2, 0), (2, 0.2, 1), (2, 0.99, 1), (3, 0.2, 1), (10, 0.2, 2),
    (5, 0.9, 4), (100, 0.5, 50), (1000, 0.001, 1), (4, 0.01, 1),
])
def test_test_size(n, fraction, expected):
    assert size_of_test(n, fraction) == expected


def test_test_size_keeps_a_train_sample():
    for n in range(2, 60):
        for fraction in (0.01, 0.2, 0.5, 0.8, 0.99):
            assert 1 <= size_of_test(n, fraction) <= n - 1


@dataclasses.dataclass(frozen=True)
class _Broken(Partitioner):
    scheme = "broken"

    def assign(self, labels, num_classes, seed, *, extras=None):
        return Assignment(indices=[np.arange(2), np.arange(1, 3)], groups=[-1, -1])


@dataclasses.dataclass(frozen=True)
class _Short(Partitioner):
    scheme = "short"

    def assign(self, labels, num_classes, seed, *, extras=None):
        return Assignment(indices=[np.arange(2)], groups=[-1])


def test_split_rejects_bad_assignments():
    labels = np.zeros(10, dtype=int)
    with pytest.raises(AssertionError, match="two clients"):
        _Broken(clients=2).split(labels, 1, 0)
    with pytest.raises(AssertionError, match="expected 2"):
        _Short(clients=2).split(labels, 1, 0)


def test_split_columns_and_dtypes():
    frame = IIDPartitioner(clients=3).split(np.zeros(30, dtype=int), 1, seed=0)
    assert list(frame.columns) == ["client", "index", "split", "group"]
    assert frame["client"].dtype == np.int32
    assert frame["index"].dtype == np.int64
    assert frame["group"].dtype == np.int32
    assert frame["split"].dtype == "string"


def test_max_samples_partitions_a_seeded_subset() -> None:
    from pflrepro.data.partition import from_spec

    labels = np.repeat(np.arange(10), 100)  # 1000 samples
    p = from_spec({"scheme": "label_groups", "clients": 4, "groups": 2, "max_samples": 200})
    frame = p.split(labels, 10, seed=3)
    assert len(frame) == 200
    assert frame["index"].is_unique and frame["index"].max() < 1000
    again = p.split(labels, 10, seed=3)
    pd.testing.assert_frame_equal(frame, again)
    other = p.split(labels, 10, seed=4)
    assert set(frame["index"]) != set(other["index"])
    # clients still hold disjoint label groups of the subset
    by_client = frame.groupby("group")["index"].apply(lambda s: set(labels[s.to_numpy()]))
    assert not set.intersection(*by_client)
    full = from_spec({"scheme": "label_groups", "clients": 4, "groups": 2})
    assert len(full.split(labels, 10, seed=3)) == 1000
    with pytest.raises(ValueError, match="max_samples"):
        from_spec({"scheme": "iid", "clients": 2, "max_samples": -1})


@pytest.mark.parametrize("damage", ["truncate", "flip"])
def test_damaged_partition_is_set_aside_and_named(tmp_path, damage):
    # issue 17, item 5: a damaged partition must not stay in place, failing every job
    # that reads it: it is set aside, so that Snakemake writes it again
    from pflrepro.store.io import DAMAGED_MTIME, CorruptFileError

    p = LabelGroupsPartitioner(clients=4, groups=2)
    path = tmp_path / "results/partitions/toy" / p.id / "split0.parquet"
    write_partition(p.split(np.repeat(np.arange(4), 10), 4, seed=0), str(path),
                    partitioner=p, dataset="toy", seed=0)
    data = bytearray(path.read_bytes())
    if damage == "truncate":
        del data[len(data) // 2:]
    else:
        data[len(data) // 3] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptFileError) as info:
        read_partition(str(path))
    assert str(info.value).startswith(f"{path} is damaged")
    assert "rerun snakemake" in str(info.value)
    assert path.stat().st_mtime == DAMAGED_MTIME  # older than its inputs: rebuilt by snakemake
    assert path.with_name("split0.parquet.corrupt-1").read_bytes() == bytes(data)
