"""Objectives: what a local step differentiates when it is not the plain mean loss.

Local training (:mod:`pflrepro.training.local_training`) draws the mini-batches, adds the
gradient terms (:mod:`pflrepro.training.terms`), steps the optimiser and masks padded steps;
an objective decides the loss of one step. Without one, a step's loss is the mean
cross-entropy of the batch.

An objective states its loss once, for one client: :meth:`Objective.loss` of that
client's parameters, its padded :class:`Batch` and a batch of each further
:class:`Stream`. Both training paths differentiate that one function: the loop one
client at a time by ``torch.autograd.grad`` (:func:`loss_and_grad`), the vectorised
path by ``torch.func.vmap`` of ``grad_and_value`` of the same call over the client
dimension (:func:`stacked_loss_and_grad`), so the code a GPU runs is the code every
CPU test runs.

Like a term, an objective is data, given once for every client or per client: a
field made by :func:`per_client_field` holds one client's value in a shared (or
row) objective and one value per trained client, stacked, when ``per_client`` is set.
:meth:`Objective.row`, :meth:`Objective.rows` and :meth:`Objective.stacked` slice
and broadcast those fields for every objective alike. An objective that keeps a
per-client quantity across steps (APFL's α) keeps it in the optimiser state under a
key ``obj.<name>``: :meth:`Objective.loss` reads it, :meth:`Objective.update` gives
its next value (from the step's auxiliary outputs and, for the keys named in
:attr:`Objective.differentiates`, its gradient); a padded step leaves it as it was,
and the optimiser never touches it.

The objectives live beside the method that uses them (FedEM's sample weights in
:mod:`pflrepro.algorithms.fedem`, FedeRiCo's peers' batches in
:mod:`pflrepro.algorithms.federico`, APFL's mixed pair, Per-FedAvg's MAML step,
PerFed-CKT's distillation and FedMix's gated experts in theirs).
"""

from __future__ import annotations

import copy
import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad_and_value, vmap

from pflrepro.training.optim import OptState, Params
from pflrepro.training.params import grad_leaves

__all__ = ["OBJ_PREFIX", "Aux", "Batch", "Objective", "Stream", "loss_and_grad", "masked_ce",
           "per_client_field", "stacked_loss_and_grad"]

#: The optimiser-state key prefix of an objective's own per-client state.
OBJ_PREFIX = "obj."
#: Auxiliary outputs of :meth:`Objective.loss` (``"loss"``: the reported loss).
Aux = dict[str, torch.Tensor]
_PER_CLIENT = "pflrepro.per_client"


def per_client_field(**kwargs: Any) -> Any:
    """A dataclass field holding one client's value, or a stack of them when per client.

    A tensor field is stacked along a new leading dimension; any other value (a tuple
    of streams) is a tuple with one entry per trained client.
    """
    return dataclasses.field(metadata={_PER_CLIENT: True}, **kwargs)


class Batch(NamedTuple):
    """One client's padded batch: data rows, inputs, labels, mask and real size.

    ``idx`` the data rows (public-set rows for a public stream), ``mask`` 1 for real
    samples and 0 for padding, ``count`` the real samples (a float scalar); ``y`` is
    zeros for the label-less public set. On the vectorised path each has a leading
    client dimension outside :meth:`Objective.loss` and none inside.
    """

    idx: torch.Tensor
    x: torch.Tensor
    y: torch.Tensor
    mask: torch.Tensor
    count: torch.Tensor


