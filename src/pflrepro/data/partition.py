"""Partition a labelled data set among federated clients.

A partitioner is a small frozen dataclass whose fields are its parameters. It maps a
label vector and a seed to a table with one row per (client, sample):

========  =======  ==================================================
column    dtype    meaning
========  =======  ==================================================
client    int32    client id, ``0 .. clients-1`` (every id is used)
index     int64    row of the prepared data set
split     string   ``"train"`` or ``"test"``
group     int32    the client's distribution id (``-1`` when none)
========  =======  ==================================================

plus any per-row columns a scheme adds (:attr:`Assignment.columns`), e.g.
``rotation`` (``int16`` degrees) or ``target`` (``int64`` label to train on).

Each sample is used at most once, so a per-row column is a well-defined transform
of that data-set row. Subclasses implement :meth:`Partitioner.assign` (which samples
go to which client); the per-client train/test split is shared and happens here.
Schemes that need per-sample arrays besides the labels (FEMNIST writer ids,
Office-Home domains) read them from ``extras`` (see
:func:`pflrepro.data.store.load_extras`) with :func:`require_extra`.
Partitioners register by their ``scheme`` name. A scheme is one module of
:mod:`pflrepro.data.schemes`: :data:`PARTITIONERS` finds them as the algorithm
registry finds methods, by importing every module of that package (a scan of its
directory) the first time it is read; nothing else lists them. The config schema's
list of schemes comes from there.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import typing
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import numpy as np

from pflrepro.seeding import numpy_generator
from pflrepro.store.io import PARTITION_KEY, atomic_digested_path, read_verified
from pflrepro.store.scan import ScannedRegistry

if TYPE_CHECKING:  # imported where used: the config and the workflow parse need neither
    import pandas as pd

#: The package whose every module is a partition scheme.
SCHEMES_PACKAGE = "pflrepro.data.schemes"
#: Schemes registered so far (:func:`register_partitioner`), by name.
_LOADED: dict[str, type[Partitioner]] = {}


#: Every partition scheme by name (``scheme:`` in the config); the first read imports
#: every scheme module.
PARTITIONERS: Mapping[str, type[Partitioner]] = ScannedRegistry(SCHEMES_PACKAGE, _LOADED)
METADATA_KEY = PARTITION_KEY
#: Columns every partition table has; :attr:`Assignment.columns` may not reuse them.
BASE_COLUMNS = ("client", "index", "split", "group")

P = TypeVar("P", bound="type[Partitioner]")


def register_partitioner(cls: P) -> P:
    """Class decorator: make ``cls`` selectable as ``scheme: <cls.scheme>`` in the config."""
    if cls.scheme in _LOADED:
        raise ValueError(f"partition scheme {cls.scheme!r} registered twice")
    _LOADED[cls.scheme] = cls
    return cls


@dataclass(frozen=True)
class Assignment:
    """Which samples each client holds, and each client's distribution id.

    ``columns`` maps an extra column name to one array per client, aligned with that
    client's ``indices`` (one value per sample; its dtype is kept in the table).
    """

    indices: list[np.ndarray]
    groups: list[int]
    columns: Mapping[str, Sequence[np.ndarray]] = field(default_factory=dict)


@dataclass(frozen=True)
class Partitioner(ABC):
    """Base class: ``clients`` clients, each split ``1 - test_fraction`` / ``test_fraction``."""

    scheme: ClassVar[str]
    #: Field documentation, shown in the config schema (field name -> text).
    docs: ClassVar[Mapping[str, str]] = {}
    #: Integer fields that count labels (label groups, classes per client): the config
    #: check rejects a value above the data set's number of labels before any job.
    label_bounded: ClassVar[tuple[str, ...]] = ()
    #: Fields added after results were stored, left out of :attr:`id` and :meth:`spec`
    #: at their default (field -> default), so that a partition that does not set them
    #: keeps the id and the stored results it had before the field existed.
    omitted_at_default: ClassVar[Mapping[str, Any]] = {}

    clients: int
    test_fraction: float = 0.2
    max_samples: int = 0

    def __post_init__(self) -> None:
        if self.clients < 1:
            raise ValueError(f"{self.scheme}: clients must be >= 1, got {self.clients}")
        if self.max_samples < 0:
            raise ValueError(f"{self.scheme}: max_samples must be >= 0, got {self.max_samples}")
        if not 0.0 < self.test_fraction < 1.0:
            raise ValueError(f"{self.scheme}: test_fraction must lie in (0, 1), "
                             f"got {self.test_fraction}")

    @abstractmethod
    def assign(self, labels: np.ndarray, num_classes: int, seed: int, *,
               extras: Mapping[str, np.ndarray] | None = None) -> Assignment:
        """Return the samples of each client; must use only generators from ``seed``.

        ``extras`` holds per-sample arrays besides the labels (``writer``, ``domain``),
        each of length ``len(labels)``; schemes that do not need them ignore them.
        """

    # ------------------------------------------------------------------ shared
    @functools.cached_property
    def id(self) -> str:
        """Path-safe identifier holding every parameter, e.g. ``label_groups-clients8-groups4``.

        Computed once per partitioner (it is frozen): a dry run asks for it per job.
        """
        parts = [self.scheme]
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if not self._omitted(f.name, value):
                parts.append(f"{f.name}{_fmt(value)}")
        return "-".join(parts)

    def _omitted(self, name: str, value: Any) -> bool:
        """Whether field ``name`` at ``value`` is left out (:attr:`omitted_at_default`)."""
        return name in self.omitted_at_default and value == self.omitted_at_default[name]

    def group_names(self) -> tuple[str, ...]:
        """A reader's name of each group id (distribution) it makes; ``()``: ids only.

        Figures name a client's distribution by it (a rotation's angle, a label
        permutation) instead of "distribution g".
        """
        return ()

    def spec(self) -> dict[str, Any]:
        """The config mapping that rebuilds this partitioner."""
        return {"scheme": self.scheme, **{k: v for k, v in dataclasses.asdict(self).items()
                                          if not self._omitted(k, v)}}

    def subsample(self, n: int, seed: int) -> np.ndarray | None:
        """Sorted rows of a seeded uniform subset of ``max_samples`` rows (None: all).

        CPU-scale experiments use it to partition a few thousand samples of a large
        data set; the subset depends only on (seed, ``max_samples``).
        """
        if self.max_samples == 0 or self.max_samples >= n:
            return None
        rng = numpy_generator(seed, -1, -1, "subsample")
        return np.sort(rng.choice(n, size=self.max_samples, replace=False)).astype(np.int64)

    def split(self, labels: np.ndarray, num_classes: int, seed: int,
              extras: Mapping[str, np.ndarray] | None = None) -> pd.DataFrame:
        """Assign samples to clients, then split each client's samples into train/test.

        ``extras`` (per-sample arrays such as ``writer`` or ``domain``) is passed on to
        :meth:`assign`.
        """
        import pandas as pd

        labels = np.asarray(labels)
        keep = self.subsample(len(labels), seed)
        if keep is not None:
            labels = labels[keep]
            extras = {k: np.asarray(v)[keep] for k, v in (extras or {}).items()}
        assignment = self.assign(labels, num_classes, seed, extras=extras)
        if keep is not None:  # back to rows of the full data set
            assignment = dataclasses.replace(
                assignment, indices=[keep[np.asarray(i, dtype=np.int64)]
                                     for i in assignment.indices])
        if len(assignment.indices) != self.clients or len(assignment.groups) != self.clients:
            raise AssertionError(f"{self.scheme} produced {len(assignment.indices)} clients, "
                                 f"expected {self.clients}")
        for name, per_client in assignment.columns.items():
            if name in BASE_COLUMNS:
                raise AssertionError(f"{self.scheme}: extra column {name!r} clashes with a "
                                     f"base column")
            if len(per_client) != self.clients:
                raise AssertionError(f"{self.scheme}: column {name!r} has {len(per_client)} "
                                     f"clients, expected {self.clients}")
        frames = []
        pairs = zip(assignment.indices, assignment.groups, strict=True)
        for client, (idx, group) in enumerate(pairs):
            idx = np.asarray(idx, dtype=np.int64)
            rng = numpy_generator(seed, -1, client, "train_test_split")
            perm = rng.permutation(len(idx))
            n_test = test_size(len(idx), self.test_fraction)
            split = np.full(len(idx), "train", dtype=object)
            split[perm[:n_test]] = "test"
            columns: dict[str, np.ndarray] = {
                "client": np.full(len(idx), client, dtype=np.int32),
                "index": idx,
                "split": split,
                "group": np.full(len(idx), group, dtype=np.int32),
            }
            for name, per_client in assignment.columns.items():
                values = np.asarray(per_client[client])
                if values.shape != idx.shape:
                    raise AssertionError(f"{self.scheme}: column {name!r} of client {client} "
                                         f"has shape {values.shape}, expected {idx.shape}")
                columns[name] = values
            frames.append(pd.DataFrame(columns))
        frame = pd.concat(frames, ignore_index=True)
        frame["split"] = frame["split"].astype("string")
        if frame["index"].duplicated().any():
            raise AssertionError(f"{self.scheme} assigned a sample to two clients")
        return frame


def require_extra(extras: Mapping[str, np.ndarray] | None, name: str, n: int,
                  message: str) -> np.ndarray:
    """Return ``extras[name]`` as an ``int64`` array of length ``n``.

    Raises :class:`ValueError` with ``message`` when the array is absent, and a
    shape error when it does not hold one integer per sample.
    """
    if extras is None or name not in extras:
        raise ValueError(message)
    values = np.asarray(extras[name])
    if values.shape != (n,):
        raise ValueError(f"extra array {name!r} has shape {values.shape}, expected ({n},): "
                         "one value per sample")
    if values.size and not np.issubdtype(values.dtype, np.integer):
        raise ValueError(f"extra array {name!r} must hold integers, got {values.dtype}")
    return values.astype(np.int64, copy=False)


def test_size(n: int, fraction: float) -> int:
    """Number of test samples of a client with ``n`` samples.

    ``round(n * fraction)``, but at least one test and one train sample whenever
    ``n >= 2``, so every client can be both trained and evaluated.
    """
    if n < 2:
        return 0
    return int(min(max(round(n * fraction), 1), n - 1))


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "_".join(_fmt(v) for v in value)
    return str(value)


def from_spec(spec: Mapping[str, Any]) -> Partitioner:
    """Build a partitioner from a config mapping ``{scheme: ..., <fields>}``."""
    if not isinstance(spec, Mapping):
        raise ValueError(f"partition spec: a mapping {{scheme: ..., <options>}} is expected, "
                         f"got {type(spec).__name__}")
    spec = dict(spec)
    scheme = spec.pop("scheme", None)
    if scheme not in PARTITIONERS:
        raise ValueError(f"unknown partition scheme {scheme!r}; known: {sorted(PARTITIONERS)}")
    cls = PARTITIONERS[scheme]
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = set(spec) - names
    if unknown:
        raise ValueError(f"partition scheme {scheme!r}: unknown key(s) {sorted(unknown)}; "
                         f"known: {sorted(names)}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    missing = sorted(n for n, f in fields.items() if n not in spec and f.init
                     and f.default is dataclasses.MISSING
                     and f.default_factory is dataclasses.MISSING)
    if missing:
        raise ValueError(f"partition scheme {scheme!r} needs {', '.join(missing)} (`pflrepro "
                         f"list partitions` shows each scheme's options)")
    try:
        hints = typing.get_type_hints(cls)
    except NameError:  # an annotation only type checkers can resolve: no check
        hints = {}
    for key, value in spec.items():
        wanted = _NUMBER_TYPES.get(hints.get(key))
        if wanted is not None and (isinstance(value, bool) or not isinstance(value, wanted[0])):
            raise ValueError(f"partition scheme {scheme!r}: {key} must be {wanted[1]}, got "
                             f"{value!r}")
    try:
        return cls(**spec)
    except TypeError as err:  # a value of another type than the scheme compares or sums
        raise ValueError(f"partition scheme {scheme!r} with {spec}: {err}") from None


#: Annotated field types whose values are checked before a scheme is built: the
#: accepted Python types and how the message names them.
_NUMBER_TYPES: dict[Any, tuple[tuple[type, ...], str]] = {
    int: ((int,), "an integer"), float: ((int, float), "a number")}


def write_partition(frame: pd.DataFrame, path: str, *, partitioner: Partitioner,
                    dataset: str, seed: int) -> None:
    """Write a partition table atomically, with its parameters in the file's metadata."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(frame, preserve_index=False)
    meta = {"dataset": dataset, "seed": seed, "spec": partitioner.spec(), "id": partitioner.id}
    table = table.replace_schema_metadata({**(table.schema.metadata or {}),
                                           METADATA_KEY: json.dumps(meta).encode()})
    with atomic_digested_path(path) as tmp:
        pq.write_table(table, tmp)


