"""FedAvg: local training from the global model, then a size-weighted average.

McMahan, Moore, Ramage, Hampson, Agüera y Arcas, "Communication-Efficient Learning of
Deep Networks from Decentralized Data", AISTATS 2017. Every round each client starts
from the global model, runs its local steps, and the server averages the resulting
models weighted by the clients' training-set sizes. Each client predicts with the
global model. Clients keep their own optimiser state across rounds (FedEM's
implementation, which FedeRiCo's baselines use, does the same).
"""

from __future__ import annotations

from typing import TypedDict, TypeVar, cast

import numpy as np
import torch

from pflrepro.algorithms.base import Algorithm, register_algorithm
from pflrepro.training.optim import OptState, Params
from pflrepro.training.params import broadcast, put_rows, rows, stack, weighted_mean
from pflrepro.training.terms import GradTerm

#: FedAvg's state: the global model and each client's optimiser state (stacked by
#: client). ``global`` is a Python keyword, hence the call form of TypedDict.
FedAvgState = TypedDict("FedAvgState", {"global": Params, "opt": OptState})
#: The state of a FedAvg variant: FedAvg's keys and any the variant adds (Ditto's).
FS = TypeVar("FS", bound=FedAvgState)


class FedAvgBase(Algorithm[FS]):
    """FedAvg's round and state, shared by its variants.

    With client sampling (C < 1) the round's participants train and the others keep
    their optimiser state. Subclasses change how a client predicts, or add gradient
    terms to its local steps (:meth:`terms`, FedProx).
    """

    client_sampling = True

    def terms(self, state: FS) -> tuple[GradTerm, ...]:
        """Gradient terms of every client's local steps this round (none for FedAvg)."""
        return ()

    def start(self) -> FedAvgState:
        """One global model; one optimiser state per client."""
        e = self.engine
        start = e.init_params()
        return {"global": start, "opt": stack(e.init_opt(start), e.num_clients)}

    def init(self) -> FS:
        """FedAvg's start (:meth:`start`).

        The cast holds where the variant's state is FedAvg's (FedAvg, FedAvg+, FedProx,
        FedProx-FT); a variant whose state adds keys overrides this (Ditto).
        ``tests/unit/test_method.py`` checks every method's keys after ``init``.
        """
        return cast(FS, self.start())

    def round(self, state: FS, rnd: int) -> tuple[FS, np.ndarray]:
        """The round's participants train from the global model; the server averages.

        Their models are averaged by train size; a NaN loss: the client did not take part.
        """
        e = self.engine
        chosen = e.participants(rnd)
        local, opt, trained = e.train(broadcast(state["global"], len(chosen)),
                                      rows(state["opt"], chosen), chosen, rnd,
                                      terms=self.terms(state))
        put_rows(state["opt"], chosen, opt)
        state["global"] = weighted_mean(local, e.train_sizes()[chosen])
        # each participant downloads the global model and uploads its trained one
        e.traffic.exchange(chosen, up=e.model_size, down=e.model_size)
        losses = np.full(e.num_clients, np.nan)
        losses[chosen] = trained
        return state, losses


@register_algorithm
class FedAvg(FedAvgBase[FedAvgState]):
    """FedAvg: every client predicts with the global model."""

    name = "fedavg"
    display_name = "FedAvg"
    summary = "FedAvg (McMahan et al. 2017): one global model, size-weighted averaging."

    def predict(self, state: FedAvgState, client: int, x: torch.Tensor, rnd: int
                ) -> torch.Tensor:
        """The global model's prediction."""
        return self.engine.probs(state["global"], x)
