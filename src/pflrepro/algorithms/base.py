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
metadata entry; the config schema's per-method properties come from it.
"""

from __future__ import annotations

import dataclasses
import inspect
from abc import ABC, abstractmethod
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import numpy as np
import torch

from pflrepro.results import MetricLog

if TYPE_CHECKING:
    from pflrepro.engine import Engine

State = dict[str, Any]


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
ALGORITHMS: dict[str, type[Algorithm]] = {}


def register_algorithm(cls: A) -> A:
    """Class decorator: make ``cls`` selectable as ``algorithm: <cls.name>``."""
    if cls.name in ALGORITHMS:
        raise ValueError(f"algorithm {cls.name!r} registered twice")
    if not dataclasses.is_dataclass(cls.Hyper):
        raise TypeError(f"{cls.__name__}.Hyper must be a dataclass")
    ALGORITHMS[cls.name] = cls
    return cls


def get_algorithm(name: str) -> type[Algorithm]:
    """Return the registered algorithm ``name`` (a clear error for unknown names)."""
    if name not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {name!r}; known: {sorted(ALGORITHMS)}")
    return ALGORITHMS[name]


def parse_hyper(cls: type[Algorithm], values: Mapping[str, Any]) -> Any:
    """Build ``cls.Hyper`` from a mapping; unknown keys and wrong types raise ValueError."""
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


def source_file(cls: type[Algorithm]) -> Path:
    """The module file that defines ``cls`` (its edits must rerun its training jobs)."""
    path = inspect.getsourcefile(cls)
    if path is None:
        raise ValueError(f"no source file for {cls.__name__}")
    return Path(path)
