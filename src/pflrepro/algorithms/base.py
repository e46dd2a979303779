"""The interface every federated algorithm implements, and its registration.

A method is one module, ``pflrepro/algorithms/<name>.py``, holding everything about
it: its ``Hyper`` dataclass (fields declared with
:func:`~pflrepro.algorithms.registry.hyper`: doc, default, bounds), its summary, the
metrics it records, the gradient terms (:mod:`pflrepro.training.terms`) its local training
adds, and the class below with its client update and its server (or peer)
aggregation. The :class:`~pflrepro.training.engine.Engine` owns the round loop and the shared
mechanics (data, mini-batches, seeding, local training on either path, evaluation);
an algorithm only says what happens in one round and how client ``k`` predicts:

* :meth:`Algorithm.init` returns the state: a dict of tensors and numbers (so it can
  be checkpointed and reloaded with ``torch.load(weights_only=True)``) whose keys the
  method declares as a :class:`typing.TypedDict` next to its class, the class's type
  parameter (``class FedEM(Algorithm[FedEMState])``; :func:`state_type` reads it);
* :meth:`Algorithm.round` runs one round and returns the new state and each
  client's mean training loss (NaN where a client did not train);
* :meth:`Algorithm.predict` returns client ``k``'s class probabilities — its
  *personalised* prediction, which is what every method is evaluated on;
* :meth:`Algorithm.record` logs the method's own values (:attr:`Algorithm.records`,
  e.g. FedeRiCo's w_ij); the engine calls it after initialisation (round 0) and after
  every round.

Client models are held *stacked*: one tensor per parameter with a leading client (or
component) dimension (:mod:`pflrepro.training.params`), so local training can run all clients
at once.

Adding a method is that file, its test and a config entry: the registry
(:mod:`pflrepro.algorithms.registry`) finds every registered class of the package.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import inspect
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import (
    TYPE_CHECKING,
    Any,
    ClassVar,
    Generic,
    TypedDict,
    TypeVar,
    get_args,
    is_typeddict,
)

import numpy as np

from pflrepro.algorithms.registry import (
    INFOS,
    LOADED,
    NOT_METHODS,
    NoHyper,
    algorithm_info,
    hyper,
    parse_hyper,
)
from pflrepro.training.method import S

if TYPE_CHECKING:
    import torch

    from pflrepro.store.results import MetricLog
    from pflrepro.training.engine import Engine
    from pflrepro.training.optim import OptState, Params

__all__ = ["ALGORITHMS", "Algorithm", "ClientModels", "NoHyper", "get_algorithm", "hyper",
           "parse_hyper", "register_algorithm", "source_file", "state_type"]


class ClientModels(TypedDict):
    """One model per client and its optimiser state, each stacked by client.

    What :meth:`~pflrepro.training.engine.Engine.client_init` returns: Local's state, and
    the start of the states that add to it (FedAMP's, FedFomo's, FedeRiCo's).
    """

    params: Params
    opt: OptState


class Algorithm(ABC, Generic[S]):
    """Base class of every algorithm, over its state type ``S``; see the module docstring."""

    #: Registry name, used as ``algorithm:`` in the config.
    name: ClassVar[str]
    #: One-line description for the config schema.
    summary: ClassVar[str]
    #: The name tables and figures show (its paper's spelling); "" shows the id.
    display_name: ClassVar[str] = ""
    #: Frozen dataclass of hyperparameters.
    Hyper: ClassVar[type] = NoHyper
    #: Metric names :meth:`record` logs (the workflow draws weight and distance
    #: figures for the methods that record ``results.WEIGHT`` / ``MODEL_DISTANCE``).
    records: ClassVar[tuple[str, ...]] = ()
    #: Presumes plain SGD (``training.optimizer: sgd``, ``momentum: 0``); the config
    #: check rejects any other optimiser before a job starts.
    requires_plain_sgd: ClassVar[bool] = False
    #: Client sampling (the papers' "partial participation"): trains only
    #: ``engine.participants(rnd)`` each round, so it accepts
    #: ``training.client_fraction`` < 1; the config check rejects it for the others.
    client_sampling: ClassVar[bool] = False
    #: Distills on the experiment's unlabeled public set (``engine.data.public``); the
    #: config check rejects an experiment without one.
    needs_public: ClassVar[bool] = False
    #: Accepts clients of different architectures (``training.architectures`` with two
    #: or more entries: ``engine.arch_of``, ``engine.client_models``); the config check
    #: rejects such an experiment for the others.
    heterogeneous_models: ClassVar[bool] = False

    def __init__(self, engine: Engine, hyper: Any) -> None:
        self.engine = engine
        self.hp = hyper

    @abstractmethod
    def init(self) -> S:
        """Return the initial state (before round 1)."""

    @abstractmethod
    def round(self, state: S, rnd: int) -> tuple[S, np.ndarray]:
        """Run round ``rnd`` (1-based); return the new state and per-client train loss."""

    @abstractmethod
    def predict(self, state: S, client: int, x: torch.Tensor, rnd: int) -> torch.Tensor:
        """Return client ``client``'s class probabilities for inputs ``x``."""

    def record(self, state: S, rnd: int, log: MetricLog) -> None:  # noqa: B027
        """Log method-specific values after round ``rnd`` (default: nothing)."""


def state_type(cls: type[Algorithm]) -> type:
    """The TypedDict ``cls`` declares its state with.

    That is the type argument of its nearest parametrised base (``Algorithm[FedEMState]``,
    ``FedAvgBase[DittoState]``). Raises ``TypeError`` where no base in ``cls``'s MRO is
    parametrised by a TypedDict.
    """
    for klass in cls.__mro__:
        for base in klass.__dict__.get("__orig_bases__", ()):
            args = get_args(base)
            if args and is_typeddict(args[0]):
                return args[0]
    raise TypeError(f"{cls.__name__} declares no state type: derive it from "
                    "Algorithm[<its TypedDict>]")


A = TypeVar("A", bound=type[Algorithm])
#: Registered classes by name (kept in the registry module, which needs no import of this
#: one: :data:`pflrepro.algorithms.registry.LOADED`).
_LOADED: dict[str, type[Algorithm]] = LOADED


def register_algorithm(cls: A) -> A:
    """Class decorator: make ``cls`` selectable as ``algorithm: <cls.name>``.

    ``cls`` must live in ``pflrepro/algorithms/<cls.name>.py`` (a method is one file)
    and declare a summary and a ``Hyper`` dataclass.
    """
    expected = f"pflrepro.algorithms.{cls.name}"
    if cls.__module__ != expected:
        raise ValueError(f"algorithm {cls.name!r} must be defined in {expected}, "
                         f"not {cls.__module__}")
    if not getattr(cls, "summary", ""):
        raise ValueError(f"algorithm {cls.name!r} declares no summary")
    if not dataclasses.is_dataclass(cls.Hyper):
        raise TypeError(f"algorithm {cls.name!r}: Hyper must be a dataclass")
    state_type(cls)  # raises where the method declares no TypedDict state
    if cls.name in _LOADED and _LOADED[cls.name] is not cls:
        raise ValueError(f"algorithm {cls.name!r} registered twice")
    _LOADED[cls.name] = cls
    return cls


def registered() -> dict[str, type[Algorithm]]:
    """The classes registered so far (the registry imports every module first)."""
    return dict(_LOADED)


def get_algorithm(name: str) -> type[Algorithm]:
    """Return the registered algorithm ``name`` (a clear error for unknown names).

    Imports only the method's own module (``pflrepro.algorithms.<name>``), so a
    training job loads the code its digest covers and nothing else.
    """
    if name not in _LOADED:
        module = f"pflrepro.algorithms.{name}"
        if (not name.isidentifier() or name in NOT_METHODS
                or importlib.util.find_spec(module) is None):
            algorithm_info(name)  # raises, listing the known names
        importlib.import_module(module)
        if name not in _LOADED:
            raise ValueError(f"module {module} registers no algorithm {name!r}")
    return _LOADED[name]


class _Algorithms(Mapping[str, type[Algorithm]]):
    """Name -> algorithm class.

    The keys are :data:`~pflrepro.algorithms.registry.INFOS`', whose first read imports
    every method's module: so does any use of this mapping. :func:`get_algorithm`
    imports the one method's module only (what a training job does).
    """

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
