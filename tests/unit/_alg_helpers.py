"""One way to build a method on a tiny engine, shared by the ``test_algorithm_*`` files.

Each file binds it to its method (and its own data sizes or hyperparameter defaults)
once, e.g. ``_alg = algorithm_factory(FedEM)``; a test then calls
``e, alg = _alg({"components": 2}, lr=0.5)``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from _fl_helpers import make_data, make_engine

from pflrepro.algorithms.base import Algorithm, parse_hyper
from pflrepro.data.federated import FederatedData
from pflrepro.training.engine import Engine

A = TypeVar("A", bound=Algorithm[Any])


def build_algorithm(cls: type[A], params: Mapping[str, Any] | None = None,
                    data: FederatedData | None = None, seed: int = 0,
                    sizes: Mapping[str, Any] | None = None,
                    defaults: Mapping[str, Any] | None = None,
                    **training: Any) -> tuple[Engine, A]:
    """An engine (:func:`make_engine`) and ``cls`` on it with ``params`` parsed as a config's.

    ``data`` defaults to ``make_data(**sizes)`` (``make_data()`` without ``sizes``);
    ``params`` overrides ``defaults`` key by key; ``training`` goes to the engine's
    training settings (``workers`` to the engine itself).
    """
    if data is None:
        data = make_data(**(sizes or {}))
    engine = make_engine(data, seed=seed, **training)
    return engine, cls(engine, parse_hyper(cls, {**(defaults or {}), **(params or {})}))


def algorithm_factory(cls: type[A], sizes: Mapping[str, Any] | None = None,
                      defaults: Mapping[str, Any] | None = None
                      ) -> Callable[..., tuple[Engine, A]]:
    """:func:`build_algorithm` for ``cls`` with a test file's own data sizes and defaults.

    The factory's signature: ``(params=None, data=None, seed=0, **training) ->
    (engine, algorithm)``.
    """

    def factory(params: Mapping[str, Any] | None = None, data: FederatedData | None = None,
                seed: int = 0, **training: Any) -> tuple[Engine, A]:
        return build_algorithm(cls, params, data=data, seed=seed, sizes=sizes,
                               defaults=defaults, **training)

    return factory
