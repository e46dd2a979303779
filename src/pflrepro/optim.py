"""Functional optimisers over parameter dicts.

State lives in plain dicts of tensors, so it can be stacked along a client
dimension, checkpointed with ``torch.save`` and reloaded with ``weights_only=True``.
Updates follow ``torch.optim.SGD`` and ``torch.optim.Adam`` (default arguments, no
weight decay); ``tests/unit/test_optim.py`` checks them against torch step by step.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

Params = dict[str, torch.Tensor]
OptState = dict[str, torch.Tensor]


@dataclass(frozen=True)
class Optimizer:
    """``name`` is ``"sgd"`` or ``"adam"``; ``lr`` the step size."""

    name: str
    lr: float
    momentum: float = 0.0  # SGD only
    betas: tuple[float, float] = (0.9, 0.999)  # Adam only
    eps: float = 1e-8  # Adam only

    def __post_init__(self) -> None:
        if self.name not in ("sgd", "adam"):
            raise ValueError(f"unknown optimizer {self.name!r}; known: ['adam', 'sgd']")
        if self.lr <= 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")
        if self.momentum < 0:
            raise ValueError(f"momentum must be >= 0, got {self.momentum}")

    def init(self, params: Params) -> OptState:
        """Return a zero state for ``params``."""
        state: OptState = {"step": torch.zeros((), dtype=torch.float64)}
        for k, v in params.items():
            if self.name == "adam":
                state[f"m.{k}"] = torch.zeros_like(v)
                state[f"v.{k}"] = torch.zeros_like(v)
            elif self.momentum:
                state[f"buf.{k}"] = torch.zeros_like(v)
        return state

    @torch.no_grad()
    def step(self, params: Params, grads: Params, state: OptState) -> tuple[Params, OptState]:
        """Return updated ``(params, state)``; the inputs are not modified."""
        new_params = {k: v.clone() for k, v in params.items()}
        new_state = {k: v.clone() for k, v in state.items()}
        self.step_(new_params, grads, new_state)
        return new_params, new_state

    @torch.no_grad()
    def step_(self, params: Params, grads: Params, state: OptState) -> None:
        """Update ``params`` and ``state`` in place (one fused ``_foreach`` op per update).

        The same arithmetic as :meth:`step` (which calls this on copies) and as
        ``torch.optim``'s foreach implementations; used by the engine's local training,
        which owns its working copies, so no step allocates new parameter tensors.
        """
        names = list(params)
        p = [params[k] for k in names]
        g = [grads[k] for k in names]
        state["step"].add_(1)
        if self.name == "sgd":
            if self.momentum:
                bufs = [state[f"buf.{k}"] for k in names]
                if int(state["step"]) == 1:
                    torch._foreach_copy_(bufs, g)
                else:
                    torch._foreach_mul_(bufs, self.momentum)
                    torch._foreach_add_(bufs, g)
                g = bufs
            torch._foreach_add_(p, g, alpha=-self.lr)
            return
        b1, b2 = self.betas
        t = float(state["step"])
        bc1 = 1 - b1**t
        bc2_sqrt = (1 - b2**t) ** 0.5
        m = [state[f"m.{k}"] for k in names]
        v = [state[f"v.{k}"] for k in names]
        torch._foreach_lerp_(m, g, 1 - b1)
        torch._foreach_mul_(v, b2)
        torch._foreach_addcmul_(v, g, g, value=1 - b2)
        denom = torch._foreach_sqrt(v)
        torch._foreach_div_(denom, bc2_sqrt)
        torch._foreach_add_(denom, self.eps)
        torch._foreach_addcdiv_(p, m, denom, value=-self.lr / bc1)
