"""FedAvg: local training from the global model, then a size-weighted average.

McMahan, Moore, Ramage, Hampson, Agüera y Arcas, "Communication-Efficient Learning of
Deep Networks from Decentralized Data", AISTATS 2017. Every round each client starts
from the global model, runs its local steps, and the server averages the resulting
models weighted by the clients' training-set sizes. Each client predicts with the
global model. Clients keep their own optimiser state across rounds (FedEM's
implementation, which FedeRiCo's baselines use, does the same).
"""

from __future__ import annotations

import numpy as np
import torch

from pflrepro.algorithms.base import Algorithm, State, register_algorithm
from pflrepro.params import stack, weighted_mean
from pflrepro.terms import GradTerm


class FedAvgBase(Algorithm):
    """FedAvg's round and state, shared by its variants.

    Subclasses change how a client predicts, or add gradient terms to its local steps
    (:meth:`terms`, FedProx).
    """

    def terms(self, state: State) -> tuple[GradTerm, ...]:
        """Gradient terms of every client's local steps this round (none for FedAvg)."""
        return ()

    def init(self) -> State:
        """One global model; one optimiser state per client."""
        e = self.engine
        start = e.init_params()
        return {"global": start, "opt": stack(e.init_opt(start), e.num_clients)}

    def round(self, state: State, rnd: int) -> tuple[State, np.ndarray]:
        """Clients train from the global model; the server averages by train size."""
        e = self.engine
        local, state["opt"], losses = e.train(stack(state["global"], e.num_clients),
                                              state["opt"], range(e.num_clients), rnd,
                                              terms=self.terms(state))
        state["global"] = weighted_mean(local, e.train_sizes())
        return state, losses


@register_algorithm
class FedAvg(FedAvgBase):
    """FedAvg: every client predicts with the global model."""

    name = "fedavg"
    summary = "FedAvg (McMahan et al. 2017): one global model, size-weighted averaging."

    def predict(self, state: State, client: int, x: torch.Tensor, rnd: int) -> torch.Tensor:
        """The global model's prediction."""
        return self.engine.probs(state["global"], x)
