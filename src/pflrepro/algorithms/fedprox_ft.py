"""FedProx-FT: the FedProx global model, fine-tuned locally by each client.

A baseline of FedAMP (Huang et al., AAAI 2021), which follows Wang et al., "Federated
Evaluation of On-device Personalization", 2019: the global model of FedProx (Li et
al., MLSys 2020) is fine-tuned on each client's private data to give its personalised
model. Training is exactly :class:`~pflrepro.algorithms.fedprox.FedProx`'s; only
prediction differs, and it reuses FedAvg+'s tuning unchanged
(:meth:`~pflrepro.algorithms.fedavg_plus.FedAvgPlus.predict`; its FedAvg twin,
FedAvg-FT, is the ``fedavg_plus`` algorithm).

Choices where the papers are silent: the tuning runs ``finetune_epochs`` epochs of
the training optimiser from a fresh optimiser state on the client's own seeded
batches (purpose ``finetune``) before every evaluation, starting again from the
current global model each time (never accumulated, never fed back into training);
the tuning objective is the plain local loss, without FedProx's proximal term.
"""

from __future__ import annotations

import dataclasses

from pflrepro.algorithms.base import register_algorithm
from pflrepro.algorithms.fedavg_plus import FedAvgPlus
from pflrepro.algorithms.fedprox import FedProxBase
from pflrepro.algorithms.registry import hyper


@dataclasses.dataclass(frozen=True)
class FedProxFTHyper:
    """Hyperparameters of FedProx-FT."""

    mu: float = hyper(0.01, "μ: weight of the proximal term (μ/2)‖w − w_global‖² in each "
                            "client's local objective during training (0 = FedAvg-FT).",
                      minimum=0.0)
    finetune_epochs: int = hyper(1, "Local epochs of fine-tuning of the global model before "
                                    "each client's evaluation.", minimum=1)


@register_algorithm
class FedProxFT(FedProxBase, FedAvgPlus):
    """FedProx training (FedProxBase.round); FedAvg+'s fine-tuned prediction."""

    name = "fedprox_ft"
    display_name = "FedProx-FT"
    summary = "FedProx-FT (FedProx, then local fine-tuning before evaluation; Wang et al. 2019)."
    Hyper = FedProxFTHyper
