"""pflrepro.data.federated: FederatedData.build normalises, remaps rows to clients and
applies the partition's per-row rotation and target columns."""

import numpy as np
import pandas as pd
import pytest
import torch

from pflrepro.data.federated import FederatedData
from pflrepro.data.store import ArrayDataset, DatasetMeta, load_dataset, write_dataset

CPU = torch.device("cpu")
# image r holds r*10 + [[1, 2], [3, 4]]; mean 0, std 1, max_value 1: values stay as they are
X = (np.arange(6).reshape(6, 1, 1, 1) * 10 + np.array([[1, 2], [3, 4]])).astype(np.uint8)
Y = np.array([0, 1, 2, 0, 1, 2])


def dataset(x: np.ndarray = X, y: np.ndarray = Y) -> ArrayDataset:
    meta = DatasetMeta(name="toy", num_classes=3, shape=tuple(x.shape[1:]), mean=(0.0,),
                       std=(1.0,), max_value=1, size=len(x), x_sha256="", y_sha256="",
                       source="test")
    return ArrayDataset(x=x, y=y, meta=meta)


def table(**extra) -> pd.DataFrame:
    frame = pd.DataFrame({
        "client": np.array([0, 0, 1, 1], dtype=np.int32),
        "index": np.array([4, 1, 2, 5], dtype=np.int64),
        "split": pd.array(["train", "test", "train", "test"], dtype="string"),
        "group": np.array([0, 0, 1, 1], dtype=np.int32),
    })
    for name, values in extra.items():
        frame[name] = values
    return frame


def image_of(data: FederatedData, client: int, split: str) -> np.ndarray:
    idx = (data.train if split == "train" else data.test)[client]
    assert len(idx) == 1
    return data.x[idx[0], 0].numpy()


def test_no_transform_columns_keep_images_and_labels():
    data = FederatedData.build(dataset(), table(), CPU)
    np.testing.assert_array_equal(image_of(data, 0, "train"), [[41, 42], [43, 44]])
    assert data.y[data.train[1]].tolist() == [2]


def test_quarter_turns_by_hand():
    rotation = np.array([90, 180, 270, 0], dtype=np.int16)  # rows 4, 1, 2, 5
    data = FederatedData.build(dataset(), table(rotation=rotation), CPU)
    # [[a, b], [c, d]] turned 90 degrees counter-clockwise is [[b, d], [a, c]]
    np.testing.assert_array_equal(image_of(data, 0, "train"), [[42, 44], [41, 43]])
    np.testing.assert_array_equal(image_of(data, 0, "test"), [[14, 13], [12, 11]])  # 180
    np.testing.assert_array_equal(image_of(data, 1, "train"), [[23, 21], [24, 22]])  # 270
    np.testing.assert_array_equal(image_of(data, 1, "test"), [[51, 52], [53, 54]])  # 0
    assert data.y.tolist() == [1, 2, 1, 2]  # labels untouched (rows 1, 2, 4, 5)


