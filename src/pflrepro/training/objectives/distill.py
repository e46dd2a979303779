"""Local training plus distillation towards targets on a public set (PerFed-CKT)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import nn
from torch.func import functional_call

from pflrepro.training.distillation import distill_loss_and_grad
from pflrepro.training.objectives.base import Batch, Objective, Stream, _vmapped_grad, masked_ce
from pflrepro.training.optim import OptState, Params

if TYPE_CHECKING:
    from pflrepro.training.engine import Engine


@dataclass(frozen=True)
class Distill(Objective):
    """The batch's mean cross-entropy plus ``lam`` × the mean KL(target ‖ s(w, x)) on P.

    Each step also draws a batch of rows of the public set P (stream ``purpose``, rows
    of ``batch_size`` or ``training.batch_size``); ``targets`` (|P|, N) holds a
    probability vector per public row, or one such matrix per client when
    ``per_client``. Only the cross-entropy part −Σ target · log s(w, x) of the KL carries
    gradient. The reported loss is the private batch's. PerFed-CKT's local step
    (Cho et al. 2021, eq. 2) towards the nearest centroid.
    """

    targets: torch.Tensor
    lam: float
    purpose: str = "public"
    batch_size: int | None = None
    per_client: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "targets", self.targets.detach())

    @property
    def streams(self) -> tuple[Stream, ...]:  # type: ignore[override]
        """The public batch's stream."""
        return (Stream(self.purpose, public=True, batch_size=self.batch_size),)

    def loss_and_grad(self, engine: Engine, params: Params, idx: torch.Tensor,
                      state: OptState, extra: Sequence[torch.Tensor] = ()
                      ) -> tuple[float, Params]:
        """The engine's private pass, then its distillation pass on the public rows."""
        assert engine.data.public is not None
        rows = extra[0]
        loss, grads = engine.loss_and_grad(params, idx)
        _, distill = distill_loss_and_grad(engine, params, engine.data.public[rows],
                                           self.targets[rows])
        return loss, {k: g + self.lam * distill[k] for k, g in grads.items()}

    def stacked_loss_and_grad(self, model: nn.Module, params: Params, x: torch.Tensor,
                              y: torch.Tensor, mask: torch.Tensor, count: torch.Tensor,
                              idx: torch.Tensor, state: OptState,
                              active: torch.Tensor | None,
                              extra: Sequence[Batch] = ()) -> tuple[torch.Tensor, Params]:
        """One vmapped pass of both losses; padding carries mask 0 in each."""
        rows, x_pub, _, m_pub, n_pub = extra[0]
        target = torch.gather(self.targets, 1, rows.unsqueeze(-1).expand(
            -1, -1, self.targets.shape[-1]))
        lam = float(self.lam)

        def both(p: Params, x_: torch.Tensor, y_: torch.Tensor, m: torch.Tensor,
                 n: torch.Tensor, xp: torch.Tensor, t: torch.Tensor, mp: torch.Tensor,
                 np_: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            private = masked_ce(model, p, x_, y_, m, n)
            log_q = functional_call(model, p, (xp,)).log_softmax(dim=-1)
            cross = (-(t * log_q).sum(dim=-1) * mp).sum() / np_
            return private + lam * cross, private.detach()

        grads, (_, loss) = _vmapped_grad(both, has_aux=True)(
            params, x, y, mask, count, x_pub, target, m_pub, n_pub)
        return loss, grads

    def row(self, i: int) -> Distill:
        """Client ``i``'s targets (a view) or the shared ones."""
        if not self.per_client:
            return self
        return dataclasses.replace(self, targets=self.targets[i], per_client=False)

    def stacked(self, params: Params) -> Distill:
        """The targets with a client dimension (broadcast if shared)."""
        if self.per_client:
            return self
        c = next(iter(params.values())).shape[0]
        return dataclasses.replace(self, targets=self.targets.unsqueeze(0).expand(c, -1, -1),
                                   per_client=True)

    def rows(self, a: int, b: int) -> Distill:
        """Trained clients ``a..b-1``."""
        return dataclasses.replace(self, targets=self.targets[a:b])
