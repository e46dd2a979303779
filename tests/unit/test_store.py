import json

import numpy as np
import pytest

from pflrepro.data.store import (
    CorruptDataset,
    channel_stats,
    load_dataset,
    load_extras,
    write_dataset,
)
from pflrepro.store.io import write_digest


def toy(n: int = 50, shape=(3, 4, 4), seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, size=(n, *shape), dtype=np.uint8), rng.integers(0, 5, size=n)


def test_round_trip(tmp_path):
    x, y = toy()
    meta = write_dataset(tmp_path / "d", x, y, name="toy", num_classes=5, max_value=255,
                         source="test")
    ds = load_dataset(tmp_path / "d", verify=True)
    np.testing.assert_array_equal(ds.x, x)
    np.testing.assert_array_equal(ds.y, y)
    assert ds.y.dtype == np.int64 and isinstance(ds.x, np.memmap)
    assert ds.meta == meta
    assert meta.shape == (3, 4, 4) and meta.size == 50 and meta.num_classes == 5
    # the record is out of sight, in the folder's .digests/
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == [".digests", "meta.json",
                                                               "x.npy", "y.npy"]
    assert (tmp_path / "d" / ".digests" / "meta.json.sha256").is_file()


def test_meta_json_path_accepted(tmp_path):
    x, y = toy()
    write_dataset(tmp_path, x, y, name="toy", num_classes=5, max_value=255, source="test")
    a = load_dataset(tmp_path)
    b = load_dataset(tmp_path / "meta.json")
    assert a.meta == b.meta
    np.testing.assert_array_equal(a.x, b.x)


def test_checksum_failure_on_tampered_file(tmp_path):
    x, y = toy()
    write_dataset(tmp_path, x, y, name="toy", num_classes=5, max_value=255, source="test")
    raw = bytearray((tmp_path / "x.npy").read_bytes())
    raw[-1] ^= 0xFF  # flip the last pixel
    (tmp_path / "x.npy").write_bytes(bytes(raw))
    load_dataset(tmp_path, verify=False)  # only an explicit opt-out skips the check
    with pytest.raises(CorruptDataset, match="x.npy: sha256"):
        load_dataset(tmp_path, verify=True)


