"""FedEM: federated EM over a mixture of M shared component models.

Marfoq, Neglia, Bellet, Kameni, Vidal, "Federated Multi-Task Learning under a Mixture of
Distributions", NeurIPS 2021 (Algorithm 1). Every client's data distribution is a
mixture of M underlying distributions; the M component models h_1..h_M are shared by
all clients, the mixture weights π_i are private to client i. One round, for every
client i, starting from the current global components:

1. *E-step*: for each training sample s, q_s(m) ∝ π_im · exp(−ℓ(h_m(x_s), y_s)),
   normalised over m (log space, no grad, float64);
2. π_i ← mean over its training samples of q_s;
3. *M-step*: for every component m, local training from the global h_m with the
   per-sample weights q_s(m): each step's loss is Σ_{s∈batch} q_s(m) ℓ_s / |batch|
   (a weighted *mean*, as ``learner.py`` of the authors' code divides by the batch
   size), so with M = 1 (q_s = 1) the M-step is FedAvg's local training.

The server sets h_m ← Σ_i (n_i / n) h_m^(i), weighting clients by training-set size.
Client i predicts with Σ_m π_im p(y | x; h_m).

Choices where the paper is silent (or where the authors' code decides):
every client takes part in every round; component m is initialised from the seed stream
``engine.init_params(client=m)`` (the client slot of the seed used as a component id,
so the components start distinct and a change of M keeps the first ones); each
component runs the engine's full local-step count per round on its own seeded batches
(purpose ``fedem_<m>``), like each learner of the authors' ``fit_epochs``; clients keep
one optimiser state per (client, component) across rounds (the authors' clients own
their learners' optimisers); π_i starts uniform (1/M), and a π_im that underflows to 0
stays 0 (plain EM); the reported training loss of client i is Σ_m of the mean
weighted M-step batch loss of component m (the q-weighted loss the M-step minimises).

Training path: component m's M-step of every client is one call of
:meth:`pflrepro.training.engine.Engine.train` with the per-sample weights q_s(m) as the
objective :class:`SampleWeighted` (one weight row per client over the data set's rows):
the per-client loop on the CPU, vmapped on CUDA.
"""

from __future__ import annotations

import dataclasses
from typing import TypedDict

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from pflrepro.algorithms.base import Algorithm, register_algorithm
from pflrepro.algorithms.registry import hyper
from pflrepro.store.results import WEIGHT, MetricLog
from pflrepro.training.objective import Aux, Batch, Objective, per_client_field
from pflrepro.training.optim import OptState, Params
from pflrepro.training.params import stack, take, weighted_mean


class FedEMState(TypedDict):
    """FedEM's state."""

    components: Params  #: the M shared components, stacked by component
    pi: torch.Tensor  #: each client's mixture weights π (K, M), float64
    opt: OptState  #: optimiser states, stacked by client, then component


@dataclasses.dataclass(frozen=True)
class SampleWeighted(Objective):
    """``Σ_s weight_s · ℓ_s / |batch|``: the batch's cross-entropy, each sample weighted.

    ``weights`` has one entry per row of the data set (a client's batch uses the entries
    of its samples' rows), one such row per client when ``per_client``. With all weights
    1 it is the plain mean loss. FedEM's M-step for component m: weight_s = q_s(m).
    """

    weights: torch.Tensor = per_client_field()
    per_client: bool = False

    def loss(self, model: nn.Module, params: Params, batch: Batch, extra: object,
             state: object) -> tuple[torch.Tensor, Aux]:
        """Padding has mask 0; the weights are divided by the real batch size."""
        out = functional_call(model, params, (batch.x,))
        weight = self.weights[batch.idx] * batch.mask / batch.count
        return (F.cross_entropy(out, batch.y, reduction="none") * weight).sum(), {}


@dataclasses.dataclass(frozen=True)
class FedEMHyper:
    """Hyperparameters of FedEM."""

    components: int = hyper(4, "M: number of shared component models (FedeRiCo's "
                               "comparison uses 4).", minimum=1)

    def __post_init__(self) -> None:
        if isinstance(self.components, bool) or not isinstance(self.components, int):
            raise ValueError(f"fedem: components must be an int, got {self.components!r}")
        if self.components < 1:
            raise ValueError(f"fedem: components must be >= 1, got {self.components}")


