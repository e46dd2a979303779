"""FedAvg+ (FedAvg with local tuning): the global model, fine-tuned per client.

Jiang, Konečný, Rush, Kannan, "Improving Federated Learning Personalization via Model
Agnostic Meta Learning", 2019; used as "FedAvg+" by FedEM (Marfoq et al. 2021) and
FedeRiCo, which tune the FedAvg model with 1 epoch of local training before each
client's evaluation. Training is exactly FedAvg's; only prediction differs. The
tuning uses a fresh optimiser and its own seeded batches (purpose ``finetune``), and
never changes the global model.
"""

from __future__ import annotations

import dataclasses

import torch

from pflrepro.algorithms.base import register_algorithm
from pflrepro.algorithms.fedavg import FedAvgBase, FedAvgState
from pflrepro.algorithms.registry import hyper


@dataclasses.dataclass(frozen=True)
class FedAvgPlusHyper:
    """Hyperparameters of FedAvg+."""

    finetune_epochs: int = hyper(1, "Local epochs of tuning before each client's evaluation.",
                                 minimum=1)


@register_algorithm
class FedAvgPlus(FedAvgBase[FedAvgState]):
    """FedAvg training; each client predicts with its locally tuned copy."""

    name = "fedavg_plus"
    display_name = "FedAvg+"
    summary = "FedAvg+ (FedAvg with local tuning before evaluation, Jiang et al. 2019)."
    Hyper = FedAvgPlusHyper

    def predict(self, state: FedAvgState, client: int, x: torch.Tensor, rnd: int
                ) -> torch.Tensor:
        """Tune a copy of the global model on the client's data, then predict."""
        e = self.engine
        steps = e.steps_per_round(client, epochs=self.hp.finetune_epochs)
        tuned, _, _ = e.train_client(state["global"], e.init_opt(state["global"]), client,
                                     rnd, purpose="finetune", steps=steps)
        return e.probs(tuned, x)
