"""FedProx: FedAvg whose local objective adds a proximal pull to the global model.

Li, Sahu, Zaheer, Sanjabi, Talwalkar, Smith, "Federated Optimization in Heterogeneous
Networks", MLSys 2020; a baseline of FedAMP (Huang et al., AAAI 2021). Client k
starting a round from the global model w_g minimises

    h_k(w) = F_k(w) + (μ/2) ‖w − w_g‖²

approximately with the engine's local steps: every step's gradient gets the extra term
μ (w − w_g), which carries gradient (it is added to the data gradient before the
optimiser step, never detached). Everything else is FedAvg's: size-weighted averaging,
per-client optimiser state kept across rounds, prediction with the global model;
μ = 0 is FedAvg exactly.

Choices where the paper is silent: the term is added to the gradient fed to the
training optimiser (for Adam it is therefore rescaled like the data gradient, as in
the public FedProx implementations that add it to the loss); the "inexact solver" is
the engine's fixed step count (``local_epochs``/``local_steps``), no γ-inexactness
test; full participation and no straggler dropping. Default μ = 0.01: one of the
values of the paper's grid {0.001, 0.01, 0.1, 0.5, 1}, small enough not to freeze the
local models on the FedAMP data sets; tune it per data set in the config.
"""

from __future__ import annotations

import dataclasses

import torch

from pflrepro.algorithms.base import register_algorithm
from pflrepro.algorithms.fedavg import FedAvgBase, FedAvgState
from pflrepro.algorithms.registry import hyper
from pflrepro.training.terms import GradTerm, Proximal


@dataclasses.dataclass(frozen=True)
class FedProxHyper:
    """Hyperparameters of FedProx."""

    mu: float = hyper(0.01, "μ: weight of the proximal term (μ/2)‖w − w_global‖² in each "
                            "client's local objective (0 = FedAvg).", minimum=0.0)


class FedProxBase(FedAvgBase[FedAvgState]):
    """FedAvg's round with the proximal term in every local step; no prediction rule."""

    def terms(self, state: FedAvgState) -> tuple[GradTerm, ...]:
        """μ (w − w_g): the pull towards this round's global model."""
        return (Proximal(state["global"], float(self.hp.mu)),)


@register_algorithm
class FedProx(FedProxBase):
    """FedProx: every client predicts with the global model."""

    name = "fedprox"
    display_name = "FedProx"
    summary = "FedProx (Li et al. 2020): FedAvg with a proximal term μ/2‖w − w_global‖²."
    Hyper = FedProxHyper

    def predict(self, state: FedAvgState, client: int, x: torch.Tensor, rnd: int
                ) -> torch.Tensor:
        """The global model's prediction."""
        return self.engine.probs(state["global"], x)
