"""What the engine runs: the round interface of every method, and a method's state.

A module of its own, light to import (no torch at run time): the methods
(:mod:`pflrepro.algorithms`) build on it, and the config check imports them.

Each method declares its state as a :class:`typing.TypedDict` in its own module (its
keys and what each holds) and runs as ``Method[ThatState]``. At run time a state is a
plain dict of tensors, lists and numbers: the checkpoint saves it as it is and
``torch.load(weights_only=True)`` reads it back.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    import numpy as np
    import torch

    from pflrepro.store.results import MetricLog

#: Any method's state as the engine and the checkpoint see it: string keys, each
#: method's own values.
State = Mapping[str, Any]

#: The state type of one method (its TypedDict).
S = TypeVar("S", bound=State)


class Method(Protocol[S]):
    """What the engine runs: the round interface of every method, over its state type.

    :class:`pflrepro.algorithms.base.Algorithm` implements it; it is stated here so
    that the training core never imports the methods built on it.
    """

    @property
    def name(self) -> str:
        """The method's registry name (a class attribute of each method)."""

    def init(self) -> S:
        """The state before round 1."""

    def round(self, state: S, rnd: int) -> tuple[S, np.ndarray]:
        """Round ``rnd``: the new state and each client's training loss."""

    def predict(self, state: S, client: int, x: torch.Tensor, rnd: int) -> torch.Tensor:
        """Client ``client``'s class probabilities for ``x``."""

    def record(self, state: S, rnd: int, log: MetricLog) -> None:
        """Log the method's own values after round ``rnd``."""
