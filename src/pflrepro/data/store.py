"""The uniform on-disk form of every prepared data set.

A prepared data set is a directory holding

* ``x.npy``: ``uint8`` images, shape ``(N, C, H, W)``;
* ``y.npy``: ``int64`` labels in ``[0, num_classes)``, shape ``(N,)``;
* ``meta.json``: name, number of classes, image shape, normalisation constants
  and the SHA-256 of both arrays (and of each extra array), with its own SHA-256 in
  ``.digests/meta.json.sha256`` (a changed normalisation constant or class count changes
  every run made from the set, yet no array);
* optionally extra per-sample arrays ``<name>.npy`` (``writer.npy`` for FEMNIST,
  ``domain.npy`` for Office-Home), written before ``meta.json`` and read, checked
  against its sums, by :func:`load_extras`.

Arrays are plain ``.npy`` files (never pickled) and open memory-mapped, so the
engine reads a large set once into memory and a small job reads only what it needs.

:func:`load_dataset` checks both arrays against the SHA-256 sums in ``meta.json``
every time by default (:class:`CorruptDataset` otherwise): hashing is cheap next to
a training job (about 0.06 s for Fashion-MNIST's 55 MB ``x.npy``, 0.2 s for
CIFAR-10's 184 MB, on one core with SHA extensions) and, unlike a stamp keyed by
size and mtime, it also catches bytes changed in place.

A damaged data set is made to be prepared again, as damaged runs are rebuilt
(:func:`_damaged`): a damaged array is set aside as ``<name>.npy.corrupt-<n>``; a
damaged ``meta.json``, which other jobs take as their input, stays in place (a copy
kept as ``meta.json.corrupt-<n>``), and ``x.npy`` is removed instead. ``x.npy`` and
``y.npy`` are outputs of the workflow's ``prepare_data`` and targets of its default
rule (:mod:`pflrepro.pipeline.data_targets`) but no job's input, so the next ``snakemake`` sees
one missing and prepares the set again, while the jobs of the running one still find
the inputs they declared (a vanished input would abort them all, ``--keep-going`` or
not).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from pflrepro.store.io import (
    DamagedRecord,
    atomic_digested_path,
    atomic_path,
    mark_damaged,
    read_record,
    record_label,
    set_aside,
    sha256_file,
)

FORMAT_VERSION = 1
#: Images per chunk when computing the normalisation constants.
STATS_CHUNK = 8192
#: Array files that are not extras.
_CORE_ARRAYS = ("x.npy", "y.npy")


class CorruptDataset(ValueError):
    """A prepared data set whose files do not match its ``meta.json`` (or are unreadable)."""


def _fix(directory: Path) -> str:
    return (f"the prepared data set is damaged; delete the folder {directory}/ and rerun "
            "(Snakemake then prepares it again)")


def _damaged(directory: Path, file: Path, why: str) -> CorruptDataset:
    """Make the data set in ``directory`` be prepared again; the error naming ``file``.

    An array (``x.npy``, ``y.npy`` or an extra) is set aside as ``.corrupt-<n>``;
    ``meta.json`` is copied aside and stays (it is other jobs' declared input). When
    the set-aside file is not ``x.npy`` or ``y.npy`` (outputs of ``prepare_data``),
    ``x.npy`` is removed too, so that Snakemake sees an output missing. Another job
    may have done either already.
    """
    done = []
    try:
        if file.name == "meta.json":
            done.append(f"a copy kept as {mark_damaged(file).name}")
        else:
            done.append(f"set aside as {set_aside(file).name}")
    except FileNotFoundError:
        done.append("already set aside by another job")
    if file.name not in _CORE_ARRAYS and (directory / "x.npy").exists():
        (directory / "x.npy").unlink(missing_ok=True)
        done.append("x.npy removed")
    return CorruptDataset(
        f"{file}: {why}; the file is damaged, {', '.join(done)}. Fix: rerun snakemake: an "
        f"output of the data set's preparation is now missing, so Snakemake prepares "
        f"{directory}/ again and rebuilds what is made from it (outside Snakemake: delete "
        f"the folder {directory}/ and rerun)")


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
    #: SHA-256 of each extra array ``<name>.npy`` by name (absent from ``meta.json``
    #: when there is none).
    extras_sha256: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ArrayDataset:
    """A prepared data set: raw arrays plus their metadata."""

    x: np.ndarray
    y: np.ndarray
    meta: DatasetMeta


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
    mean, std = channel_stats(x, max_value)
    meta = DatasetMeta(
        name=name,
        num_classes=int(num_classes),
        shape=tuple(int(s) for s in x.shape[1:]),  # type: ignore[arg-type]
        mean=mean,
        std=std,
        max_value=int(max_value),
        size=int(len(x)),
        x_sha256=sha256_file(directory / "x.npy"),
        y_sha256=sha256_file(directory / "y.npy"),
        source=source,
        extras_sha256={path.stem: sha256_file(path) for path in _extra_files(directory)},
    )
    record = asdict(meta)
    if not meta.extras_sha256:  # data sets without extras: meta.json as before the field
        del record["extras_sha256"]
    with atomic_digested_path(directory / "meta.json") as tmp:
        tmp.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return meta


def _meta_text(directory: Path) -> str:
    """``meta.json``'s text after checking it against ``.digests/meta.json.sha256``.

    A missing, damaged or other file's record, or a SHA-256 that differs, makes the set
    be prepared again (:func:`_damaged`); the error names the file and why.
    """
    meta_path = directory / "meta.json"
    record_name = record_label(meta_path)
    try:
        record = read_record(meta_path)
    except DamagedRecord as err:
        raise _damaged(directory, meta_path, f"its digest record is damaged: {err}") from None
    if record is None:
        raise _damaged(directory, meta_path, f"it has no digest record {record_name} "
                                             f"(prepared by an older version, or the "
                                             f"record was lost), so its normalisation "
                                             f"constants and class count cannot be trusted")
    if record[1] != meta_path.name or sha256_file(meta_path) != record[0]:
        raise _damaged(directory, meta_path, f"its SHA-256 differs from the one recorded in "
                                             f"{record_name} (changed after it was "
                                             f"written)")
    try:
        return meta_path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise _damaged(directory, meta_path, f"cannot be read ({exc})") from exc


def channel_stats(x: np.ndarray, max_value: int, *,
                  chunk: int = STATS_CHUNK) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Per-channel mean and (population) std of ``x / max_value``, ``x`` uint8 ``(N, C, H, W)``.

    Reads ``chunk`` images at a time and accumulates the exact integer sums of the
    pixel values and of their squares (``255**2`` fits in ``uint16``; a chunk's sum
    fits in ``int64``, the running totals are Python integers), so memory stays at a
    few chunk-sized buffers instead of a float64 copy of the whole array. The mean
    ``S / (n m)`` and variance ``(n Q - S**2) / (n m)**2`` are then formed from Python
    integers, which rounds once: the result is the correctly rounded value, within
    1e-15 of NumPy's two-pass float64 ``mean``/``std``.
    """
    if x.dtype != np.uint8 or x.ndim != 4:
        raise ValueError(f"x must be uint8 of shape (N, C, H, W), got {x.dtype} {x.shape}")
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")
    channels = x.shape[1]
    total = [0] * channels  # Python ints: exact, never overflow
    squares = [0] * channels
    for start in range(0, len(x), chunk):
        block = np.asarray(x[start:start + chunk])
        wide = block.astype(np.uint16)
        np.square(wide, out=wide)
        for c in range(channels):
            total[c] += int(block[:, c].sum(dtype=np.int64))
            squares[c] += int(wide[:, c].sum(dtype=np.int64))
    n = len(x) * x.shape[2] * x.shape[3]
    if n == 0:
        nan = tuple(float("nan") for _ in range(channels))
        return nan, nan
    scale = n * int(max_value)
    mean = tuple(s / scale for s in total)
    std = tuple(math.sqrt((n * q - s * s) / scale**2) for s, q in zip(total, squares, strict=True))
    return mean, std


def _directory(directory: str | Path) -> Path:
    directory = Path(directory)
    return directory.parent if directory.name == "meta.json" else directory


def _extra_files(directory: Path) -> list[Path]:
    """The extra ``<name>.npy`` files of a data set folder (unfinished writes skipped)."""
    return [path for path in sorted(directory.glob("*.npy"))
            if path.name not in _CORE_ARRAYS and not path.name.startswith(".")]


def load_extras(directory: str | Path, *, verify: bool = True) -> dict[str, np.ndarray]:
    """Open every extra per-sample array ``<name>.npy`` of a prepared data set.

    Returns ``{name: array}`` (memory-mapped, never unpickled) for each ``.npy`` file
    beside ``x.npy``/``y.npy`` other than those two, e.g. ``{"writer": ...}`` for
    FEMNIST and ``{"domain": ...}`` for Office-Home; empty for most data sets.
    ``directory`` may also be the data set's ``meta.json``. With ``verify`` (the
    default) each file's SHA-256 must be the one ``meta.json`` records for it
    (:class:`CorruptDataset`, naming the file and the fix, otherwise): a damaged or
    foreign extra array would silently change a natural or domain partition.
    """
    directory = _directory(directory)
    if not directory.is_dir():
        raise FileNotFoundError(f"{directory} not found: prepare the data set first")
    files = _extra_files(directory)
    if verify and files:
        meta_path = directory / "meta.json"
        try:
            recorded = json.loads(_meta_text(directory)).get("extras_sha256", {})
        except FileNotFoundError as exc:
            raise CorruptDataset(f"{meta_path} is missing; {_fix(directory)}") from exc
        except (OSError, ValueError, AttributeError) as exc:
            raise _damaged(directory, meta_path, f"cannot be read ({type(exc).__name__}: "
                                                 f"{exc})") from exc
        for path in files:
            expected = recorded.get(path.stem)
            if expected is None:
                raise _damaged(directory, path, f"{meta_path.name} records no sha256 for it "
                                                f"(an extra array written after the data "
                                                f"set, or a data set prepared by an older "
                                                f"version)")
            actual = sha256_file(path)
            if actual != expected:
                raise _damaged(directory, path, f"sha256 {actual}, but {meta_path.name} "
                                                f"records {expected}")
    return {path.stem: np.load(path, mmap_mode="r", allow_pickle=False) for path in files}


def load_dataset(directory: str | Path, *, verify: bool = True) -> ArrayDataset:
    """Open a prepared data set memory-mapped, by default after checking both SHA-256 sums.

    ``directory`` may also be the data set's ``meta.json`` (what the workflow passes).
    A sum that differs from ``meta.json``'s, a missing array or an unreadable
    ``meta.json`` raises :class:`CorruptDataset`, naming the file and the fix.
    ``verify=False`` skips the sums (only for callers that check them otherwise).
    """
    directory = _directory(directory)
    meta_path = directory / "meta.json"
    if not meta_path.exists():
        raise FileNotFoundError(f"{meta_path} not found: prepare the data set first")
    if verify:
        text = _meta_text(directory)
    else:
        text = meta_path.read_text(encoding="utf-8", errors="replace")
    try:
        raw = json.loads(text)
        raw["shape"] = tuple(raw["shape"])
        raw["mean"] = tuple(raw["mean"])
        raw["std"] = tuple(raw["std"])
        meta = DatasetMeta(**raw)
    except (ValueError, KeyError, TypeError) as exc:  # JSONDecodeError is a ValueError
        raise _damaged(directory, meta_path,
                       f"cannot be read ({type(exc).__name__}: {exc})") from exc
    if meta.format_version != FORMAT_VERSION:
        raise ValueError(f"{directory}: format version {meta.format_version}, expected "
                         f"{FORMAT_VERSION}; prepare the data set again")
    for fname in _CORE_ARRAYS:
        if not (directory / fname).is_file():
            raise CorruptDataset(f"{directory / fname} is missing; {_fix(directory)}")
    if verify:
        for fname, expected in (("x.npy", meta.x_sha256), ("y.npy", meta.y_sha256)):
            actual = sha256_file(directory / fname)
            if actual != expected:
                raise _damaged(directory, directory / fname,
                               f"sha256 {actual}, but {meta_path.name} records {expected}")
    arrays = {}
    for fname, shape in (("x.npy", (meta.size, *meta.shape)), ("y.npy", (meta.size,))):
        try:
            arrays[fname] = np.load(directory / fname, mmap_mode="r", allow_pickle=False)
        except ValueError as exc:  # not a valid .npy file
            raise _damaged(directory, directory / fname, str(exc)) from exc
        if arrays[fname].shape != shape:
            raise _damaged(directory, directory / fname,
                           f"shape {arrays[fname].shape}, but meta.json says {shape}")
    return ArrayDataset(x=arrays["x.npy"], y=arrays["y.npy"], meta=meta)
