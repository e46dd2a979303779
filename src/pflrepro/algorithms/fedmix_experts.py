"""FedMix's local objective: K experts and a gate trained jointly on responsibilities.

Also the parameter-dict layout of the experts and the gate, and the gate network.
A module beside :mod:`pflrepro.algorithms.fedmix` (which alone uses it) because the
method's file holds its round, E-step, q update and records up to the module size
limit; it registers no method.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from pflrepro.training.objective import Aux, Batch, Objective, per_client_field
from pflrepro.training.optim import Params

__all__ = ["EXPERT_LOSS_KEY", "GATE", "GatedExperts", "expert_prefix", "gate_logits",
           "init_gate", "join_experts", "split_experts"]

#: Key prefix of the gate's parameters in a :class:`GatedExperts` parameter dict.
GATE = "gate."
#: The optimiser-state key of a :class:`GatedExperts`' running per-expert losses.
EXPERT_LOSS_KEY = "obj.expert_loss"


def expert_prefix(k: int) -> str:
    """Key prefix of expert ``k``'s parameters in a :class:`GatedExperts` parameter dict."""
    return f"expert{k}."


def join_experts(experts: Sequence[Params], gate: Params) -> Params:
    """One parameter dict of K experts and a gate (empty: no gate), experts first."""
    out: Params = {}
    for k, params in enumerate(experts):
        out.update({expert_prefix(k) + n: v for n, v in params.items()})
    out.update({GATE + n: v for n, v in gate.items()})
    return out


def split_experts(params: Params, experts: int) -> tuple[list[Params], Params]:
    """Inverse of :func:`join_experts`: the K experts' dicts and the gate's."""
    out = []
    for k in range(experts):
        prefix = expert_prefix(k)
        out.append({n[len(prefix):]: v for n, v in params.items() if n.startswith(prefix)})
    return out, {n[len(GATE):]: v for n, v in params.items() if n.startswith(GATE)}


def gate_logits(gate: Params, x: torch.Tensor) -> torch.Tensor:
    """A gate MLP's logits (n, K) on inputs ``x`` (flattened); pure tensor ops.

    ``gate`` holds ``w1``, ``b1`` (the hidden ReLU layer, absent for a linear gate),
    ``w2``, ``b2``; FedMix's gate p(z | x, θ_s).
    """
    h = x.flatten(1)
    if "w1" in gate:
        h = F.relu(F.linear(h, gate["w1"], gate["b1"]))
    return F.linear(h, gate["w2"], gate["b2"])


def init_gate(features: int, hidden: int, experts: int, gen: torch.Generator) -> Params:
    """Gate weights drawn like ``torch.nn.Linear``'s: uniform ±1/√fan_in, from ``gen``."""
    def layer(fan_in: int, fan_out: int) -> tuple[torch.Tensor, torch.Tensor]:
        bound = 1.0 / math.sqrt(fan_in)
        w = (torch.rand(fan_out, fan_in, generator=gen) * 2 - 1) * bound
        b = (torch.rand(fan_out, generator=gen) * 2 - 1) * bound
        return w, b

    out: Params = {}
    fan_in = features
    if hidden > 0:
        out["w1"], out["b1"] = layer(features, hidden)
        fan_in = hidden
    out["w2"], out["b2"] = layer(fan_in, experts)
    return out


@dataclasses.dataclass(frozen=True)
class GatedExperts(Objective):
    """K experts and a gate, one parameter dict (:func:`join_experts`), trained jointly.

    Each step first sets the batch's responsibilities r (n, K): q(z = k | y_i), a row
    of ``q`` (C, K) per label, or with ``marginal`` the posterior
    p(z = k | x_i, y_i) ∝ p(y_i | x_i, w_k) · p(z = k | x_i) under the current experts and
    gate (no gradient through it). Expert k's loss is Σ_i r_ik ℓ_ik / |batch|; an expert
    takes no gradient (a zero one) where ``trains`` is false or every r_ik of the batch
    is 0; with ``learned_gate`` the gate's loss is the mean cross-entropy of its
    p(z | x) against r. ``prior`` (K,) is the log p(z | x) of a fixed gate (zeros for
    none; 0 on one expert and −∞ elsewhere for a one-hot gate), used by ``marginal``
    when there is no learned gate. The reported loss is the sum of the experts' losses
    that stepped (float64); each expert's running sum is kept in the optimiser state
    under :data:`EXPERT_LOSS_KEY` (float64, (K,) per client), which the caller sets to
    zeros. Per client (``per_client``): ``q`` (P, C, K), ``trains`` (P, K), ``prior``
    (P, K).

    A zero gradient leaves an expert exactly as it was under plain SGD (p − lr · 0 =
    p, bit for bit), the optimiser FedMix requires; the optimiser state (a step count)
    is one for the whole dict. FedMix's local step (Reisser et al. 2021, eq. 5).
    """

    q: torch.Tensor = per_client_field()
    trains: torch.Tensor = per_client_field()
    prior: torch.Tensor = per_client_field()
    experts: int
    marginal: bool = False
    learned_gate: bool = True
    per_client: bool = False

    def loss(self, model: nn.Module, params: Params, batch: Batch, extra: object,
             state: object) -> tuple[torch.Tensor, Aux]:
        """Every expert's weighted loss (times whether it steps) and the gate's."""
        experts, gate = split_experts(params, self.experts)
        x, y, m, n = batch.x, batch.y, batch.mask, batch.count
        outs = [functional_call(model, e, (x,)) for e in experts]
        if self.marginal:
            ll = torch.stack([o.log_softmax(-1).gather(1, y[:, None])[:, 0] for o in outs], 1)
            log_gate = (gate_logits(gate, x).log_softmax(-1) if self.learned_gate
                        else self.prior.expand(x.shape[0], -1))
            r = torch.softmax((ll + log_gate).detach(), dim=1)
        else:
            r = torch.index_select(self.q, 0, y)
        real = r * m[:, None]
        steps = ((real != 0).any(dim=0) & self.trains).to(r.dtype)  # (K,)
        losses = torch.stack([(F.cross_entropy(o, y, reduction="none") * real[:, k]).sum() / n
                              for k, o in enumerate(outs)]) * steps
        total = losses.sum()
        if self.learned_gate:
            logp = gate_logits(gate, x).log_softmax(-1)
            total = total + (-(r * logp).sum(dim=1) * m).sum() / n
        each = losses.detach().to(torch.float64)
        return total, {"loss": each.sum(), "expert_losses": each}

    def update(self, state: Mapping[str, torch.Tensor], aux: Aux,
               grads: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The running per-expert losses plus this step's."""
        return {EXPERT_LOSS_KEY: state[EXPERT_LOSS_KEY] + aux["expert_losses"]}
