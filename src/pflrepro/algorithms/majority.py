"""Majority class: each client predicts its most frequent training label, for every input.

A reference, not a learning method: no model, no training, no communication. It
shows what a partition alone gives on a table's metric. Under strong label skew
(PerFed-CKT's Dirichlet α = 0.01) most clients hold one class, and scored on test rows
of their own distribution this rule is right on nearly all of them; a method's
number means something only above it.

Client k's label is the most frequent label among its training rows (the rows it
trains on, never its test rows); a tie goes to the smallest label. Its prediction is
the one-hot probability vector of that label for every input. Every round trains
nobody (training losses NaN), so every evaluated round scores the same.
"""

from __future__ import annotations

from typing import TypedDict

import numpy as np
import torch

from pflrepro.algorithms.base import Algorithm, register_algorithm


class MajorityState(TypedDict):
    """Each client's majority training label (K,), int64."""

    labels: torch.Tensor


def majority_labels(labels: list[torch.Tensor], num_classes: int) -> torch.Tensor:
    """Each client's most frequent label (ties: the smallest), from its training labels.

    A client without training rows gets label 0.
    """
    counts = torch.stack([torch.bincount(y.to(torch.int64).cpu(), minlength=num_classes)
                          for y in labels])
    return counts.argmax(dim=1)  # the first maximum: the smallest of tied labels


@register_algorithm
class Majority(Algorithm[MajorityState]):
    """Predicts each client's most frequent training label; trains and sends nothing."""

    name = "majority"
    summary = ("Majority class (a reference): each client predicts its most frequent "
               "training label; no training, no communication.")
    client_sampling = True
    heterogeneous_models = True

    def init(self) -> MajorityState:
        """Each client's majority training label (the whole state)."""
        e = self.engine
        labels = [e.data.y[idx] for idx in e.data.train]
        return {"labels": majority_labels(labels, e.data.num_classes)}

    def round(self, state: MajorityState, rnd: int) -> tuple[MajorityState, np.ndarray]:
        """Nothing trains: the state stays, every training loss is NaN."""
        return state, np.full(self.engine.num_clients, np.nan)

    def predict(self, state: MajorityState, client: int, x: torch.Tensor, rnd: int
                ) -> torch.Tensor:
        """The one-hot vector of client ``client``'s majority label, for each row of ``x``."""
        e = self.engine
        out = torch.zeros((len(x), e.data.num_classes), dtype=torch.float32, device=x.device)
        out[:, int(state["labels"][client])] = 1.0
        return out
