"""The distillation pass on public rows: KL to soft targets, and its gradient.

Methods that distill (PerFed-CKT's clients through their objective, FedDF's server)
share the loss; FedDF's server calls :func:`distill_loss_and_grad` with one model's
parameters, a batch of public-set inputs and a probability vector per row (soft
labels from other models). The model is the context's instance of the architecture
the parameters belong to (:meth:`pflrepro.training.context.StepContext.net_for`).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.func import functional_call

from pflrepro.training.context import StepContext
from pflrepro.training.optim import Params
from pflrepro.training.params import grad_leaves

__all__ = ["distill_cross", "distill_loss_and_grad"]


def distill_cross(model: nn.Module, params: Params, x: torch.Tensor, target: torch.Tensor,
                  mask: torch.Tensor, count: torch.Tensor) -> torch.Tensor:
    """−Σ target · log softmax(model(x)) per row, summed over the real rows / ``count``.

    The part of KL(target ‖ softmax(model(x))) that carries gradient; ``mask`` is 1 for
    real rows and 0 for padding (pure tensor ops: it runs under ``vmap`` too).
    """
    log_q = functional_call(model, params, (x,)).log_softmax(dim=-1)
    return (-(target * log_q).sum(dim=-1) * mask).sum() / count


def distill_loss_and_grad(ctx: StepContext, params: Params, x: torch.Tensor,
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
        log_q = functional_call(ctx.net_for(p), p, (x,)).log_softmax(dim=-1)
        cross = -(target * log_q).sum(dim=-1).mean()
        grads = torch.autograd.grad(cross, list(p.values()))
    entropy = -(target * target.clamp_min(1e-12).log()).sum(dim=-1).mean()
    return float(cross.detach() - entropy), dict(zip(p.keys(), grads, strict=True))
