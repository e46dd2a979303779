"""APFL: each client mixes a personal model with the federated global model.

Deng, Kamani, Mahdavi, "Adaptive Personalized Federated Learning", 2020
(arXiv:2003.13461, Algorithm 1); a baseline of FedAMP (Huang et al., AAAI 2021).
Client i keeps a local copy w of the global model, a personal model v_i and a mixing
weight α_i; its personalised model is v̄_i = α_i v_i + (1 − α_i) w. On each local
mini-batch ξ, all three move from their current values:

* w ← w − η ∇f_i(w; ξ)                      (the FedAvg part),
* v_i ← v_i − η α_i ∇f_i(v̄_i; ξ)            (∇_v f(v̄) = α ∇_v̄ f(v̄)),
* α_i ← clip[0,1](α_i − η_α ⟨∇f_i(v̄_i; ξ), v_i − w⟩)   (only if ``adaptive_alpha``).

After the local steps the server averages the clients' w (size-weighted, as FedAvg
does here) into the next global model; v_i and α_i never leave the client. Client i
predicts with α_i v_i + (1 − α_i) w, w the current global model.

Choices where the paper is silent: the three gradients use the same batch and the
pre-step values (the paper's Algorithm 1 order, simultaneous updates); w and v_i use
the training optimiser with separate per-client states kept across rounds, α_i a
plain SGD step of size ``alpha_lr`` (no regulariser on α); v_i starts from the global
model's initialisation; the reported training loss is the mixed model's (the one that
is evaluated); the averaging is size-weighted (the paper averages uniformly over the
sampled clients; the weights coincide for equal client sizes).

Training path: the local update is the objective :class:`MixedPair` (w and v_i in one
parameter dict, α_i in the optimiser state), trained by
:meth:`pflrepro.training.engine.Engine.train` for all clients at once: the per-client
loop on the CPU, vmapped on CUDA.
"""

from __future__ import annotations

import dataclasses
from typing import TypedDict

import numpy as np
import torch
from torch import nn

from pflrepro.algorithms.base import Algorithm, register_algorithm
from pflrepro.algorithms.registry import hyper
from pflrepro.store.results import MetricLog
from pflrepro.training.objective import Aux, Batch, Objective, masked_ce
from pflrepro.training.optim import OptState, Params
from pflrepro.training.params import broadcast, stack, take, weighted_mean

#: APFL's state: the global model w and its optimiser states, each client's personal
#: model v_i and its optimiser state (all stacked by client) and each client's mixing
#: weight α_i (K,), float64. ``global`` is a Python keyword, hence the call form.
APFLState = TypedDict("APFLState", {"global": Params, "opt": OptState, "personal": Params,
                                    "personal_opt": OptState, "alpha": torch.Tensor})

#: Key prefixes of the two models of a :class:`MixedPair` in one parameter dict, and the
#: optimiser-state key of its mixing weight.
BASE, MIXED, ALPHA_KEY = "base.", "mixed.", "obj.alpha"


def join_pair(base: Params, mixed: Params) -> Params:
    """One parameter dict of the two models of a :class:`MixedPair`."""
    return {**{BASE + k: v for k, v in base.items()}, **{MIXED + k: v for k, v in mixed.items()}}


def split_pair(params: Params) -> tuple[Params, Params]:
    """The two models of a :class:`MixedPair`'s parameter dict (``base``, ``mixed``)."""
    return ({k[len(BASE):]: v for k, v in params.items() if k.startswith(BASE)},
            {k[len(MIXED):]: v for k, v in params.items() if k.startswith(MIXED)})


