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
        step = state["step"] + 1
        new_state: OptState = {"step": step}
        new_params: Params = {}
        if self.name == "sgd":
            for k, p in params.items():
                g = grads[k]
                if self.momentum:
                    buf = g.clone() if int(step) == 1 else state[f"buf.{k}"] * self.momentum + g
                    new_state[f"buf.{k}"] = buf
                    g = buf
                new_params[k] = p - self.lr * g
            return new_params, new_state
        b1, b2 = self.betas
        t = float(step)
        bc1 = 1 - b1**t
        bc2 = 1 - b2**t
        for k, p in params.items():
            g = grads[k]
            m = state[f"m.{k}"] * b1 + g * (1 - b1)
            v = state[f"v.{k}"] * b2 + g * g * (1 - b2)
            new_state[f"m.{k}"] = m
            new_state[f"v.{k}"] = v
            denom = (v.sqrt() / (bc2**0.5)) + self.eps
            new_params[k] = p - (self.lr / bc1) * m / denom
        return new_params, new_state
