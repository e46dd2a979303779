"""The uniform on-disk form of every prepared data set.

A prepared data set is a directory holding

* ``x.npy``: ``uint8`` images, shape ``(N, C, H, W)``;
* ``y.npy``: ``int64`` labels in ``[0, num_classes)``, shape ``(N,)``;
* ``meta.json``: name, number of classes, image shape, normalisation constants
  and the SHA-256 of both arrays.

Arrays are plain ``.npy`` files (never pickled) and open memory-mapped, so the
engine reads a large set once into memory and a small job reads only what it needs.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from pflrepro.io import atomic_path, write_text

FORMAT_VERSION = 1


@dataclass(frozen=True)
class DatasetMeta:
    """Facts about a prepared data set, stored as ``meta.json``."""

    name: str
    num_classes: int
    shape: tuple[int, int, int]  # (C, H, W)
    mean: tuple[float, ...]  # per channel, on the [0, 1] scale
    std: tuple[float, ...]  # per channel, on the [0, 1] scale
    max_value: int  # value that maps to 1.0 (255 for 8-bit images, 16 for digits)
    size: int
    x_sha256: str
    y_sha256: str
    source: str
    format_version: int = FORMAT_VERSION


@dataclass(frozen=True)
class ArrayDataset:
    """A prepared data set: raw arrays plus their metadata."""

    x: np.ndarray
    y: np.ndarray
    meta: DatasetMeta


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def write_dataset(
    directory: str | Path, x: np.ndarray, y: np.ndarray, *, name: str, num_classes: int,
    max_value: int, source: str,
) -> DatasetMeta:
    """Write ``x``/``y`` in the uniform form; ``meta.json`` is written last, atomically.

    ``meta.json`` is the rule's declared output, so a crash before it is written
    leaves the data set incomplete in a way Snakemake recognises.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    if x.dtype != np.uint8 or x.ndim != 4:
        raise ValueError(f"x must be uint8 of shape (N, C, H, W), got {x.dtype} {x.shape}")
    if y.ndim != 1 or len(y) != len(x):
        raise ValueError(f"y must have shape ({len(x)},), got {y.shape}")
    y = y.astype(np.int64)
    if y.min() < 0 or y.max() >= num_classes:
        raise ValueError(f"labels must lie in [0, {num_classes}), got [{y.min()}, {y.max()}]")
    for arr, fname in ((x, "x.npy"), (y, "y.npy")):
        with atomic_path(directory / fname) as tmp:
            with tmp.open("wb") as fh:
                np.save(fh, np.ascontiguousarray(arr), allow_pickle=False)
    scaled = x.astype(np.float64) / max_value
    meta = DatasetMeta(
        name=name,
        num_classes=int(num_classes),
        shape=tuple(int(s) for s in x.shape[1:]),  # type: ignore[arg-type]
        mean=tuple(float(v) for v in scaled.mean(axis=(0, 2, 3))),
        std=tuple(float(v) for v in scaled.std(axis=(0, 2, 3))),
        max_value=int(max_value),
        size=int(len(x)),
        x_sha256=_sha256(directory / "x.npy"),
        y_sha256=_sha256(directory / "y.npy"),
        source=source,
    )
    write_text(directory / "meta.json", json.dumps(asdict(meta), indent=2) + "\n")
    return meta


def load_dataset(directory: str | Path, *, verify: bool = False) -> ArrayDataset:
    """Open a prepared data set memory-mapped; ``verify`` re-checks both SHA-256 sums.

    ``directory`` may also be the data set's ``meta.json`` (what the workflow passes).
    """
    directory = Path(directory)
    if directory.name == "meta.json":
        directory = directory.parent
    meta_path = directory / "meta.json"
    if not meta_path.exists():
        raise FileNotFoundError(f"{meta_path} not found: prepare the data set first")
    raw = json.loads(meta_path.read_text(encoding="utf-8"))
    raw["shape"] = tuple(raw["shape"])
    raw["mean"] = tuple(raw["mean"])
    raw["std"] = tuple(raw["std"])
    meta = DatasetMeta(**raw)
    if meta.format_version != FORMAT_VERSION:
        raise ValueError(f"{directory}: format version {meta.format_version}, expected "
                         f"{FORMAT_VERSION}; prepare the data set again")
    if verify:
        for fname, expected in (("x.npy", meta.x_sha256), ("y.npy", meta.y_sha256)):
            actual = _sha256(directory / fname)
            if actual != expected:
                raise ValueError(f"{directory / fname}: sha256 {actual}, expected {expected}")
    x = np.load(directory / "x.npy", mmap_mode="r", allow_pickle=False)
    y = np.load(directory / "y.npy", mmap_mode="r", allow_pickle=False)
    if x.shape != (meta.size, *meta.shape) or y.shape != (meta.size,):
        raise ValueError(f"{directory}: arrays {x.shape}/{y.shape} do not match meta.json")
    return ArrayDataset(x=x, y=y, meta=meta)
