"""Local training: every client trains its own model on its own data, alone.

The no-collaboration baseline of every paper here (called "Local" in FedeRiCo,
"Separate" in FedAMP). A personalised method that does not beat it has gained
nothing from federation.
"""

from __future__ import annotations

import numpy as np
import torch

from pflrepro.algorithms.base import Algorithm, ClientModels, register_algorithm
from pflrepro.training.params import put_rows, rows, take


@register_algorithm
class Local(Algorithm[ClientModels]):
    """Each client runs its local steps every round; nothing is communicated."""

    name = "local"
    display_name = "Local"
    summary = "Local training only, no collaboration (FedeRiCo 'Local', FedAMP 'Separate')."
    client_sampling = True

    def init(self) -> ClientModels:
        """Each client initialises its own model and optimiser."""
        start = self.engine.client_init()
        return {"params": start["params"], "opt": start["opt"]}

    def round(self, state: ClientModels, rnd: int) -> tuple[ClientModels, np.ndarray]:
        """Each of the round's participants trains on its own data (all by default)."""
        e = self.engine
        chosen = e.participants(rnd)
        params, opt, trained = e.train(rows(state["params"], chosen),
                                       rows(state["opt"], chosen), chosen, rnd)
        put_rows(state["params"], chosen, params)
        put_rows(state["opt"], chosen, opt)
        losses = np.full(e.num_clients, np.nan)
        losses[chosen] = trained
        return state, losses

    def predict(self, state: ClientModels, client: int, x: torch.Tensor, rnd: int
                ) -> torch.Tensor:
        """Client ``client`` predicts with its own model."""
        return self.engine.probs(take(state["params"], client), x)