@dataclass(frozen=True)
class Stream:
    """A further seeded mini-batch stream of an objective (see :attr:`Objective.streams`).

    ``public``: batches are row indices of the public set (``data.public``), not
    of the data set; else the client's training rows (or the call's pool).
    ``batch_size``: None for ``training.batch_size`` (capped by the pool's size).
    ``client``: None for the trained client; else the batches are rows of that client's
    training set (never the call's pool), seeded by (seed, round, ``client``,
    ``purpose``): exactly the batches ``minibatches(client, ...)`` gives that
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
    """One client's loss of a local step (see the module docstring); a frozen dataclass."""

    #: Whether the :func:`per_client_field` fields hold one value per trained client.
    per_client: bool
    #: Further mini-batch streams a step draws a batch from, besides the training
    #: call's own (Per-FedAvg's inner and Hessian batches, PerFed-CKT's public batch):
    #: seeded like it by (seed, round, client, purpose), as many steps. Those of one
    #: trained client; see :meth:`client_streams` for a per-client objective's.
    streams: tuple[Stream, ...] = ()
    #: The ``obj.*`` state keys whose gradient :meth:`update` receives.
    differentiates: tuple[str, ...] = ()

    @abstractmethod
    def loss(self, model: nn.Module, params: Params, batch: Batch, extra: Sequence[Batch],
             state: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, Aux]:
        """One client's loss to differentiate, and auxiliary outputs (pure tensor ops).

        ``extra``: this step's batch of each of the client's streams (a client with
        fewer streams than the widest on the vectorised path gets empty batches, mask
        0); ``state``: the client's ``obj.*`` state. ``aux["loss"]``, when given, is the
        reported loss (else the loss itself). The code runs under ``vmap`` too: no
        data-dependent Python branches, no in-place writes to its inputs.
        """

    def update(self, state: Mapping[str, torch.Tensor], aux: Aux,
               grads: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The next values of the ``obj.*`` state after a step (none by default).

        ``grads``: the gradient of the loss in each key of :attr:`differentiates`.
        """
        return {}

    # ---------------------------------------------------------------- per-client fields
    def _client_fields(self) -> list[str]:
        return [f.name for f in dataclasses.fields(self)  # type: ignore[arg-type]
                if f.metadata.get(_PER_CLIENT)]

    def _with(self, per_client: bool, values: Mapping[str, Any]) -> Any:
        """A copy with ``values`` in place of fields (no ``__post_init__``: views only)."""
        out = copy.copy(self)
        for name, value in {**values, "per_client": per_client}.items():
            object.__setattr__(out, name, value)
        return out

    def row(self, i: int) -> Any:
        """The objective of the ``i``-th trained client alone (itself if shared)."""
        if not self.per_client:
            return self
        return self._with(False, {n: getattr(self, n)[i] for n in self._client_fields()})

    def rows(self, a: int, b: int) -> Any:
        """The objective of trained clients ``a..b-1`` (stacked objectives only)."""
        return self._with(True, {n: getattr(self, n)[a:b] for n in self._client_fields()})

    def stacked(self, clients: int) -> Any:
        """The objective with ``clients`` rows (a shared one's value repeated, as views)."""
        if self.per_client:
            return self

        def repeat(v: Any) -> Any:
            if isinstance(v, torch.Tensor):
                return v.unsqueeze(0).expand(clients, *v.shape)
            return (v,) * clients
        return self._with(True, {n: repeat(getattr(self, n)) for n in self._client_fields()})

    def client_streams(self, i: int) -> tuple[Stream, ...]:
        """The further streams of the ``i``-th trained client (its :meth:`row`'s).

        They may differ from client to client (FedeRiCo's peers); the vectorised path
        pads a client with fewer streams with empty batches (mask 0).
        """
        return self.row(i).streams


def masked_ce(model: nn.Module, params: Params, batch: Batch) -> torch.Tensor:
    """One client's padded-batch loss: Σ mask · ℓ / count (the mean over real samples)."""
    out = functional_call(model, params, (batch.x,))
    return (F.cross_entropy(out, batch.y, reduction="none") * batch.mask).sum() / batch.count


def _split_state(objective: Objective, state: OptState
                 ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """The ``obj.*`` state: the differentiated keys, and the others."""
    own = {k: v for k, v in state.items() if k.startswith(OBJ_PREFIX)}
    diff = {k: own.pop(k) for k in objective.differentiates}
    return diff, own


def _differentiated(objective: Objective, model: nn.Module) -> Callable[..., Any]:
    """``grad_and_value`` of the objective's loss in the parameters and its state keys."""
    def one(params: Params, diff: dict[str, torch.Tensor], rest: dict[str, torch.Tensor],
            fields: dict[str, Any] | None, batch: Batch, extra: Sequence[Batch]
            ) -> tuple[torch.Tensor, Aux]:
        obj = objective if fields is None else objective._with(False, fields)
        value, aux = obj.loss(model, params, batch, extra, {**rest, **diff})
        return value, {**aux, "loss": aux.get("loss", value).detach()}
    return grad_and_value(one, argnums=(0, 1), has_aux=True)


def _apply(objective: Objective, state: OptState, aux: Aux, diff: dict[str, torch.Tensor],
           rest: dict[str, torch.Tensor], grads: dict[str, torch.Tensor],
           active: torch.Tensor | None) -> None:
    """Write :meth:`Objective.update`'s values into ``state`` (inactive clients keep theirs)."""
    new = objective.update({**rest, **diff}, aux, grads)
    for key, value in new.items():
        old = state[key]
        value = value.detach().to(old.dtype)
        if active is not None:
            value = torch.where(active.view(-1, *([1] * (old.dim() - 1))), value, old)
        old.copy_(value)


def loss_and_grad(objective: Objective, model: nn.Module, params: Params, batch: Batch,
                  extra: Sequence[Batch], state: OptState) -> tuple[torch.Tensor, Params]:
    """One client's reported loss and gradient (the loop); its ``obj.*`` state updated.

    The loss's gradient by ``torch.autograd.grad`` on the client's own leaves: the same
    function and derivatives as the vectorised path's ``grad_and_value``, without the
    per-operation cost of a function transform around a single client.
    """
    diff, rest = _split_state(objective, state)
    leaves = grad_leaves({**params, **diff})
    with torch.enable_grad():
        value, aux = objective.loss(model, {k: leaves[k] for k in params}, batch, extra,
                                    {**rest, **{k: leaves[k] for k in diff}})
        if value.requires_grad:
            found = torch.autograd.grad(value, list(leaves.values()), allow_unused=True,
                                        materialize_grads=True)
        else:  # no term reaches a parameter (no stream, say): a zero gradient
            found = tuple(torch.zeros_like(v) for v in leaves.values())
    grads = dict(zip(leaves, found, strict=True))
    aux = {**aux, "loss": aux.get("loss", value).detach()}
    _apply(objective, state, aux, diff, rest, {k: grads.pop(k) for k in diff}, None)
    return aux["loss"], grads


def stacked_loss_and_grad(objective: Objective, model: nn.Module, params: Params,
                          batch: Batch, extra: Sequence[Batch], state: OptState,
                          active: torch.Tensor | None) -> tuple[torch.Tensor, Params]:
    """Every client's reported loss (C,) and gradient: ``vmap`` of :func:`loss_and_grad`'s.

    ``objective`` is stacked (:meth:`Objective.stacked`), ``params``, ``batch``,
    ``extra`` and ``state`` carry a leading client dimension; ``active`` (C,) bool or
    None (all): clients whose step is real; the others' ``obj.*`` state does not move.
    """
    diff, rest = _split_state(objective, state)
    device = next(iter(params.values())).device
    fields = {n: getattr(objective, n).to(device) for n in objective._client_fields()
              if isinstance(getattr(objective, n), torch.Tensor)}
    (grads, g_state), (_, aux) = vmap(_differentiated(objective, model))(
        params, diff, rest, fields, batch, list(extra))
    _apply(objective, state, aux, diff, rest, g_state, active)
    return aux["loss"], grads
