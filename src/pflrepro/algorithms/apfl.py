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

Training path: the local update is the shared objective
:class:`pflrepro.training.objectives.MixedPair` (w and v_i in one parameter dict, α_i in the
optimiser state), trained by :meth:`pflrepro.training.engine.Engine.train` for all clients at
once: the per-client loop on the CPU (the same arithmetic as this file's former own
loop, byte for byte), vmapped on CUDA.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from pflrepro.algorithms.base import Algorithm, State, register_algorithm
from pflrepro.algorithms.registry import hyper
from pflrepro.store.results import MetricLog
from pflrepro.training.objectives import (
    MixedPair,
    join_pair,
    join_pair_states,
    mix,
    split_pair,
    split_pair_states,
)
from pflrepro.training.optim import Params
from pflrepro.training.params import broadcast, stack, take, weighted_mean


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
class APFL(Algorithm):
    """Adaptive personalised FL: personal models mixed with the global model."""

    name = "apfl"
    display_name = "APFL"
    summary = "APFL (Deng et al. 2020): personal model mixed with the global one by α_i."
    Hyper = APFLHyper
    records = (ALPHA,)

    def init(self) -> State:
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

    def round(self, state: State, rnd: int) -> tuple[State, np.ndarray]:
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

    def predict(self, state: State, client: int, x: torch.Tensor, rnd: int) -> torch.Tensor:
        """The mixed model α_i v_i + (1 − α_i) w, w the global model."""
        e = self.engine
        alpha = float(state["alpha"][client])
        return e.probs(mix(take(state["personal"], client), state["global"], alpha), x)

    def record(self, state: State, rnd: int, log: MetricLog) -> None:
        """Log every client's mixing weight α_i."""
        log.add_per_client(rnd, ALPHA, state["alpha"].tolist())
