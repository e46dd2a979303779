"""The algorithm registry: every module of :mod:`pflrepro.algorithms` that registers one.

A method is one file, ``pflrepro/algorithms/<name>.py``: its hyperparameters (a frozen
dataclass of :func:`hyper` fields, with docs, defaults and bounds), its summary, the
per-round values it records, the gradient terms its local training adds, and its
init/round/predict, in a class decorated with
:func:`~pflrepro.algorithms.base.register_algorithm`. Nothing else lists it: the
first read of :data:`INFOS` scans the package's modules and reads each registered
class's declarations from its source (:mod:`pflrepro.algorithms.declarations`), without
importing it, so the config schema, the config checks and the workflow parse import no
torch. :func:`~pflrepro.algorithms.base.get_algorithm` imports a method's module when
its class is needed (a training job).
"""

from __future__ import annotations

import dataclasses
import pkgutil
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from pflrepro.algorithms.declarations import DeclarationError, Reader
from pflrepro.choices import require_choice

#: Modules of the package that are not methods: the base classes, the readers, and
#: FedMix's objective (its own module: the method's file is at the size limit).
NOT_METHODS = frozenset({"base", "declarations", "registry", "fedmix_experts"})


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
    #: The name tables and figures show for it (its paper's spelling); "" shows the id.
    display_name: str = ""
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
    #: Tuning keys besides the hyperparameters that its ``tied_values`` reads (the
    #: class's ``TUNE_KEYS``: key -> what it means).
    tune_keys: Mapping[str, str] = dataclasses.field(default_factory=dict)


#: Class attribute -> :class:`AlgorithmInfo` field, for every field read from a class.
INFO_ATTRIBUTES = {"name": "name", "summary": "summary", "Hyper": "Hyper",
                   "display_name": "display_name",
                   "requires_plain_sgd": "requires_plain_sgd", "records": "records",
                   "client_sampling": "client_sampling", "needs_public": "needs_public",
                   "heterogeneous_models": "heterogeneous_models", "TUNE_KEYS": "tune_keys"}


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


def read_info(module: str, reader: Reader | None = None) -> AlgorithmInfo | None:
    """The declarations of the class method module ``module`` registers, from its source.

    ``None`` when the module registers no class. Refuses what
    :func:`~pflrepro.algorithms.base.register_algorithm` refuses.
    """
    values = (reader or Reader()).declaration(module, tuple(INFO_ATTRIBUTES))
    if values is None:
        return None
    name = values.get("name")
    package = __name__.rpartition(".")[0]
    if name != module:
        raise DeclarationError(f"algorithm {name!r} must be defined in {package}.{name}, "
                               f"not {package}.{module}")
    if not values.get("summary"):
        raise DeclarationError(f"algorithm {name!r} declares no summary")
    if not dataclasses.is_dataclass(values.get("Hyper", NoHyper)):
        raise DeclarationError(f"algorithm {name!r}: Hyper must be a dataclass")
    fields = {"Hyper": NoHyper, **{INFO_ATTRIBUTES[k]: v for k, v in values.items()}}
    fields["records"] = tuple(fields.get("records", ()))
    fields["tune_keys"] = dict(fields.get("tune_keys", {}))
    return AlgorithmInfo(**fields, module=f"{package}.{module}")


class _Registry(Mapping[str, AlgorithmInfo]):
    """Name -> :class:`AlgorithmInfo`, read on first use from the package's source."""

    def __init__(self) -> None:
        self._infos: dict[str, AlgorithmInfo] | None = None

    def _load(self) -> dict[str, AlgorithmInfo]:
        if self._infos is None:
            reader = Reader()
            infos = (read_info(m.rpartition(".")[2], reader) for m in method_modules())
            self._infos = {info.name: info for info in infos if info is not None}
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
        if "choices" in meta:
            require_choice(value, meta["choices"],
                           f"algorithm {cls.name!r}: hyperparameter {key!r}")
        if "minimum" in meta and value < meta["minimum"]:
            raise ValueError(f"algorithm {cls.name!r}: hyperparameter {key!r} must be >= "
                             f"{meta['minimum']}, got {value!r}")
        if "maximum" in meta and value > meta["maximum"]:
            raise ValueError(f"algorithm {cls.name!r}: hyperparameter {key!r} must be <= "
                             f"{meta['maximum']}, got {value!r}")
    coerced = {k: (float(v) if type(fields[k].default) is float else v) for k, v in values.items()}
    return cls.Hyper(**coerced)
