"""Functional optimisers over parameter dicts.

State lives in plain dicts of tensors, so it can be stacked along a client
dimension, checkpointed with ``torch.save`` and reloaded with ``weights_only=True``.
Updates follow ``torch.optim.SGD`` and ``torch.optim.Adam`` (default arguments, no
weight decay); ``tests/unit/test_optim.py`` checks them against torch step by step.
One implementation serves one model and many models stacked along a client dimension
(the vectorised local training), so the two training paths share their update.
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
    def step_(self, params: Params, grads: Params, state: OptState,
              active: torch.Tensor | None = None) -> None:
        """Update ``params`` and ``state`` in place (fused ``_foreach`` ops).

        The same arithmetic as :meth:`step` (which calls this on copies) and as
        ``torch.optim``'s foreach implementations. Two shapes, one update:

        * one model: ``state["step"]`` is a 0-d count (the per-client loop);
        * ``C`` models stacked along a leading client dimension: ``state["step"]`` has
          shape (C,), one count per client (the vectorised path,
          :mod:`pflrepro.training.local_training`). ``active`` (C,) bool, optional, masks
          clients that take no step now: their parameters and state (step count
          included) are left exactly as they were.
        """
        names = list(params)
        p = [params[k] for k in names]
        g = [grads[k] for k in names]
        if state["step"].dim() > 0:
            self._step_stacked_(names, p, g, state, active)
            return
        if active is not None:
            raise ValueError("active masks only stacked states (a step count per client)")
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

    def _step_stacked_(self, names: list[str], p: list[torch.Tensor], g: list[torch.Tensor],
                       state: OptState, active: torch.Tensor | None) -> None:
        """:meth:`step_` for stacked models: the step count and bias corrections per client."""
        kept = None
        if active is not None and not bool(active.all()):
            kept = ([t.clone() for t in p], {k: v.clone() for k, v in state.items()})
        step = state["step"]
        step.add_(1)

        def per_client(values: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
            return values.to(device=like.device, dtype=like.dtype).view(
                -1, *([1] * (like.dim() - 1)))

        if self.name == "sgd":
            if self.momentum:
                bufs = [state[f"buf.{k}"] for k in names]
                first = step == 1
                for buf, grad in zip(bufs, g, strict=True):
                    # first step: buf <- g (as torch.optim); then buf <- m·buf + g
                    buf.copy_(torch.where(per_client(first, buf).bool(), grad,
                                          buf * self.momentum + grad))
                g = bufs
            torch._foreach_add_(p, g, alpha=-self.lr)
        else:
            b1, b2 = self.betas
            t = step.to(torch.float64)
            bc1 = 1 - b1**t
            bc2_sqrt = (1 - b2**t) ** 0.5
            for k, param, grad in zip(names, p, g, strict=True):
                m, v = state[f"m.{k}"], state[f"v.{k}"]
                m.lerp_(grad, 1 - b1)
                v.mul_(b2).addcmul_(grad, grad, value=1 - b2)
                denom = (v.sqrt() / per_client(bc2_sqrt, v)).add_(self.eps)
                param.sub_(per_client(self.lr / bc1, param) * m / denom)
        if kept is not None:
            old_p, old_state = kept
            for param, old in zip(p, old_p, strict=True):
                param.copy_(torch.where(per_client(active, param).bool(), param, old))
            for k, value in state.items():
                value.copy_(torch.where(per_client(active, value).bool(), value,
                                        old_state[k]))
