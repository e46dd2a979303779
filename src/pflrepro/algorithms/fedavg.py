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
    from pflrepro.engine import GradHook, Params


class FedAvgBase(Algorithm):
    """FedAvg's round and state, shared by its variants.

    Subclasses change how a client predicts, or add a proximal pull to its local
    steps (:meth:`prox`, FedProx).
    """

    def prox(self, state: State) -> tuple[Params, float] | None:
        """``(anchor, μ)`` of a proximal term μ (w − anchor) in every local step, or None."""
        return None

    def grad_hook(self, state: State, client: int) -> GradHook | None:
        """Extra gradient term of ``client``'s local steps this round (from :meth:`prox`)."""
        from pflrepro.engine import proximal_hook

        p = self.prox(state)
        return None if p is None else proximal_hook(*p)

    def init(self) -> State:
        """One global model; one optimiser state per client."""
        e = self.engine
        start = e.init_params()
        return {"global": start, "opt": e.stack(e.init_opt(start), e.num_clients)}

    def round(self, state: State, rnd: int) -> tuple[State, np.ndarray]:
        """Clients train from the global model; the server averages by train size."""
        e = self.engine
        if e.batch_clients:  # all clients in one pass (on CUDA)
            anchor, coef = self.prox(state) or (None, 0.0)
            local, state["opt"], losses = e.train_clients(
                e.stack(state["global"], e.num_clients), state["opt"],
                list(range(e.num_clients)), rnd, anchor=anchor, coef=coef)
            state["global"] = e.weighted_mean(local, e.train_sizes())
            return state, losses
        losses = np.full(e.num_clients, np.nan)
        average = e.running_mean(state["global"], e.train_sizes())

        def client(k: int) -> Params:
            params, opt, losses[k] = e.local_train(state["global"], e.take(state["opt"], k),
                                                   k, rnd, grad_hook=self.grad_hook(state, k))
            e.put(state["opt"], k, opt)
            return params

        for k, params in enumerate(e.map_clients(client, range(e.num_clients))):
            average.add(k, params)  # in client order, as a plain loop would
        state["global"] = average.result()
        return state, losses


@register_algorithm
class FedAvg(FedAvgBase):
    """FedAvg: every client predicts with the global model."""

    name = "fedavg"
    summary = "FedAvg (McMahan et al. 2017): one global model, size-weighted averaging."

    def predict(self, state: State, client: int, x: torch.Tensor, rnd: int) -> torch.Tensor:
        """The global model's prediction."""
        return self.engine.probs(state["global"], x)
