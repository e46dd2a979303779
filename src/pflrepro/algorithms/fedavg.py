"""FedAvg: local training from the global model, then a size-weighted average.

McMahan, Moore, Ramage, Hampson, Agüera y Arcas, "Communication-Efficient Learning of
Deep Networks from Decentralized Data", AISTATS 2017. Every round each client starts
from the global model, runs its local steps, and the server averages the resulting
models weighted by the clients' training-set sizes. Each client predicts with the
global model. Clients keep their own optimiser state across rounds (FedEM's
implementation, which FedeRiCo's baselines use, does the same).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch

from pflrepro.algorithms.base import Algorithm, State, register_algorithm

if TYPE_CHECKING:
    from pflrepro.engine import GradHook


class FedAvgBase(Algorithm):
    """FedAvg's round and state, shared by its variants.

    Subclasses change how a client predicts, or add a term to its local gradient
    (:meth:`grad_hook`, e.g. FedProx's proximal pull).
    """

    def grad_hook(self, state: State, client: int) -> GradHook | None:
        """Extra gradient term of ``client``'s local steps this round (FedAvg: none)."""
        return None

    def init(self) -> State:
        """One global model; one optimiser state per client."""
        e = self.engine
        start = e.init_params()
        return {"global": start, "opt": e.stack(e.init_opt(start), e.num_clients)}

    def round(self, state: State, rnd: int) -> tuple[State, np.ndarray]:
        """Clients train from the global model; the server averages by train size."""
        e = self.engine
        losses = np.full(e.num_clients, np.nan)
        local = e.stack(state["global"], e.num_clients)
        for k in range(e.num_clients):
            params, opt, losses[k] = e.local_train(state["global"], e.take(state["opt"], k),
                                                   k, rnd, grad_hook=self.grad_hook(state, k))
            e.put(local, k, params)
            e.put(state["opt"], k, opt)
        state["global"] = e.weighted_mean(local, e.train_sizes())
        return state, losses


@register_algorithm
class FedAvg(FedAvgBase):
    """FedAvg: every client predicts with the global model."""

    name = "fedavg"
    summary = "FedAvg (McMahan et al. 2017): one global model, size-weighted averaging."

    def predict(self, state: State, client: int, x: torch.Tensor, rnd: int) -> torch.Tensor:
        """The global model's prediction."""
        return self.engine.probs(state["global"], x)
