"""The distillation pass on public rows: KL to soft targets, and its gradient.

Methods that distill (PerFed-CKT's clients through
:class:`pflrepro.training.objectives.Distill`, FedDF's server) call
:func:`distill_loss_and_grad` with one model's parameters, a batch of public-set inputs
and a probability vector per row (soft labels from other models). The model is the
engine's instance of the architecture the parameters belong to
(:meth:`pflrepro.training.engine.Engine.net_for`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch.func import functional_call

from pflrepro.training.optim import Params
from pflrepro.training.params import grad_leaves

if TYPE_CHECKING:
    from pflrepro.training.engine import Engine


def distill_loss_and_grad(engine: Engine, params: Params, x: torch.Tensor,
                          target: torch.Tensor) -> tuple[float, Params]:
    """Mean KL(target ‖ softmax(model(x))) over the rows of ``x``, and its gradient.

    ``target`` holds a probability vector per row (soft labels from other models:
    co-distillation, ensemble distillation). Only the cross-entropy part
    −Σ target · log softmax carries gradient; the target's entropy is added to the
    reported value so that it is the KL divergence itself (0 when they agree).
    """
    p = grad_leaves(params)
    target = target.detach()
    with torch.enable_grad():
        log_q = functional_call(engine.net_for(p), p, (x,)).log_softmax(dim=-1)
        cross = -(target * log_q).sum(dim=-1).mean()
        grads = torch.autograd.grad(cross, list(p.values()))
    entropy = -(target * target.clamp_min(1e-12).log()).sum(dim=-1).mean()
    return float(cross.detach() - entropy), dict(zip(p.keys(), grads, strict=True))
