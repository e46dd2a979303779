"""The algorithm registry: every module of :mod:`pflrepro.algorithms` that registers one.

A method is one file, ``pflrepro/algorithms/<name>.py``: its hyperparameters (a frozen
dataclass of :func:`hyper` fields, with docs, defaults and bounds), its summary, the
per-round values it records, the gradient terms its local training adds, and its
init/round/predict, in a class decorated with
:func:`~pflrepro.algorithms.base.register_algorithm`. Nothing else lists it: the
registry finds it by importing every module of the package the first time
:data:`INFOS` is read, and the config schema, the config checks and the workflow read
the declarations from there (so parsing a config imports torch, ~2 s once per
Snakemake parse).
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

#: Modules of the package that are not methods.
NOT_METHODS = frozenset({"base", "registry"})


@dataclasses.dataclass(frozen=True)
class NoHyper:
    """An algorithm without hyperparameters."""


def hyper(default: Any, doc: str, choices: tuple[Any, ...] | None = None,
          minimum: float | None = None, maximum: float | None = None) -> Any:
    """Declare a hyperparameter: default, schema description and optional bounds/choices."""
    meta: dict[str, Any] = {"doc": doc}
    if choices is not None:
        meta["choices"] = tuple(choices)
    if minimum is not None:
        meta["minimum"] = minimum
    if maximum is not None:
        meta["maximum"] = maximum
    return dataclasses.field(default=default, metadata=meta)


def require_positive(owner: str, **values: float) -> None:
    """Raise ValueError naming ``owner`` and the key unless every value is > 0."""
    for key, value in values.items():
        if not value > 0:
            raise ValueError(f"algorithm {owner!r}: hyperparameter {key!r} must be > 0, "
                             f"got {value!r}")


@dataclasses.dataclass(frozen=True)
class AlgorithmInfo:
    """What the config and the workflow know of a registered algorithm class."""

    name: str
    summary: str
    Hyper: type
    module: str
    #: The algorithm presumes plain SGD (``training.optimizer: sgd``, ``momentum: 0``);
    #: the config check rejects any other optimiser at parse time.
    requires_plain_sgd: bool = False
    #: Metric names its ``record`` logs besides the engine's (e.g. ``weight``).
    records: tuple[str, ...] = ()
    #: Accepts ``training.client_fraction`` < 1 (trains the round's participants only).
    client_sampling: bool = False
    #: Needs the experiment's unlabeled public set.
    needs_public: bool = False
    #: Accepts clients of different architectures (``training.architectures``).
    heterogeneous_models: bool = False


#: The classes registered so far, by name: filled by
#: :func:`pflrepro.algorithms.base.register_algorithm` as each method's module is
#: imported. Held here, not in ``base``, so that the registry needs no import of the
#: module that imports it.
LOADED: dict[str, Any] = {}


def method_modules() -> list[str]:
    """The dotted names of the package's method modules (a scan of its directory)."""
    package = __name__.rpartition(".")[0]
    return [f"{package}.{m.name}"
            for m in sorted(pkgutil.iter_modules([str(Path(__file__).parent)]),
                            key=lambda m: m.name)
            if m.name not in NOT_METHODS]


class _Registry(Mapping[str, AlgorithmInfo]):
    """Name -> :class:`AlgorithmInfo`, filled on first use by importing the package."""

    def __init__(self) -> None:
        self._infos: dict[str, AlgorithmInfo] | None = None

    def _load(self) -> dict[str, AlgorithmInfo]:
        if self._infos is None:
            for module in method_modules():
                importlib.import_module(module)
            self._infos = {
                name: AlgorithmInfo(name, cls.summary, cls.Hyper, cls.__module__,
                                    cls.requires_plain_sgd, tuple(cls.records),
                                    cls.client_sampling, cls.needs_public,
                                    cls.heterogeneous_models)
                for name, cls in sorted(LOADED.items())}
        return self._infos

    def __getitem__(self, name: str) -> AlgorithmInfo:
        return self._load()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._load())

    def __len__(self) -> int:
        return len(self._load())


#: Every algorithm by registry name (``algorithm:`` in the config).
INFOS: Mapping[str, AlgorithmInfo] = _Registry()


def algorithm_info(name: str) -> AlgorithmInfo:
    """The declared algorithm ``name`` (a clear error for unknown names)."""
    if name not in INFOS:
        raise ValueError(f"unknown algorithm {name!r}; known: {sorted(INFOS)}")
    return INFOS[name]


def parse_hyper(cls: Any, values: Mapping[str, Any]) -> Any:
    """Build ``cls.Hyper`` from a mapping; unknown keys and wrong types raise ValueError.

    ``cls`` is an algorithm class or its :class:`AlgorithmInfo` (anything with ``name``
    and ``Hyper``).
    """
    fields = {f.name: f for f in dataclasses.fields(cls.Hyper)}
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise ValueError(f"algorithm {cls.name!r}: unknown hyperparameter(s) {unknown}; "
                         f"known: {sorted(fields)}")
    for key, value in values.items():
        expected = type(fields[key].default)
        ok = isinstance(value, expected) and not (expected is int and isinstance(value, bool))
        if expected is float and isinstance(value, int) and not isinstance(value, bool):
            ok = True
        if not ok:
            raise ValueError(f"algorithm {cls.name!r}: hyperparameter {key!r} must be "
                             f"{expected.__name__}, got {value!r}")
        meta = fields[key].metadata
        if "choices" in meta and value not in meta["choices"]:
            raise ValueError(f"algorithm {cls.name!r}: hyperparameter {key!r} must be one of "
                             f"{list(meta['choices'])}, got {value!r}")
        if "minimum" in meta and value < meta["minimum"]:
            raise ValueError(f"algorithm {cls.name!r}: hyperparameter {key!r} must be >= "
                             f"{meta['minimum']}, got {value!r}")
        if "maximum" in meta and value > meta["maximum"]:
            raise ValueError(f"algorithm {cls.name!r}: hyperparameter {key!r} must be <= "
                             f"{meta['maximum']}, got {value!r}")
    coerced = {k: (float(v) if type(fields[k].default) is float else v) for k, v in values.items()}
    return cls.Hyper(**coerced)
