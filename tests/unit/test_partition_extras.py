"""Extras passed to partitioners, extra per-row columns, and require_extra."""

import dataclasses

import numpy as np
import pandas as pd
import pytest

from pflrepro.data.partition import (
    Assignment,
    Partitioner,
    from_spec,
    read_partition,
    require_extra,
    schema_properties,
    write_partition,
)
from pflrepro.data.schemes.iid import IIDPartitioner
from pflrepro.data.schemes.rotation import RotationPartitioner


@dataclasses.dataclass(frozen=True)
class _Echo(Partitioner):
    """Two clients; records the extras it saw in an extra column."""

    scheme = "echo"

    def assign(self, labels, num_classes, seed, *, extras=None):
        tag = require_extra(extras, "tag", len(labels), "echo needs tags")
        idx = [np.arange(0, 4), np.arange(4, 8)]
        return Assignment(indices=idx, groups=[-1, -1],
                          columns={"tag": [tag[i].astype(np.int16) for i in idx]})


@dataclasses.dataclass(frozen=True)
class _BadColumn(Partitioner):
    scheme = "bad_column"
    column: str = "group"
    length: int = 2

    def assign(self, labels, num_classes, seed, *, extras=None):
        idx = [np.arange(0, 4), np.arange(4, 8)]
        return Assignment(indices=idx, groups=[-1, -1],
                          columns={self.column: [np.zeros(self.length), np.zeros(4)]})


LABELS = np.zeros(8, dtype=np.int64)


def test_extras_reach_assign_and_columns_keep_dtype():
    tags = np.arange(10, 18)
    frame = _Echo(clients=2).split(LABELS, 1, seed=0, extras={"tag": tags})
    assert list(frame.columns) == ["client", "index", "split", "group", "tag"]
    assert frame["tag"].dtype == np.int16
    np.testing.assert_array_equal(frame["tag"].to_numpy(), tags[frame["index"].to_numpy()])


def test_missing_extra_uses_the_message():
    with pytest.raises(ValueError, match="echo needs tags"):
        _Echo(clients=2).split(LABELS, 1, seed=0)
    with pytest.raises(ValueError, match="echo needs tags"):
        _Echo(clients=2).split(LABELS, 1, seed=0, extras={"other": np.zeros(8, dtype=int)})


def test_require_extra_checks_shape_and_dtype():
    with pytest.raises(ValueError, match="shape"):
        require_extra({"w": np.zeros(3, dtype=int)}, "w", 4, "absent")
    with pytest.raises(ValueError, match="integers"):
        require_extra({"w": np.zeros(4)}, "w", 4, "absent")
    out = require_extra({"w": np.arange(4, dtype=np.int32)}, "w", 4, "absent")
    assert out.dtype == np.int64


def test_schemes_without_extras_ignore_them():
    p = IIDPartitioner(clients=3)
    labels = np.arange(30) % 3
    pd.testing.assert_frame_equal(p.split(labels, 3, 1),
                                  p.split(labels, 3, 1, extras={"writer": np.arange(30)}))


@pytest.mark.parametrize("column, length, message", [
    ("group", 4, "clashes"),
    ("tag", 3, "shape"),
])
def test_bad_extra_columns(column, length, message):
    with pytest.raises(AssertionError, match=message):
        _BadColumn(clients=2, column=column, length=length).split(LABELS, 1, 0)


def test_extra_column_round_trips_through_parquet(tmp_path):
    p = RotationPartitioner(clients=4, groups=2, angles=(0, 270))
    frame = p.split(np.arange(40) % 4, 4, seed=2)
    path = tmp_path / "p.parquet"
    write_partition(frame, str(path), partitioner=p, dataset="toy", seed=2)
    back, meta = read_partition(str(path))
    pd.testing.assert_frame_equal(back, frame)
    assert back["rotation"].dtype == np.int16
    assert from_spec(meta["spec"]) == p  # the angles list from JSON becomes a tuple again


def test_tuple_field_schema():
    props = schema_properties(RotationPartitioner)
    assert props["angles"]["type"] == "array"
    assert props["angles"]["items"] == {"type": "integer"}
