"""Gradient terms a method adds to its clients' local steps.

Local training (:mod:`pflrepro.training.local_training`) computes each step's data gradient and
then adds every term of the method, in order, before the optimiser step. A term is
data: its tensors are given either once for every client (shaped like one model) or
per client (stacked along a leading client dimension, row ``i`` for the ``i``-th
trained client). The same :meth:`GradTerm.add` serves the per-client loop (one
client's row, :meth:`GradTerm.row`) and the vectorised path (all rows at once, the
tensors broadcast over the client dimension), so both paths add the same arithmetic.

A method needing a new kind of term writes a subclass here; neither the engine nor
the training paths change.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

from pflrepro.training.optim import Params

__all__ = ["GradTerm", "Offset", "Proximal", "add_terms"]


class GradTerm(ABC):
    """A term added to every local step's gradient."""

    #: Whether the term's tensors carry a leading client dimension.
    per_client: bool

    @abstractmethod
    def add(self, params: Params, grads: Params) -> Params:
        """``grads`` plus the term at ``params`` (new tensors; inputs untouched)."""

    @abstractmethod
    def row(self, i: int) -> GradTerm:
        """The term of the ``i``-th trained client alone (itself if shared by all)."""

    @abstractmethod
    def stacked(self, params: Params) -> GradTerm:
        """The term with a client dimension like stacked ``params`` (broadcast if shared)."""

    @abstractmethod
    def rows(self, a: int, b: int) -> GradTerm:
        """The term of trained clients ``a..b-1`` (stacked terms only)."""


def _detached(values: Params) -> Params:
    return {k: v.detach() for k, v in values.items()}


def _broadcast(values: Params, params: Params) -> Params:
    return {k: (v if v.dim() == params[k].dim() else v.unsqueeze(0).expand_as(params[k]))
            for k, v in values.items()}


@dataclass(frozen=True)
class Proximal(GradTerm):
    """``coef · (params − anchor)``: the gradient of ``(coef/2) ‖params − anchor‖²``.

    FedProx's pull to the global model (coef = μ), FedAMP's to the cloud model
    (coef = λ/α), Ditto's personal model to the global one (coef = λ). The term is
    computed from the live parameters of every step, so it acts on every update.
    """

    anchor: Params
    coef: float
    per_client: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "anchor", _detached(self.anchor))

    def add(self, params: Params, grads: Params) -> Params:
        """``g + coef · (p − anchor)`` per parameter (one new tensor each, same bits)."""
        return {k: (params[k] - self.anchor[k]).mul_(self.coef).add_(g)
                for k, g in grads.items()}

    def row(self, i: int) -> Proximal:
        """Client ``i``'s anchor (a view) or the shared one."""
        if not self.per_client:
            return self
        return Proximal({k: v[i] for k, v in self.anchor.items()}, self.coef)

    def stacked(self, params: Params) -> Proximal:
        """The anchor broadcast over ``params``' client dimension."""
        return Proximal(_broadcast(self.anchor, params), self.coef, per_client=True)

    def rows(self, a: int, b: int) -> Proximal:
        """Trained clients ``a..b-1``."""
        return Proximal({k: v[a:b] for k, v in self.anchor.items()}, self.coef, per_client=True)


@dataclass(frozen=True)
class Offset(GradTerm):
    """A constant ``+ offset`` (SCAFFOLD's control-variate correction ``c − c_i``)."""

    offset: Params
    per_client: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "offset", _detached(self.offset))

    def add(self, params: Params, grads: Params) -> Params:
        """``g + offset`` per parameter."""
        return {k: g + self.offset[k] for k, g in grads.items()}

    def row(self, i: int) -> Offset:
        """Client ``i``'s offset (a view) or the shared one."""
        if not self.per_client:
            return self
        return Offset({k: v[i] for k, v in self.offset.items()})

    def stacked(self, params: Params) -> Offset:
        """The offset broadcast over ``params``' client dimension."""
        return Offset(_broadcast(self.offset, params), per_client=True)

    def rows(self, a: int, b: int) -> Offset:
        """Trained clients ``a..b-1``."""
        return Offset({k: v[a:b] for k, v in self.offset.items()}, per_client=True)


def add_terms(terms: Sequence[GradTerm], params: Params, grads: Params) -> Params:
    """``grads`` plus every term, in order."""
    for term in terms:
        grads = term.add(params, grads)
    return grads