def test_rotation_matches_numpy_rot90_on_larger_images():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, size=(6, 3, 5, 5), dtype=np.uint8)
    rotation = np.array([90, 270, 180, 90], dtype=np.int16)
    data = FederatedData.build(dataset(x), table(rotation=rotation), CPU)
    for client, split, row, angle in ((0, "train", 4, 90), (0, "test", 1, 270),
                                      (1, "train", 2, 180), (1, "test", 5, 90)):
        idx = (data.train if split == "train" else data.test)[client][0]
        expected = np.rot90(x[row].astype(np.float32), angle // 90, axes=(1, 2))
        np.testing.assert_array_equal(data.x[idx].numpy(), expected)


def test_targets_override_labels():
    target = np.array([2, 0, 1, 1], dtype=np.int64)  # rows 4, 1, 2, 5
    data = FederatedData.build(dataset(), table(target=target), CPU)
    assert data.y[data.train[0]].tolist() == [2]
    assert data.y[data.test[0]].tolist() == [0]
    assert data.y[data.train[1]].tolist() == [1]
    assert data.y[data.test[1]].tolist() == [1]
    assert data.y.dtype == torch.int64


def test_target_out_of_range():
    with pytest.raises(ValueError, match="'target' must lie in 0..2"):
        FederatedData.build(dataset(), table(target=np.array([0, 1, 2, 3])), CPU)


def test_rotation_needs_square_images():
    x = np.zeros((6, 1, 2, 3), dtype=np.uint8)
    with pytest.raises(ValueError, match="square images"):
        FederatedData.build(dataset(x), table(rotation=np.array([0, 90, 0, 0])), CPU)
    # no turn at all is fine on any shape
    FederatedData.build(dataset(x), table(rotation=np.array([0, 0, 0, 0])), CPU)


def test_rotation_must_be_quarter_turns():
    with pytest.raises(ValueError, match="multiples of 90"):
        FederatedData.build(dataset(), table(rotation=np.array([0, 45, 0, 0])), CPU)


def test_conflicting_values_for_a_repeated_row():
    frame = table(rotation=np.array([90, 0, 0, 0]))
    frame.loc[3, "index"] = 4  # row 4 twice, with rotation 90 and 0
    with pytest.raises(ValueError, match="two different 'rotation' values"):
        FederatedData.build(dataset(), frame, CPU)
    frame["rotation"] = np.array([90, 0, 0, 90])  # the same value twice is well-defined
    data = FederatedData.build(dataset(), frame, CPU)
    np.testing.assert_array_equal(image_of(data, 1, "test"), [[42, 44], [41, 43]])


# ------------------------------------------------------------------ build

# 8 images of shape (1, 1, 2), values 0 or 4 with max_value 4: on the [0, 1] scale
# half the pixels are 0 and half are 1, so mean = 0.5 and std = 0.5, and the
# normalised pixels are (x/4 - 0.5)/0.5 = -1 (for 0) or +1 (for 4).
X8 = np.array([[0, 4], [4, 0], [0, 0], [4, 4], [0, 4], [4, 0], [4, 4], [0, 0]],
              dtype=np.uint8).reshape(8, 1, 1, 2)
Y8 = np.array([0, 1, 2, 0, 1, 2, 0, 1])


def _dataset(tmp_path):
    write_dataset(tmp_path / "ds", X8, Y8, name="toy", num_classes=3, max_value=4,
                  source="test")
    return load_dataset(tmp_path / "ds")


def test_build_normalises_and_remaps(tmp_path):
    ds = _dataset(tmp_path)
    assert ds.meta.mean == pytest.approx((0.5,)) and ds.meta.std == pytest.approx((0.5,))
    # rows 0 and 3 are not used by the partition
    part = pd.DataFrame({
        "client": np.array([0, 0, 0, 1, 1, 1], dtype=np.int32),
        "index": np.array([5, 1, 2, 7, 4, 6], dtype=np.int64),
        "split": pd.array(["train", "train", "test", "train", "train", "test"], dtype="string"),
        "group": np.array([1, 1, 1, 0, 0, 0], dtype=np.int32),
    })
    data = FederatedData.build(ds, part, CPU)
    # resident rows: used = [1, 2, 4, 5, 6, 7] -> positions 0..5
    assert data.x.shape == (6, 1, 1, 2) and data.x.dtype == torch.float32
    assert data.y.dtype == torch.int64 and data.y.tolist() == Y8[[1, 2, 4, 5, 6, 7]].tolist()
    assert data.num_clients == 2 and data.num_classes == 3
    assert data.groups == (1, 0)
    # client 0: train rows 5, 1 -> positions 3, 0 (sorted [0, 3]); test row 2 -> 1
    assert data.train[0].tolist() == [0, 3] and data.test[0].tolist() == [1]
    # client 1: train rows 7, 4 -> positions 5, 2; test row 6 -> 4
    assert data.train[1].tolist() == [2, 5] and data.test[1].tolist() == [4]
    for k, (tr, te) in enumerate([([1, 5], [2]), ([4, 7], [6])]):
        expected = torch.from_numpy(X8[tr].astype(np.float32)) / 2 - 1  # 0 -> -1, 4 -> 1
        assert torch.equal(data.x[data.train[k]], expected)
        assert data.y[data.train[k]].tolist() == Y8[tr].tolist()
        assert data.y[data.test[k]].tolist() == Y8[te].tolist()
    # row 1 is [4, 0] -> [+1, -1]
    assert data.x[0].flatten().tolist() == [1.0, -1.0]


def test_build_general_formula(tmp_path):
    # values 0..16 with max_value 16 (digits-like): (x/16 - mean)/std, mean/std of all rows
    rng = np.random.default_rng(0)
    x = rng.integers(0, 17, size=(10, 2, 2, 2)).astype(np.uint8)
    write_dataset(tmp_path / "d", x, np.arange(10) % 2, name="t", num_classes=2,
                  max_value=16, source="test")
    ds = load_dataset(tmp_path / "d")
    part = pd.DataFrame({"client": np.zeros(10, dtype=np.int32), "index": np.arange(10),
                         "split": ["train"] * 8 + ["test"] * 2,
                         "group": np.full(10, -1, dtype=np.int32)})
    data = FederatedData.build(ds, part, CPU)
    scaled = x.astype(np.float64) / 16
    mean = scaled.mean(axis=(0, 2, 3)).reshape(1, 2, 1, 1)
    std = scaled.std(axis=(0, 2, 3)).reshape(1, 2, 1, 1)
    np.testing.assert_allclose(data.x.numpy(), (scaled - mean) / std, atol=1e-5)
    assert data.groups == (-1,)


def test_build_rejects_missing_client(tmp_path):
    ds = _dataset(tmp_path)
    part = pd.DataFrame({"client": np.array([0, 0, 2, 2], dtype=np.int32),
                         "index": np.array([0, 1, 2, 3]),
                         "split": ["train", "test", "train", "test"],
                         "group": np.full(4, -1, dtype=np.int32)})
    with pytest.raises(ValueError, match="no samples for client 1"):
        FederatedData.build(ds, part, CPU)
