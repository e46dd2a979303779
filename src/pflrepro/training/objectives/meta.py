"""MAML's objective (Per-FedAvg) and the exact Hessian-vector product it uses."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad, grad_and_value, vjp, vmap

from pflrepro.training.objectives.base import Batch, Objective, Stream, masked_ce
from pflrepro.training.optim import OptState, Params

if TYPE_CHECKING:
    from pflrepro.training.engine import Engine


def hessian_vector_product(net: nn.Module, x: torch.Tensor, y: torch.Tensor,
                           params: Params, vector: Params) -> Params:
    """∇²f(params) · vector, f the mean cross-entropy of ``net`` on (x, y), exactly.

    The gradient of ⟨∇f(params), vector⟩ by double backward; no finite differences.
    """
    p = {k: v.detach().clone().requires_grad_(True) for k, v in params.items()}
    leaves = list(p.values())
    with torch.enable_grad():
        out = functional_call(net, p, (x,))
        loss = F.cross_entropy(out, y)
        grads = torch.autograd.grad(loss, leaves, create_graph=True)
        dot = torch.stack([(g * vector[k].detach()).sum()
                           for k, g in zip(p, grads, strict=True)]).sum()
        hv = torch.autograd.grad(dot, leaves, allow_unused=True)
    return {k: torch.zeros_like(p[k]) if h is None else h.detach()
            for k, h in zip(p, hv, strict=True)}


@dataclass(frozen=True)
class MAML(Objective):
    """The stochastic gradient of the MAML loss f(w − α ∇f(w; D); D').

    D' is the training call's own batch, D the batch of stream ``inner`` and, with
    ``hessian`` set, D'' that of stream ``hessian``. The step direction is
    ``∇f(temp; D')``, temp = w − α ∇f(w; D) (first order), minus
    ``α ∇²f(w; D'') ∇f(temp; D')`` with ``hessian`` (an exact Hessian-vector product,
    double backward). The reported loss is f(temp; D'). Per-FedAvg's local step
    (Fallah et al. 2020, Algorithm 1: FO and HF variants).
    """

    alpha: float
    inner: str
    hessian: str | None = None
    per_client: bool = False

    @property
    def streams(self) -> tuple[Stream, ...]:  # type: ignore[override]
        """The inner batch's stream, then the Hessian batch's (if any)."""
        names = (self.inner,) if self.hessian is None else (self.inner, self.hessian)
        return tuple(Stream(n) for n in names)

    def loss_and_grad(self, engine: Engine, params: Params, idx: torch.Tensor,
                      state: OptState, extra: Sequence[torch.Tensor] = ()
                      ) -> tuple[float, Params]:
        """Engine passes: ∇f(w; D), then f and ∇f at temp on D', then the HVP on D''."""
        alpha = float(self.alpha)
        _, g = engine.loss_and_grad(params, extra[0])
        temp = {k: params[k] - alpha * g[k] for k in params}
        loss, direction = engine.loss_and_grad(temp, idx)
        if self.hessian is not None:
            d2 = extra[1]
            hv = hessian_vector_product(engine.net_for(params), engine.data.x[d2],
                                        engine.data.y[d2], params, direction)
            direction = {k: direction[k] - alpha * hv[k] for k in direction}
        return loss, direction

    def stacked_loss_and_grad(self, model: nn.Module, params: Params, x: torch.Tensor,
                              y: torch.Tensor, mask: torch.Tensor, count: torch.Tensor,
                              idx: torch.Tensor, state: OptState,
                              active: torch.Tensor | None,
                              extra: Sequence[Batch] = ()) -> tuple[torch.Tensor, Params]:
        """One vmapped pass: inner gradient, outer gradient, and the HVP by vjp."""
        alpha = float(self.alpha)
        use_hessian = self.hessian is not None

        def f(p: Params, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
            return masked_ce(model, p, *batch)

        def one(p: Params, outer: tuple[torch.Tensor, ...], inner: tuple[torch.Tensor, ...],
                *rest: tuple[torch.Tensor, ...]) -> tuple[Params, torch.Tensor]:
            g = grad(f)(p, inner)
            temp = {k: p[k] - alpha * g[k] for k in p}
            direction, loss = grad_and_value(f)(temp, outer)
            if use_hessian:
                _, hvp = vjp(lambda q: grad(f)(q, rest[0]), p)
                (hv,) = hvp(direction)
                direction = {k: direction[k] - alpha * hv[k] for k in direction}
            return direction, loss

        grads, loss = vmap(one)(params, (x, y, mask, count), *[b[1:] for b in extra])
        return loss, grads

    def row(self, i: int) -> MAML:
        """The same objective (nothing per client)."""
        return self

    def stacked(self, params: Params) -> MAML:
        """The same objective."""
        return self

    def rows(self, a: int, b: int) -> MAML:
        """The same objective."""
        return self
