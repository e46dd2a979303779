"""The objective protocol: what a local step differentiates.

An objective's further seeded streams, and the padded-batch loss every kind builds on.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad_and_value, vmap

from pflrepro.training.optim import OptState, Params

if TYPE_CHECKING:
    from pflrepro.training.engine import Engine


#: A padded batch of a further stream in a vectorised pass: ``(index, x, y, mask, count)``.
Batch = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]


@dataclass(frozen=True)
class Stream:
    """A further seeded mini-batch stream of an objective (see :attr:`Objective.streams`).

    ``public``: batches are row indices of the public set (``engine.data.public``), not
    of the data set; else the client's training rows (or the call's pool).
    ``batch_size``: None for ``training.batch_size`` (capped by the pool's size).
    ``client``: None for the trained client; else the batches are rows of that client's
    training set (never the call's pool), seeded by (seed, round, ``client``,
    ``purpose``): exactly the batches ``engine.minibatches(client, ...)`` gives that
    client's own training under ``purpose``. ``whole``: every step's batch is the whole
    pool in stored order (no draw; ``batch_size`` does not apply).
    """

    purpose: str
    public: bool = False
    batch_size: int | None = None
    client: int | None = None
    whole: bool = False

    def __post_init__(self) -> None:
        if self.public and self.client is not None:
            raise ValueError(f"stream {self.purpose!r}: a public stream has no client")
        if self.whole and self.batch_size is not None:
            raise ValueError(f"stream {self.purpose!r}: a whole-pool stream has no batch size")


class Objective(ABC):
    """The loss and gradient of one local step (see the module docstring)."""

    #: Whether the objective's tensors carry a leading client dimension.
    per_client: bool
    #: Further mini-batch streams a step draws a batch from, besides the training
    #: call's own (Per-FedAvg's inner and Hessian batches, PerFed-CKT's public batch):
    #: seeded like it by (seed, round, client, purpose), as many steps. Those of one
    #: trained client; see :meth:`client_streams` for a per-client objective's.
    streams: tuple[Stream, ...] = ()

    def client_streams(self, i: int) -> tuple[Stream, ...]:
        """The further streams of the ``i``-th trained client (its :meth:`row`'s).

        They may differ from client to client (:class:`PeerWeighted`); the vectorised
        path pads a client with fewer streams with empty batches (mask 0).
        """
        return self.row(i).streams

    @abstractmethod
    def loss_and_grad(self, engine: Engine, params: Params, idx: torch.Tensor,
                      state: OptState, extra: Sequence[torch.Tensor] = ()
                      ) -> tuple[float, Params]:
        """One client's reported loss and gradient on samples ``idx`` (loop path).

        ``state`` is the client's optimiser state; the objective may update its own
        ``obj.*`` entries in place. ``extra``: this step's batch of each of
        :attr:`streams`.
        """

    @abstractmethod
    def stacked_loss_and_grad(self, model: nn.Module, params: Params, x: torch.Tensor,
                              y: torch.Tensor, mask: torch.Tensor, count: torch.Tensor,
                              idx: torch.Tensor, state: OptState,
                              active: torch.Tensor | None,
                              extra: Sequence[Batch] = ()) -> tuple[torch.Tensor, Params]:
        """Every client's loss (C,) and gradient at once (vectorised path).

        ``x``, ``y``, ``mask`` (C, B, ...): the padded batches, ``count`` (C,) their real
        sizes, ``idx`` (C, B) their data rows; ``active`` (C,) bool or None (all):
        clients whose step is real. ``obj.*`` state of inactive clients must not move.
        ``extra``: per stream of :attr:`streams`, this step's padded batch
        ``(index, x, y, mask, count)`` (``y`` zeros for the label-less public set).
        """

    @abstractmethod
    def row(self, i: int) -> Objective:
        """The objective of the ``i``-th trained client alone (itself if shared)."""

    @abstractmethod
    def stacked(self, params: Params) -> Objective:
        """The objective with a client dimension like stacked ``params``."""

    @abstractmethod
    def rows(self, a: int, b: int) -> Objective:
        """The objective of trained clients ``a..b-1`` (stacked objectives only)."""


def masked_ce(model: nn.Module, p: Params, x: torch.Tensor, y: torch.Tensor,
              m: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
    """One client's padded-batch loss: Σ mask · ℓ / n (the loop's mean over real samples)."""
    out = functional_call(model, p, (x,))
    return (F.cross_entropy(out, y, reduction="none") * m).sum() / n


def _vmapped_grad(loss: Callable[..., torch.Tensor], argnums: int | tuple[int, ...] = 0,
                  has_aux: bool = False) -> Callable[..., object]:
    return vmap(grad_and_value(loss, argnums=argnums, has_aux=has_aux))
