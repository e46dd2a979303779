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

from pflrepro.algorithms.base import register_algorithm
from pflrepro.algorithms.fedavg_plus import FedAvgPlus
from pflrepro.algorithms.fedprox import FedProxBase
from pflrepro.algorithms.registry import FedProxFTHyper


@register_algorithm
class FedProxFT(FedProxBase, FedAvgPlus):
    """FedProx training (FedProxBase.round); FedAvg+'s fine-tuned prediction."""

    name = "fedprox_ft"
    summary = "FedProx-FT (FedProx, then local fine-tuning before evaluation; Wang et al. 2019)."
    Hyper = FedProxFTHyper
