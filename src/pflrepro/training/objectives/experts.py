"""K experts and a gate trained jointly on responsibilities (FedMix).

Also the parameter-dict layout of the experts and the gate.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from pflrepro.training.objectives.base import Batch, Objective, _vmapped_grad
from pflrepro.training.optim import OptState, Params

if TYPE_CHECKING:
    from pflrepro.training.engine import Engine


# ---------------------------------------------------------------------- gated experts
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


def gate_grad(gate: Params, x: torch.Tensor, target: torch.Tensor) -> Params:
    """Gradient of the gate's mean cross-entropy against soft targets ``target`` (n, K)."""
    p = {n: v.detach().requires_grad_(True) for n, v in gate.items()}
    with torch.enable_grad():
        logp = gate_logits(p, x).log_softmax(dim=-1)
        loss = -(target.detach() * logp).sum(dim=1).mean()
        grads = torch.autograd.grad(loss, list(p.values()))
    return dict(zip(p.keys(), grads, strict=True))


@dataclass(frozen=True)
class GatedExperts(Objective):
    """K experts and a gate, one parameter dict (:func:`join_experts`), trained jointly.

    Each step first sets the batch's responsibilities r (n, K): q(z = k | y_i), a row
    of ``q`` (C, K) per label, or with ``marginal`` the posterior
    p(z = k | x_i, y_i) ∝ p(y_i | x_i, w_k) · p(z = k | x_i) under the current experts and
    gate (no gradient through it). Expert k's loss is Σ_i r_ik ℓ_ik / |batch| (the plain
    batch mean where every r_ik is 1); an expert takes no gradient (a zero one) where
    ``trains`` is false or every r_ik of the batch is 0; with ``learned_gate`` the gate's
    loss is the mean cross-entropy of its p(z | x) against r. ``prior`` (K,) is the
    log p(z | x) of a fixed gate (zeros for none; 0 on one expert and −∞ elsewhere for a
    one-hot gate), used by ``marginal`` when there is no learned gate. The reported loss
    is the sum of the experts' losses that stepped; each expert's running sum is kept
    in the optimiser state under :data:`EXPERT_LOSS_KEY` (float64, (K,) per client),
    which the caller sets to zeros. Per client (``per_client``): ``q`` (P, C, K),
    ``trains`` (P, K), ``prior`` (P, K).

    A zero gradient leaves an expert exactly as it was under plain SGD (p − lr · 0 =
    p, bit for bit), the optimiser FedMix requires; the optimiser state (a step count)
    is one for the whole dict. FedMix's local step (Reisser et al. 2021, eq. 5).
    """

    q: torch.Tensor
    trains: torch.Tensor
    prior: torch.Tensor
    experts: int
    marginal: bool = False
    learned_gate: bool = True
    per_client: bool = False

    def __post_init__(self) -> None:
        for name in ("q", "trains", "prior"):
            object.__setattr__(self, name, getattr(self, name).detach())

    def responsibilities(self, engine: Engine, experts: Sequence[Params], gate: Params,
                         idx: torch.Tensor) -> torch.Tensor:
        """The responsibilities r (n, K) of samples ``idx``, float32 (one client)."""
        y = engine.data.y[idx]
        if not self.marginal:
            return self.q[y]
        x = engine.data.x[idx]
        cols = [engine.logits(p, x).log_softmax(dim=-1).gather(1, y[:, None])[:, 0]
                for p in experts]
        if self.learned_gate:
            with torch.no_grad():
                chunks = [gate_logits(gate, c).log_softmax(dim=-1)
                          for c in x.split(engine.eval_chunk)]
            log_gate = torch.cat(chunks)
        else:
            log_gate = self.prior.expand(len(x), -1)
        # a clone made outside inference mode: autograd may save it (sample weights)
        return torch.softmax(torch.stack(cols, dim=1) + log_gate, dim=1).clone()

    def loss_and_grad(self, engine: Engine, params: Params, idx: torch.Tensor,
                      state: OptState, extra: Sequence[torch.Tensor] = ()
                      ) -> tuple[float, Params]:
        """Engine passes per expert that steps (weighted or plain), then the gate's."""
        experts, gate = split_experts(params, self.experts)
        r = self.responsibilities(engine, experts, gate, idx)
        running = state[EXPERT_LOSS_KEY]
        grads: Params = {}
        total = 0.0
        for k, expert in enumerate(experts):
            w = r[:, k]
            prefix = expert_prefix(k)
            if not bool(self.trains[k]) or not bool((w != 0).any()):
                grads.update({prefix + n: torch.zeros_like(v) for n, v in expert.items()})
                continue
            if bool((w == 1).all()):
                loss, g = engine.loss_and_grad(expert, idx)
            else:
                loss, g = engine.loss_and_grad(expert, idx, sample_weight=w / len(idx))
            running[k] += loss
            total += loss
            grads.update({prefix + n: v for n, v in g.items()})
        if self.learned_gate:
            g = gate_grad(gate, engine.data.x[idx], r)
            grads.update({GATE + n: v for n, v in g.items()})
        return total, grads

    def stacked_loss_and_grad(self, model: nn.Module, params: Params, x: torch.Tensor,
                              y: torch.Tensor, mask: torch.Tensor, count: torch.Tensor,
                              idx: torch.Tensor, state: OptState,
                              active: torch.Tensor | None,
                              extra: Sequence[Batch] = ()) -> tuple[torch.Tensor, Params]:
        """One vmapped pass of every expert's weighted loss and the gate's."""
        k_all, marginal, learned = self.experts, self.marginal, self.learned_gate

        def one(p: Params, x_: torch.Tensor, y_: torch.Tensor, m: torch.Tensor,
                n: torch.Tensor, q: torch.Tensor, trains: torch.Tensor, prior: torch.Tensor
                ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
            experts, gate = split_experts(p, k_all)
            outs = [functional_call(model, e, (x_,)) for e in experts]
            if marginal:
                ll = torch.stack([o.log_softmax(-1).gather(1, y_[:, None])[:, 0]
                                  for o in outs], dim=1)
                log_gate = (gate_logits(gate, x_).log_softmax(-1) if learned
                            else prior.expand(x_.shape[0], -1))
                r = torch.softmax((ll + log_gate).detach(), dim=1)
            else:
                r = torch.index_select(q, 0, y_)
            real = r * m[:, None]
            steps = ((real != 0).any(dim=0) & trains).to(r.dtype)  # (K,)
            losses = torch.stack([(F.cross_entropy(o, y_, reduction="none") * real[:, k])
                                  .sum() / n for k, o in enumerate(outs)]) * steps
            total = losses.sum()
            if learned:
                logp = gate_logits(gate, x_).log_softmax(-1)
                total = total + (-(r * logp).sum(dim=1) * m).sum() / n
            return total, (losses.detach(), steps)

        grads, (_, (losses, _)) = _vmapped_grad(one, has_aux=True)(
            params, x, y, mask, count, self.q, self.trains, self.prior)
        if active is not None:
            losses = torch.where(active[:, None], losses, torch.zeros_like(losses))
        state[EXPERT_LOSS_KEY].add_(losses.to(state[EXPERT_LOSS_KEY].dtype))
        return losses.sum(dim=1), grads

    def row(self, i: int) -> GatedExperts:
        """Client ``i``'s q, trains and prior (views), or the shared ones."""
        if not self.per_client:
            return self
        return dataclasses.replace(self, q=self.q[i], trains=self.trains[i],
                                   prior=self.prior[i], per_client=False)

    def stacked(self, params: Params) -> GatedExperts:
        """The tensors with a client dimension (broadcast if shared)."""
        if self.per_client:
            return self
        c = next(iter(params.values())).shape[0]
        return dataclasses.replace(self, q=self.q.unsqueeze(0).expand(c, -1, -1),
                                   trains=self.trains.unsqueeze(0).expand(c, -1),
                                   prior=self.prior.unsqueeze(0).expand(c, -1),
                                   per_client=True)

    def rows(self, a: int, b: int) -> GatedExperts:
        """Trained clients ``a..b-1``."""
        return dataclasses.replace(self, q=self.q[a:b], trains=self.trains[a:b],
                                   prior=self.prior[a:b])