def _flip_x(directory, n=16):
    raw = bytearray((directory / "x.npy").read_bytes())
    for i in range(n):
        raw[len(raw) // 2 + i] ^= 0xFF
    (directory / "x.npy").write_bytes(bytes(raw))


def test_flipped_bytes_refused_by_default_naming_file_and_fix(tmp_path):
    x, y = toy()
    write_dataset(tmp_path / "toy", x, y, name="toy", num_classes=5, max_value=255,
                  source="test")
    _flip_x(tmp_path / "toy")
    with pytest.raises(CorruptDataset) as err:
        load_dataset(tmp_path / "toy" / "meta.json")
    message = str(err.value)
    assert str(tmp_path / "toy" / "x.npy") in message
    assert f"delete the folder {tmp_path / 'toy'}/ and rerun" in message


@pytest.mark.parametrize("key", ["x_sha256", "y_sha256"])
def test_zeroed_sha256_in_meta_refused(tmp_path, key):
    x, y = toy()
    write_dataset(tmp_path, x, y, name="toy", num_classes=5, max_value=255, source="test")
    meta = json.loads((tmp_path / "meta.json").read_text())
    (tmp_path / "meta.json").write_text(json.dumps({**meta, key: "0" * 64}))
    write_digest(tmp_path / "meta.json")  # a meta.json whose record agrees: the sums count
    with pytest.raises(CorruptDataset, match=f"{key[0]}.npy: sha256 .*records 0{{64}}"):
        load_dataset(tmp_path)


def test_unreadable_meta_or_missing_array_names_the_fix(tmp_path):
    x, y = toy()
    write_dataset(tmp_path, x, y, name="toy", num_classes=5, max_value=255, source="test")
    (tmp_path / "y.npy").unlink()
    with pytest.raises(CorruptDataset, match="y.npy is missing; .*delete the folder"):
        load_dataset(tmp_path)
    (tmp_path / "meta.json").write_text("{ not json")
    write_digest(tmp_path / "meta.json")
    with pytest.raises(CorruptDataset, match="meta.json: cannot be read.*delete the folder"):
        load_dataset(tmp_path)


def test_missing_and_mismatched(tmp_path):
    with pytest.raises(FileNotFoundError, match="prepare the data set first"):
        load_dataset(tmp_path)
    x, y = toy()
    write_dataset(tmp_path, x, y, name="toy", num_classes=5, max_value=255, source="test")
    meta = json.loads((tmp_path / "meta.json").read_text())
    (tmp_path / "meta.json").write_text(json.dumps({**meta, "size": 49}))
    write_digest(tmp_path / "meta.json")
    with pytest.raises(ValueError, match="x.npy: shape .*but meta.json says"):
        load_dataset(tmp_path)


@pytest.mark.parametrize("kwargs, message", [
    ({"x": np.zeros((2, 1, 2, 2), dtype=np.float32)}, "uint8"),
    ({"y": np.zeros(3, dtype=int)}, "y must have shape"),
    ({"y": np.array([0, 5])}, "labels must lie"),
])
def test_write_validation(tmp_path, kwargs, message):
    args = {"x": np.zeros((2, 1, 2, 2), dtype=np.uint8), "y": np.zeros(2, dtype=int), **kwargs}
    with pytest.raises(ValueError, match=message):
        write_dataset(tmp_path, args["x"], args["y"], name="t", num_classes=5, max_value=255,
                      source="test")


@pytest.mark.parametrize("chunk", [1, 7, 8192])
@pytest.mark.parametrize("shape, max_value", [((3, 8, 8), 255), ((1, 8, 8), 16)])
def test_chunked_stats_equal_numpy(chunk, shape, max_value):
    rng = np.random.default_rng(1)
    x = rng.integers(0, max_value + 1, size=(300, *shape), dtype=np.uint8)
    mean, std = channel_stats(x, max_value, chunk=chunk)
    scaled = x.astype(np.float64) / max_value
    np.testing.assert_allclose(mean, scaled.mean(axis=(0, 2, 3)), rtol=0, atol=1e-12)
    np.testing.assert_allclose(std, scaled.std(axis=(0, 2, 3)), rtol=0, atol=1e-12)
    assert len(mean) == len(std) == shape[0]


def test_stats_on_digits_in_meta(tmp_path):
    from sklearn.datasets import load_digits

    bunch = load_digits()
    x = bunch.images.astype(np.uint8).reshape(-1, 1, 8, 8)
    meta = write_dataset(tmp_path, x, bunch.target, name="digits", num_classes=10,
                         max_value=16, source="test")
    scaled = x.astype(np.float64) / 16
    assert abs(meta.mean[0] - scaled.mean()) < 1e-9
    assert abs(meta.std[0] - scaled.std()) < 1e-9
    assert channel_stats(x, 16, chunk=100) == (meta.mean, meta.std)


def test_constant_images_have_zero_std():
    mean, std = channel_stats(np.full((10, 2, 3, 3), 255, dtype=np.uint8), 255, chunk=3)
    assert mean == (1.0, 1.0) and std == (0.0, 0.0)


def test_load_extras(tmp_path):
    x, y = toy()
    write_dataset(tmp_path, x, y, name="toy", num_classes=5, max_value=255, source="test")
    assert load_extras(tmp_path) == {}
    assert "extras_sha256" not in json.loads((tmp_path / "meta.json").read_text())
    writer = np.arange(50) % 7
    np.save(tmp_path / "writer.npy", writer)  # extras are written before meta.json
    np.save(tmp_path / "domain.npy", np.arange(50) % 4)
    meta = write_dataset(tmp_path, x, y, name="toy", num_classes=5, max_value=255,
                         source="test")
    assert sorted(meta.extras_sha256) == ["domain", "writer"]
    (tmp_path / ".writer.npy.abc.tmp").write_bytes(b"partial")  # an unfinished atomic write
    extras = load_extras(tmp_path / "meta.json")
    assert sorted(extras) == ["domain", "writer"]
    assert isinstance(extras["writer"], np.memmap)
    np.testing.assert_array_equal(extras["writer"], writer)
    assert load_dataset(tmp_path).meta.extras_sha256 == meta.extras_sha256


def test_load_extras_checks_their_sums(tmp_path):
    x, y = toy()
    np.save(tmp_path / "writer.npy", np.arange(50) % 7)
    write_dataset(tmp_path, x, y, name="toy", num_classes=5, max_value=255, source="test")
    np.save(tmp_path / "writer.npy", np.arange(50) % 5)  # changed after meta.json
    with pytest.raises(CorruptDataset, match=r"writer\.npy: sha256 .* delete the folder"):
        load_extras(tmp_path)
    assert (tmp_path / "writer.npy.corrupt-1").exists()  # set aside, x.npy removed
    assert not (tmp_path / "writer.npy").exists() and not (tmp_path / "x.npy").exists()
    write_dataset(tmp_path, x, y, name="toy", num_classes=5, max_value=255, source="test")
    np.save(tmp_path / "writer.npy", np.arange(50) % 5)
    assert sorted(load_extras(tmp_path, verify=False)) == ["writer"]
    np.save(tmp_path / "domain.npy", np.arange(50) % 4)  # never recorded
    np.save(tmp_path / "writer.npy", np.arange(50) % 7)
    with pytest.raises(CorruptDataset, match=r"domain\.npy: .* records no sha256"):
        load_extras(tmp_path)


def test_load_extras_refuses_pickles(tmp_path):
    np.save(tmp_path / "bad.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(ValueError):
        load_extras(tmp_path, verify=False)


def test_load_extras_missing_directory(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_extras(tmp_path / "absent")


# ------------------------------------------------------------------ damage is rebuilt
# issue 27, item 4: a damaged prepared data set named the file but set nothing aside,
# so every rerun failed the same way until the user deleted the folder


@pytest.mark.parametrize("damage", ["flip_x", "truncate_y"])
def test_damaged_array_is_set_aside_so_snakemake_prepares_again(tmp_path, damage):
    x, y = toy()
    write_dataset(tmp_path, x, y, name="toy", num_classes=5, max_value=255, source="test")
    name = "x.npy" if damage == "flip_x" else "y.npy"
    raw = bytearray((tmp_path / name).read_bytes())
    if damage == "flip_x":
        raw[-1] ^= 0xFF
    else:
        del raw[len(raw) // 2:]
    (tmp_path / name).write_bytes(bytes(raw))
    with pytest.raises(CorruptDataset) as err:
        load_dataset(tmp_path)
    assert f"{tmp_path / name}: sha256" in str(err.value)
    assert f"set aside as {name}.corrupt-1" in str(err.value)
    assert "rerun snakemake" in str(err.value)
    # the declared output of prepare_data is missing now: Snakemake prepares the set again
    assert not (tmp_path / name).exists()
    assert (tmp_path / f"{name}.corrupt-1").read_bytes() == bytes(raw)
    assert (tmp_path / "meta.json").exists()  # other jobs' declared input stays
    write_dataset(tmp_path, x, y, name="toy", num_classes=5, max_value=255, source="test")
    np.testing.assert_array_equal(load_dataset(tmp_path).x, x)


def test_garbage_meta_is_kept_in_place_and_x_removed(tmp_path):
    x, y = toy()
    write_dataset(tmp_path, x, y, name="toy", num_classes=5, max_value=255, source="test")
    (tmp_path / "meta.json").write_text("\x00garbage")
    with pytest.raises(CorruptDataset, match=r"meta\.json: its SHA-256 differs .*a copy kept "
                                             r"as meta\.json\.corrupt-1, x\.npy removed"):
        load_dataset(tmp_path)
    assert (tmp_path / "meta.json").read_text() == "\x00garbage"  # input of other jobs
    assert (tmp_path / "meta.json.corrupt-1").read_text() == "\x00garbage"
    assert not (tmp_path / "x.npy").exists()  # so Snakemake runs prepare_data again


# ------------------------------------------------------------------ meta.json's digest
# A changed normalisation constant (mean 0.9, std 0.0376, mtime kept) passed verify and
# every job, and a run trained on it fell from 59.2 % to 9.2 % without a word; nor was a
# changed class count found


@pytest.mark.parametrize("edit", [{"mean": [0.9], "std": [0.0376]}, {"num_classes": 4}])
def test_edited_meta_is_refused_and_the_set_prepared_again(tmp_path, edit):
    import os

    x, y = toy()
    write_dataset(tmp_path, x, y, name="toy", num_classes=5, max_value=255, source="test")
    meta_path = tmp_path / "meta.json"
    stat = meta_path.stat()
    meta_path.write_text(json.dumps({**json.loads(meta_path.read_text()), **edit}))
    os.utime(meta_path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    with pytest.raises(CorruptDataset, match=r"meta\.json: its SHA-256 differs from the one "
                                             r"recorded in \.digests/meta\.json\.sha256"):
        load_dataset(tmp_path)
    assert not (tmp_path / "x.npy").exists()  # a target of the workflow: prepared again
    with pytest.raises(CorruptDataset):  # extras read meta.json through the same check
        np.save(tmp_path / "writer.npy", np.arange(50) % 7)
        load_extras(tmp_path)


@pytest.mark.parametrize("record", [None, b"", b"\xe1\x00 meta.json\n"])
def test_meta_without_a_whole_record_is_refused(tmp_path, record):
    x, y = toy()
    write_dataset(tmp_path, x, y, name="toy", num_classes=5, max_value=255, source="test")
    record_path = tmp_path / ".digests" / "meta.json.sha256"
    if record is None:
        record_path.unlink()
    else:
        record_path.write_bytes(record)
    why = "it has no digest record" if record is None else "its digest record is damaged"
    with pytest.raises(CorruptDataset, match=f"meta\\.json: {why}"):
        load_dataset(tmp_path)
