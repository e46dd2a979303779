"""What the engine runs: the round interface of every method, and a method's state.

A module of its own, light to import (no torch at run time): the methods
(:mod:`pflrepro.algorithms`) build on it, and the config check imports them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import numpy as np
    import torch

    from pflrepro.store.results import MetricLog

#: A method's state between rounds (what its ``init`` and ``round`` return).
State = dict[str, Any]


class Method(Protocol):
    """What the engine runs: the round interface of every method.

    :class:`pflrepro.algorithms.base.Algorithm` implements it; it is stated here so
    that the training core never imports the methods built on it.
    """

    name: str

    def init(self) -> State:
        """The state before round 1."""

    def round(self, state: State, rnd: int) -> tuple[State, np.ndarray]:
        """Round ``rnd``: the new state and each client's training loss."""

    def predict(self, state: State, client: int, x: torch.Tensor, rnd: int) -> torch.Tensor:
        """Client ``client``'s class probabilities for ``x``."""

    def record(self, state: State, rnd: int, log: MetricLog) -> None:
        """Log the method's own values after round ``rnd``."""
