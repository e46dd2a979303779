"""A model trained beside a personal model, on the loss of their mixture (APFL).

The mixing weight is learnt and kept in the optimiser state.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import nn

from pflrepro.training.objectives.base import Batch, Objective, _vmapped_grad, masked_ce
from pflrepro.training.optim import OptState, Params

if TYPE_CHECKING:
    from pflrepro.training.engine import Engine


#: Key prefixes of the two models of a :class:`MixedPair` in one parameter dict.
BASE, MIXED = "base.", "mixed."
#: The optimiser-state key of a :class:`MixedPair`'s mixing weight.
ALPHA_KEY = "obj.alpha"


def join_pair(base: Params, mixed: Params) -> Params:
    """One parameter dict of the two models of a :class:`MixedPair`."""
    return {**{BASE + k: v for k, v in base.items()}, **{MIXED + k: v for k, v in mixed.items()}}


def split_pair(params: Params) -> tuple[Params, Params]:
    """The two models of a :class:`MixedPair`'s parameter dict (``base``, ``mixed``)."""
    return ({k[len(BASE):]: v for k, v in params.items() if k.startswith(BASE)},
            {k[len(MIXED):]: v for k, v in params.items() if k.startswith(MIXED)})


def join_pair_states(base: OptState, mixed: OptState, alpha: torch.Tensor) -> OptState:
    """One optimiser state for a :class:`MixedPair` (both models take every step).

    The two step counts must agree (both models step together); ``alpha`` is the
    mixing weight (float64), one per client when stacked.
    """
    if not torch.equal(base["step"], mixed["step"]):
        raise ValueError("the two models' optimiser step counts differ")
    out: OptState = {"step": base["step"]}
    for prefix, state in ((BASE, base), (MIXED, mixed)):
        for key, value in state.items():
            if key != "step":
                slot, name = key.split(".", 1)
                out[f"{slot}.{prefix}{name}"] = value
    out[ALPHA_KEY] = alpha
    return out


def split_pair_states(state: OptState) -> tuple[OptState, OptState, torch.Tensor]:
    """Inverse of :func:`join_pair_states`: the two states and the mixing weight."""
    base: OptState = {"step": state["step"]}
    mixed: OptState = {"step": state["step"].clone()}
    for key, value in state.items():
        if key in ("step", ALPHA_KEY):
            continue
        slot, name = key.split(".", 1)
        if name.startswith(BASE):
            base[f"{slot}.{name[len(BASE):]}"] = value
        else:
            mixed[f"{slot}.{name[len(MIXED):]}"] = value
    return base, mixed, state[ALPHA_KEY]


def mix(v: Params, w: Params, alpha: float | torch.Tensor) -> Params:
    """The parameter mixture α v + (1 − α) w."""
    return {k: alpha * v[k] + (1.0 - alpha) * w[k] for k in w}


@dataclass(frozen=True)
class MixedPair(Objective):
    """A base model w on its own loss, a model v on the loss of α v + (1 − α) w.

    Parameters are one dict holding both (:func:`join_pair`), α a float64 per client
    in the optimiser state (:func:`join_pair_states`). The step's gradient is
    ``∇f(w)`` for w and ``α ∇f(v̄)`` for v, v̄ = α v + (1 − α) w (the gradient of
    ``f(w) + f(α v + (1 − α) sg(w))``, sg: no gradient); with ``adaptive`` α moves by a
    plain SGD step ``α ← clip[0,1](α − lr · ⟨∇f(v̄), v − w⟩)`` from the pre-step values
    (all three from the same batch). The reported loss is the mixed model's.
    APFL's local update (Deng et al. 2020, Algorithm 1).
    """

    lr: float
    adaptive: bool = True
    per_client: bool = False

    def loss_and_grad(self, engine: Engine, params: Params, idx: torch.Tensor,
                      state: OptState, extra: Sequence[torch.Tensor] = ()
                      ) -> tuple[float, Params]:
        """Two engine passes (w, then v̄); α updated in ``state`` after both."""
        w, v = split_pair(params)
        alpha = float(state[ALPHA_KEY])
        _, g_w = engine.loss_and_grad(w, idx)
        loss, g_bar = engine.loss_and_grad(mix(v, w, alpha), idx)
        g_v = {k: alpha * g for k, g in g_bar.items()}
        if self.adaptive:
            g_alpha = float(sum(torch.sum(g_bar[k] * (v[k] - w[k])) for k in w))
            state[ALPHA_KEY].fill_(min(max(alpha - self.lr * g_alpha, 0.0), 1.0))
        return loss, join_pair(g_w, g_v)

    def stacked_loss_and_grad(self, model: nn.Module, params: Params, x: torch.Tensor,
                              y: torch.Tensor, mask: torch.Tensor, count: torch.Tensor,
                              idx: torch.Tensor, state: OptState,
                              active: torch.Tensor | None,
                              extra: Sequence[Batch] = ()) -> tuple[torch.Tensor, Params]:
        """One vmapped pass differentiating ``f(w) + f(v̄)`` in w, v and α."""
        alpha = state[ALPHA_KEY]

        def ce(p: Params, x_: torch.Tensor, y_: torch.Tensor, m: torch.Tensor,
               n: torch.Tensor) -> torch.Tensor:
            return masked_ce(model, p, x_, y_, m, n)

        def pair_loss(p: Params, a: torch.Tensor, x_: torch.Tensor, y_: torch.Tensor,
                      m: torch.Tensor, n: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            w, v = split_pair(p)
            a32 = a.to(next(iter(w.values())).dtype)
            bar = mix(v, {k: t.detach() for k, t in w.items()}, a32)
            mixed = ce(bar, x_, y_, m, n)
            return ce(w, x_, y_, m, n) + mixed, mixed.detach()

        (grads, g_alpha), (_, loss) = _vmapped_grad(pair_loss, argnums=(0, 1), has_aux=True)(
            params, alpha, x, y, mask, count)
        if self.adaptive:
            new = (alpha - self.lr * g_alpha.to(alpha.dtype)).clamp(0.0, 1.0)
            alpha.copy_(new if active is None else torch.where(active, new, alpha))
        return loss, grads

    def row(self, i: int) -> MixedPair:
        """The same objective (α lives in the client's optimiser state)."""
        return self

    def stacked(self, params: Params) -> MixedPair:
        """The same objective (α lives in the stacked optimiser state)."""
        return self

    def rows(self, a: int, b: int) -> MixedPair:
        """The same objective."""
        return self