def read_partition(path: str) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Read a partition table and the metadata :func:`write_partition` stored.

    The file is checked against its digest record and what it says it is first (a
    partition, and under ``results/partitions/`` the one of its path); a damaged one is
    marked for rebuilding (so that Snakemake writes it again) and
    :class:`pflrepro.store.io.CorruptFileError` names it (:func:`pflrepro.store.io.read_verified`).
    """
    import pyarrow.parquet as pq

    table = read_verified(path, pq.read_table, kinds=("partition",))
    meta = json.loads((table.schema.metadata or {}).get(METADATA_KEY, b"{}"))
    return table.to_pandas(), meta


def schema_properties(cls: type[Partitioner]) -> dict[str, Any]:
    """JSON-schema ``properties`` for one scheme, built from its dataclass fields."""
    props: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        props[f.name] = {**_json_type(f.type), "description": _field_doc(cls, f.name)}
    return props


_BASE_DOCS = {
    "clients": "Number of clients (every id 0..clients-1 gets data).",
    "test_fraction": "Share of each client's samples held out as its test set.",
    "max_samples": "Partition a seeded random subset of this many samples (0: all); for "
                   "CPU-scale runs on large data sets.",
}


def _field_doc(cls: type[Partitioner], name: str) -> str:
    return cls.docs.get(name) or _BASE_DOCS.get(name) or name


def _json_type(annotation: Any) -> dict[str, Any]:
    text = str(annotation)
    if text in ("int", "<class 'int'>"):
        return {"type": "integer"}
    if text in ("float", "<class 'float'>"):
        return {"type": "number"}
    if text in ("bool", "<class 'bool'>"):
        return {"type": "boolean"}
    if text in ("str", "<class 'str'>"):
        return {"type": "string"}
    if text == "tuple[int, ...]":
        return {"type": "array", "items": {"type": "integer"}, "minItems": 1}
    return {}


