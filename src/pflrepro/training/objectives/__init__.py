"""Objectives: what a local step differentiates when it is not the plain mean loss.

Local training (:mod:`pflrepro.training.local_training`) draws the mini-batches, adds the
gradient terms (:mod:`pflrepro.training.terms`), steps the optimiser and masks padded steps;
an objective decides the loss and gradient of one step. Without one, a step's loss is
the mean cross-entropy of the batch. An objective gives that computation twice, with
the same meaning:

* :meth:`Objective.loss_and_grad`: one client, one batch (the loop path); its
  arithmetic is the one the method used before it moved onto the shared path, so the
  CPU runs stay byte-identical;
* :meth:`Objective.stacked_loss_and_grad`: every client of a vectorised pass at once
  (``torch.func.vmap`` over the client dimension), equal to the loop's up to float
  rounding (tested in ``tests/unit/test_objectives.py``).

Like a term, an objective is data, given once for every client or per client
(stacked, row ``i`` for the ``i``-th trained client). An objective that keeps a
per-client quantity across steps (APFL's α) keeps it in the optimiser state under a
key ``obj.<name>``: it is then stacked, taken per client, masked on padded steps and
handed back like the optimiser's own state, and the optimiser never touches it.

Kinds: :class:`SampleWeighted` (per-sample weights on the data loss: FedEM's
responsibilities), :class:`PeerWeighted` (a weighted sum of batch losses on several
clients' data, each batch from that client's own seeded stream: FedeRiCo's M-step),
:class:`MixedPair` (a model trained beside a personal model
whose loss is that of their parameter mixture, the mixing weight learnt: APFL),
:class:`MAML` (Per-FedAvg), :class:`Distill` (PerFed-CKT) and :class:`GatedExperts`
(K experts and a gate trained jointly on responsibilities: FedMix).
"""

from __future__ import annotations

from pflrepro.training.objectives.base import Batch, Objective, Stream, masked_ce
from pflrepro.training.objectives.distill import Distill
from pflrepro.training.objectives.experts import (
    EXPERT_LOSS_KEY,
    GATE,
    GatedExperts,
    expert_prefix,
    gate_grad,
    gate_logits,
    init_gate,
    join_experts,
    split_experts,
)
from pflrepro.training.objectives.meta import MAML, hessian_vector_product
from pflrepro.training.objectives.mixed import (
    ALPHA_KEY,
    BASE,
    MIXED,
    MixedPair,
    join_pair,
    join_pair_states,
    mix,
    split_pair,
    split_pair_states,
)
from pflrepro.training.objectives.weighted import PeerWeighted, SampleWeighted

__all__ = ["ALPHA_KEY", "BASE", "Batch", "Distill", "EXPERT_LOSS_KEY", "GATE", "GatedExperts",
           "MAML", "MIXED", "MixedPair", "Objective", "PeerWeighted", "SampleWeighted",
           "Stream", "expert_prefix", "gate_grad", "gate_logits", "init_gate",
           "hessian_vector_product", "join_experts", "join_pair", "join_pair_states",
           "masked_ce", "mix", "split_experts", "split_pair", "split_pair_states"]
