"""The interface every federated algorithm implements, and the registry.

An algorithm is a small class in its own module holding both its client update and
its server (or peer) aggregation. The :class:`~pflrepro.engine.Engine` owns the round
loop and all shared mechanics (data, batching, seeding, local SGD, evaluation); an
algorithm only says what happens in one round and how client ``k`` predicts:

* :meth:`Algorithm.init` returns the state (a dict of tensors and numbers, so it can
  be checkpointed and reloaded with ``torch.load(weights_only=True)``);
* :meth:`Algorithm.round` runs one round and returns the new state and each
  client's mean training loss (NaN where a client did not train);
* :meth:`Algorithm.predict` returns client ``k``'s class probabilities — its
  *personalised* prediction, which is what every method is evaluated on;
* :meth:`Algorithm.record` may log method-specific values (e.g. FedeRiCo's w_ij);
  the engine calls it after initialisation (round 0) and after every round.

Client models are held *stacked*: one tensor per parameter with a leading client
(or component) dimension, so a later engine can train all clients at once.

Hyperparameters are a frozen dataclass (``Hyper``) whose fields carry a ``doc``
metadata entry; the config schema's per-method properties come from it. Names,
summaries and ``Hyper`` classes are declared in :mod:`pflrepro.algorithms.registry`,
which imports no torch: the config and the workflow parse use only that, and an
algorithm's module is imported the first time :func:`get_algorithm` (or
:data:`ALGORITHMS`) is asked for its class. This module imports no torch either.
"""

from __future__ import annotations

import importlib
import inspect
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import numpy as np

from pflrepro.algorithms.registry import (
    INFOS,
    NoHyper,
    algorithm_info,
    hyper,
    parse_hyper,
)

if TYPE_CHECKING:
    import torch

    from pflrepro.engine import Engine
    from pflrepro.results import MetricLog

__all__ = ["ALGORITHMS", "Algorithm", "NoHyper", "State", "get_algorithm", "hyper",
           "parse_hyper", "register_algorithm", "source_file"]

State = dict[str, Any]


class Algorithm(ABC):
    """Base class of every algorithm; see the module docstring."""

    #: Registry name, used as ``algorithm:`` in the config.
    name: ClassVar[str]
    #: One-line description for the config schema.
    summary: ClassVar[str]
    #: Frozen dataclass of hyperparameters.
    Hyper: ClassVar[type] = NoHyper

    def __init__(self, engine: Engine, hyper: Any) -> None:
        self.engine = engine
        self.hp = hyper

    @abstractmethod
    def init(self) -> State:
        """Return the initial state (before round 1)."""

    @abstractmethod
    def round(self, state: State, rnd: int) -> tuple[State, np.ndarray]:
        """Run round ``rnd`` (1-based); return the new state and per-client train loss."""

    @abstractmethod
    def predict(self, state: State, client: int, x: torch.Tensor, rnd: int) -> torch.Tensor:
        """Return client ``client``'s class probabilities for inputs ``x``."""

    def record(self, state: State, rnd: int, log: MetricLog) -> None:  # noqa: B027
        """Log method-specific values after round ``rnd`` (default: nothing)."""


A = TypeVar("A", bound=type[Algorithm])
_LOADED: dict[str, type[Algorithm]] = {}


def register_algorithm(cls: A) -> A:
    """Class decorator: make ``cls`` selectable as ``algorithm: <cls.name>``.

    ``cls`` must match its declaration in :data:`~pflrepro.algorithms.registry.INFOS`
    (module, summary and the very ``Hyper`` class), so the config, which sees only
    the declaration, validates exactly what the class runs with.
    """
    info = INFOS.get(cls.name)
    if info is None:
        raise ValueError(f"algorithm {cls.name!r} is not declared in "
                         f"pflrepro.algorithms.registry.INFOS")
    if cls.name in _LOADED and _LOADED[cls.name] is not cls:
        raise ValueError(f"algorithm {cls.name!r} registered twice")
    if cls.__module__ != info.module:
        raise ValueError(f"algorithm {cls.name!r} is declared in {info.module}, "
                         f"defined in {cls.__module__}")
    if cls.Hyper is not info.Hyper:
        raise TypeError(f"{cls.__name__}.Hyper is not the declared {info.Hyper.__name__}")
    if cls.summary != info.summary:
        raise ValueError(f"{cls.__name__}.summary differs from its declaration in "
                         f"pflrepro.algorithms.registry")
    _LOADED[cls.name] = cls
    return cls


def get_algorithm(name: str) -> type[Algorithm]:
    """Return the registered algorithm ``name`` (a clear error for unknown names).

    Imports the algorithm's module (and so torch) on first use.
    """
    if name not in _LOADED:
        info = algorithm_info(name)
        importlib.import_module(info.module)
        if name not in _LOADED:
            raise ValueError(f"module {info.module} registers no algorithm {name!r}")
    return _LOADED[name]


class _Algorithms(Mapping[str, type[Algorithm]]):
    """Name -> algorithm class; the keys are known without importing any algorithm."""

    def __getitem__(self, name: str) -> type[Algorithm]:
        if name not in INFOS:
            raise KeyError(name)
        return get_algorithm(name)

    def __iter__(self) -> Iterator[str]:
        return iter(INFOS)

    def __len__(self) -> int:
        return len(INFOS)


#: Every algorithm by name; looking one up imports its module.
ALGORITHMS: Mapping[str, type[Algorithm]] = _Algorithms()


def source_file(cls: type[Algorithm]) -> Path:
    """The module file that defines ``cls`` (its edits must rerun its training jobs)."""
    path = inspect.getsourcefile(cls)
    if path is None:
        raise ValueError(f"no source file for {cls.__name__}")
    return Path(path)