def join_pair_states(base: OptState, mixed: OptState, alpha: torch.Tensor) -> OptState:
    """One optimiser state for a :class:`MixedPair` (both models take every step).

    The two step counts must agree; ``alpha`` is the mixing weight (float64), one per
    client when stacked.
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
        if key not in ("step", ALPHA_KEY):
            slot, name = key.split(".", 1)
            prefix, into = (BASE, base) if name.startswith(BASE) else (MIXED, mixed)
            into[f"{slot}.{name[len(prefix):]}"] = value
    return base, mixed, state[ALPHA_KEY]


def mix(v: Params, w: Params, alpha: float | torch.Tensor) -> Params:
    """The parameter mixture α v + (1 − α) w."""
    return {k: alpha * v[k] + (1.0 - alpha) * w[k] for k in w}


@dataclasses.dataclass(frozen=True)
class MixedPair(Objective):
    """A base model w on its own loss, a model v on the loss of α v + (1 − α) w.

    Parameters are one dict holding both (:func:`join_pair`), α a float64 per client
    in the optimiser state (:func:`join_pair_states`). The loss is
    ``f(w) + f(α v + (1 − α) sg(w))`` (sg: no gradient), so w steps along ``∇f(w)`` and
    v along ``α ∇f(v̄)``; with ``adaptive`` α moves by a plain SGD step
    ``α ← clip[0,1](α − lr · ∂f(v̄)/∂α)`` from the pre-step values (all from the same
    batch). The reported loss is the mixed model's. APFL's local update (Deng et al.
    2020, Algorithm 1).
    """

    lr: float
    adaptive: bool = True
    per_client: bool = False
    differentiates = (ALPHA_KEY,)

    def loss(self, model: nn.Module, params: Params, batch: Batch, extra: object,
             state: dict[str, torch.Tensor]) -> tuple[torch.Tensor, Aux]:
        """``f(w) + f(v̄)``; α and 1 − α rounded to the parameters' dtype from float64."""
        w, v = split_pair(params)
        dtype = next(iter(w.values())).dtype
        a, rest = state[ALPHA_KEY].to(dtype), (1.0 - state[ALPHA_KEY]).to(dtype)
        mixed = masked_ce(model, {k: a * v[k] + rest * w[k].detach() for k in w}, batch)
        return masked_ce(model, w, batch) + mixed, {"loss": mixed.detach()}

    def update(self, state: dict[str, torch.Tensor], aux: Aux,
               grads: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """With ``adaptive``, α's plain SGD step, clipped to [0, 1]."""
        if not self.adaptive:
            return {}
        return {ALPHA_KEY: (state[ALPHA_KEY] - self.lr * grads[ALPHA_KEY]).clamp(0.0, 1.0)}


@dataclasses.dataclass(frozen=True)
class APFLHyper:
    """Hyperparameters of APFL."""

    alpha: float = hyper(0.5, "Initial mixing weight α_i of the personal model in "
                              "α v_i + (1 − α) w (the fixed α when not adaptive).",
                         minimum=0.0, maximum=1.0)
    adaptive_alpha: bool = hyper(True, "Learn each α_i by gradient steps (APFL's adaptive "
                                       "variant); false keeps α fixed.")
    alpha_lr: float = hyper(0.01, "Step size of the α_i updates (used only when "
                                  "adaptive_alpha is true).", minimum=0.0)


#: Metric name of the logged mixing weights α_i (one row per client and round).
ALPHA = "alpha"


@register_algorithm
class APFL(Algorithm[APFLState]):
    """Adaptive personalised FL: personal models mixed with the global model."""

    name = "apfl"
    display_name = "APFL"
    summary = "APFL (Deng et al. 2020): personal model mixed with the global one by α_i."
    Hyper = APFLHyper
    records = (ALPHA,)

    def init(self) -> APFLState:
        """Global w; per client v_i = w, α_i = ``alpha`` and optimiser states for w, v_i."""
        e = self.engine
        k = e.num_clients
        start = e.init_params()
        opt = stack(e.init_opt(start), k)
        return {"global": start, "opt": opt, "personal": stack(start, k),
                "personal_opt": {n: v.clone() for n, v in opt.items()},
                "alpha": torch.full((k,), float(self.hp.alpha), dtype=torch.float64)}

    def objective(self) -> MixedPair:
        """The local update: w on its loss, v_i on the mixed model's, α_i learnt."""
        return MixedPair(lr=float(self.hp.alpha_lr), adaptive=bool(self.hp.adaptive_alpha))

    def local_steps(self, w: Params, v: Params, alpha: float, client: int,
                    rnd: int, opt_w: Params, opt_v: Params
                    ) -> tuple[Params, Params, float, Params, Params, float]:
        """Client ``client``'s local steps; returns w, v, α, both optimiser states, loss."""
        e = self.engine
        state = join_pair_states(opt_w, opt_v, torch.tensor(float(alpha), dtype=torch.float64))
        params, state, loss = e.train_client(join_pair(w, v), state, client, rnd,
                                             objective=self.objective())
        w, v = split_pair(params)
        opt_w, opt_v, alpha_t = split_pair_states(state)
        return w, v, float(alpha_t), opt_w, opt_v, loss

    def round(self, state: APFLState, rnd: int) -> tuple[APFLState, np.ndarray]:
        """Local w / v_i / α_i steps on every client; size-weighted average of the w."""
        e = self.engine
        clients = list(range(e.num_clients))
        params = join_pair(broadcast(state["global"], e.num_clients), state["personal"])
        opt = join_pair_states(state["opt"], state["personal_opt"], state["alpha"])
        params, opt, losses = e.train(params, opt, clients, rnd, objective=self.objective())
        local, state["personal"] = split_pair(params)
        state["opt"], state["personal_opt"], alpha = split_pair_states(opt)
        state["alpha"] = alpha.to(device="cpu", dtype=torch.float64)
        state["global"] = weighted_mean(local, e.train_sizes())
        # the global w goes down and up; the personal v_i and α_i stay on the client
        e.traffic.exchange(range(e.num_clients), up=e.model_size, down=e.model_size)
        return state, losses

    def predict(self, state: APFLState, client: int, x: torch.Tensor, rnd: int
                ) -> torch.Tensor:
        """The mixed model α_i v_i + (1 − α_i) w, w the global model."""
        e = self.engine
        alpha = float(state["alpha"][client])
        return e.probs(mix(take(state["personal"], client), state["global"], alpha), x)

    def record(self, state: APFLState, rnd: int, log: MetricLog) -> None:
        """Log every client's mixing weight α_i."""
        log.add_per_client(rnd, ALPHA, state["alpha"].tolist())