@register_algorithm
class FedEM(Algorithm[FedEMState]):
    """Mixture of M shared components, per-client mixture weights; see the module docstring."""

    name = "fedem"
    display_name = "FedEM"
    summary = "FedEM (Marfoq et al. 2021): federated EM over M shared component models."
    Hyper = FedEMHyper
    records = (WEIGHT,)

    # ------------------------------------------------------------------ state
    def init(self) -> FedEMState:
        """M components from distinct seeds, uniform π, optimiser states (client, component)."""
        e = self.engine
        m_all = self.hp.components
        comps = [e.init_params(client=m) for m in range(m_all)]
        components = {n: torch.stack([c[n] for c in comps]) for n in comps[0]}
        opt = stack(stack(e.init_opt(comps[0]), m_all), e.num_clients)
        pi = torch.full((e.num_clients, m_all), 1.0 / m_all, dtype=torch.float64)
        return {"components": components, "pi": pi, "opt": opt}

    # ------------------------------------------------------------------ E-step
    def posteriors(self, state: FedEMState, client: int) -> torch.Tensor:
        """q_s(m) for client ``client``'s training samples: (n_train, M), float64.

        q_s(m) = softmax_m(log π_im − ℓ(h_m(x_s), y_s)), with the current components.
        """
        e = self.engine
        idx = e.data.train[client]
        x, y = e.data.x[idx], e.data.y[idx]
        with torch.no_grad():
            losses = torch.stack(
                [F.cross_entropy(e.logits(take(state["components"], m), x), y,
                                 reduction="none") for m in range(self.hp.components)],
                dim=1).to(torch.float64)
            log_prior = state["pi"][client].to(device=losses.device).log()
            return torch.softmax(log_prior - losses, dim=1).clone()

    # ------------------------------------------------------------------ round
    def round(self, state: FedEMState, rnd: int) -> tuple[FedEMState, np.ndarray]:
        """E-step and weighted M-step on every client; size-weighted server average."""
        e = self.engine
        m_all = self.hp.components
        comps = state["components"]
        clients = list(range(e.num_clients))
        # E-step with the current components, every client on the client threads
        q_all = list(e.threads.map_clients(lambda k: self.posteriors(state, k), clients))
        for k, q in enumerate(q_all):
            state["pi"][k] = q.mean(dim=0).cpu()
        losses = np.zeros(e.num_clients, dtype=np.float64)
        local = []  # local[m]: every client's component m after its M-step (stacked)
        for m in range(m_all):
            # q_s(m) of client k's training samples, placed at their data rows
            weights = torch.zeros(e.num_clients, len(e.data.x), dtype=torch.float32,
                                  device=e.device)
            for k, q in enumerate(q_all):
                weights[k, e.data.train[k]] = q[:, m].to(device=e.device, dtype=torch.float32)
            opt_m = {n: v[:, m] for n, v in state["opt"].items()}
            params, opt_m, loss_m = e.train(
                stack(take(comps, m), e.num_clients), opt_m, clients, rnd,
                purpose=f"fedem_{m}", objective=SampleWeighted(weights, per_client=True))
            for n, v in opt_m.items():
                state["opt"][n][:, m] = v
            local.append(params)
            losses += loss_m
        sizes = e.train_sizes()
        avg = [weighted_mean(local[m], sizes) for m in range(m_all)]
        state["components"] = {n: torch.stack([a[n] for a in avg]) for n in comps}
        # every client downloads the M components and uploads its M updated ones
        e.traffic.exchange(range(e.num_clients), up=m_all * e.model_size,
                           down=m_all * e.model_size)
        return state, losses

    # ------------------------------------------------------------------ predict
    def predict(self, state: FedEMState, client: int, x: torch.Tensor, rnd: int
                ) -> torch.Tensor:
        """Mixture Σ_m π_im p(y | x; h_m)."""
        e = self.engine
        pi = state["pi"][client]
        out = torch.zeros(len(x), e.data.num_classes, device=e.device)
        for m in range(self.hp.components):
            out += float(pi[m]) * e.probs(take(state["components"], m), x)
        return out

    def record(self, state: FedEMState, rnd: int, log: MetricLog) -> None:
        """Log the mixture weights π_im (client i, peer = component m)."""
        log.add_matrix(rnd, WEIGHT, state["pi"].numpy())
