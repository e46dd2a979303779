"""Ditto: a FedAvg global model plus a personal model per client pulled towards it.

Li, Hu, Beirami, Smith, "Ditto: Fair and Robust Federated Learning Through
Personalization", ICML 2021 (Algorithm 1); a baseline of PerFed-CKT. Each round, from
the global model w^t:

1. every client k runs its local steps on F_k from w^t (FedAvg's update, with the
   client's own optimiser state kept across rounds), and the server averages the
   results weighted by training-set size into w^{t+1};
2. every client k updates its personal model v_k by local steps on
   h_k(v) = F_k(v) + (λ/2) ‖v − w^t‖²: each step's gradient gets λ (v − w^t)
   (:class:`~pflrepro.training.terms.Proximal`), anchored at the round's *starting* global model.

Client k predicts with v_k. λ = 0 is local training from the shared start; λ → ∞
pulls every v_k onto the global model.

Choices where the paper is silent, or where we follow the official code
(github.com/litian96/ditto: ``flearn/trainers_MTL/ditto.py`` and its base class
``flearn/trainers_MTL/fedbase.py``):

* v_k starts as a copy of the initial global model w^0 (official code);
* the personal update runs the same number of steps as the global one (the engine's
  ``local_epochs`` × batches, or ``local_steps``) unless ``personal_steps`` > 0, with the
  training optimiser and its own per-client state, on mini-batches of their own seeded
  stream (purpose ``personal``); the official code uses plain SGD for it;
* averaging is size-weighted, as FedAvg here (the official code averages the
  participants' updates uniformly, ``simple_average``; not changed here);
* participation: ``training.client_fraction`` (C) < 1 samples that fraction of the
  clients uniformly without replacement each round (only they train either model);
  C = 1, every client every round, is the config's default;
* the per-client training loss reported is that of the personal update (the model
  that is evaluated), the data term only;
* default λ = 0.1, inside the grid the paper tunes over ({0.01, 0.1, 1, 2}); set it per
  data set beside the key in the config.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from pflrepro.algorithms.base import register_algorithm
from pflrepro.algorithms.fedavg import FedAvgBase, FedAvgState
from pflrepro.algorithms.registry import hyper
from pflrepro.training.optim import OptState, Params
from pflrepro.training.params import put_rows, rows, stack, take
from pflrepro.training.terms import GradTerm, Proximal


class DittoState(FedAvgState):
    """FedAvg's state, and each client's personal model v_k and its optimiser state."""

    personal: Params  #: stacked by client
    personal_opt: OptState  #: stacked by client


@dataclasses.dataclass(frozen=True)
class DittoHyper:
    """Hyperparameters of Ditto."""

    lam: float = hyper(0.1, "λ: weight of (λ/2)‖v_k − w‖² pulling each personal model "
                            "towards the round's global model (0 = local training).",
                       minimum=0.0)
    personal_steps: int = hyper(0, "Local steps of the personal update per round (0 = as "
                                   "many as the global update: local_steps, or "
                                   "local_epochs × batches).", minimum=0)


@register_algorithm
class Ditto(FedAvgBase[DittoState]):
    """FedAvg's global model plus proximally regularised personal models."""

    name = "ditto"
    display_name = "Ditto"
    summary = ("Ditto (Li et al. 2021): FedAvg global model plus personal models trained "
               "on F_k(v) + λ/2‖v − w‖².")
    Hyper = DittoHyper
    def init(self) -> DittoState:
        """FedAvg's global model w^0 and states; every personal model a copy of w^0."""
        start = self.start()
        return {"global": start["global"], "opt": start["opt"],
                "personal": stack(start["global"], self.engine.num_clients),
                "personal_opt": {k: v.clone() for k, v in start["opt"].items()}}

    def personal_terms(self, anchor: Params) -> tuple[GradTerm, ...]:
        """λ (v − w^t): the personal models' pull towards the round's starting global model."""
        return (Proximal(anchor, float(self.hp.lam)),)

    def round(self, state: DittoState, rnd: int) -> tuple[DittoState, np.ndarray]:
        """FedAvg's round for the global model; personal update towards the round's w^t.

        Only the round's participants train (all by default); the others keep their
        personal models and optimiser states. The global update's traffic is FedAvg's;
        the personal models stay on the clients.
        """
        e = self.engine
        anchor = state["global"]  # w^t (the FedAvg round replaces it, not in place)
        state, _ = super().round(state, rnd)
        chosen = e.participants(rnd)
        personal, personal_opt, trained = e.train(
            rows(state["personal"], chosen), rows(state["personal_opt"], chosen), chosen,
            rnd, purpose="personal", steps=self.hp.personal_steps or None,
            terms=self.personal_terms(anchor))
        put_rows(state["personal"], chosen, personal)
        put_rows(state["personal_opt"], chosen, personal_opt)
        losses = np.full(e.num_clients, np.nan)
        losses[chosen] = trained
        return state, losses

    def predict(self, state: DittoState, client: int, x: torch.Tensor, rnd: int
                ) -> torch.Tensor:
        """Client ``client`` predicts with its personal model v_k."""
        return self.engine.probs(take(state["personal"], client), x)
