"""FedFomo: first-order model optimisation, each client mixing in the models that help it.

Zhang, Sapra, Fidler, Yeung, Alvarez, "Personalized Federated Learning with First
Order Model Optimization", ICLR 2021. Each client i keeps its own model θ_i and holds
out part of its training data as a validation set. One round (synchronous, every
client at once, from the models as they stood at the start of the round):

1. client i downloads the models of ``downloads`` other clients (all others by
   default; fewer: ε-greedy by its affinity vector P_i);
2. on its validation set it scores each download j by
   w_ij = max(0, (L_i(θ_i) − L_i(θ_j)) / ‖θ_j − θ_i‖), normalises the scores by their
   sum when positive (all zero: θ_i is kept) and moves θ_i ← θ_i + Σ_j w_ij (θ_j − θ_i);
3. it adds the round's weights to its affinities (P_ij += w_ij) and runs its local
   training steps on the rest of its training data.

Client i predicts with its own model.

Choices where the paper is silent or the brief fixes them:
the validation split (``val_fraction`` 0.2, as in FedeRiCo's comparison) is one
seeded permutation from (seed, setup round, client, ``fedfomo_val``) of
round(f·n) samples (half up); a client left without a validation or training sample
raises. Local epochs count batches of the remaining samples only.
L_i is the mean cross-entropy on the validation set and ‖·‖ the Euclidean norm over all
parameters (0/0 := 0). The ε-greedy choice follows the official code (NVlabs/FedFomo,
``Client.get_federating_clients``): slot by slot, with probability ε_t the next client
of a random order, else the next one by descending P_ij (ties broken at random),
skipping clients already chosen; ε_t = max(0, ε − (t − 1)·``epsilon_decay``) with the
official defaults ε = 0.3, decay 0.05. ``affinity`` ``clipped`` adds the normalised
weights to P (the brief); ``signed`` adds the unclipped scores divided by |Σ_j score|,
as the official code does, so that harmful models fall below untried ones. Clients keep
their optimiser state across rounds (the official code resets it at every update).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import torch
import torch.nn.functional as F

from pflrepro.algorithms.base import Algorithm, State, register_algorithm
from pflrepro.algorithms.registry import FedFomoHyper
from pflrepro.optim import OptState, Params
from pflrepro.results import WEIGHT, MetricLog
from pflrepro.seeding import SETUP_ROUND, numpy_generator, torch_generator

if TYPE_CHECKING:  # the engine imports algorithms.base: no runtime import
    from pflrepro.engine import Engine


def fomo_scores(own_loss: float, own: Params, losses: dict[int, float],
                models: dict[int, Params]) -> dict[int, float]:
    """Unclipped scores (L_i(θ_i) − L_i(θ_j)) / ‖θ_j − θ_i‖ of each downloaded model j."""
    out = {}
    for j, loss in losses.items():
        dist = math.sqrt(sum(float(((models[j][k] - own[k]).double() ** 2).sum()) for k in own))
        out[j] = (own_loss - loss) / dist if dist > 0 else 0.0
    return out


def normalise(scores: dict[int, float]) -> dict[int, float]:
    """max(0, score) divided by the sum of the positive parts (all zero when none is > 0)."""
    pos = {j: max(0.0, s) for j, s in scores.items()}
    total = sum(pos.values())
    return {j: (v / total if total > 0 else 0.0) for j, v in pos.items()}


def fomo_update(own: Params, models: dict[int, Params], weights: dict[int, float]) -> Params:
    """θ_i + Σ_j w_ij (θ_j − θ_i)."""
    out = {k: v.clone() for k, v in own.items()}
    for j, w in weights.items():
        if w != 0.0:
            for k in out:
                out[k] += w * (models[j][k] - own[k])
    return out


@register_algorithm
class FedFomo(Algorithm):
    """Per-client models updated by validation-scored first-order model mixing."""

    name = "fedfomo"
    summary = "FedFomo (Zhang et al. 2021): clients mix in models that lower their val loss."
    Hyper = FedFomoHyper

    def __init__(self, engine: Engine, hyper: FedFomoHyper) -> None:
        super().__init__(engine, hyper)
        k_all = engine.num_clients
        if hyper.downloads > k_all - 1:
            raise ValueError(f"algorithm 'fedfomo': downloads={hyper.downloads} exceeds the "
                             f"{k_all - 1} other clients")
        self.val: list[torch.Tensor] = []
        self.fit: list[torch.Tensor] = []
        for k in range(k_all):
            idx = engine.data.train[k]
            n = len(idx)
            n_val = int(hyper.val_fraction * n + 0.5)
            if n < 2 or not 1 <= n_val <= n - 1:
                raise ValueError(f"algorithm 'fedfomo': client {k} has {n} training samples; "
                                 f"val_fraction={hyper.val_fraction} leaves an empty "
                                 f"validation or training part")
            order = torch.randperm(n, generator=torch_generator(engine.seed, SETUP_ROUND, k,
                                                                "fedfomo_val"))
            self.val.append(idx[order[:n_val].to(idx.device)].sort().values)
            self.fit.append(idx[order[n_val:].to(idx.device)].sort().values)

    # ------------------------------------------------------------------ state
    def init(self) -> State:
        """Own model and optimiser per client; zero affinities and weights."""
        state: State = self.engine.client_init()
        k_all = self.engine.num_clients
        state["affinity"] = torch.zeros(k_all, k_all, dtype=torch.float64)
        state["weights"] = torch.zeros(k_all, k_all, dtype=torch.float64)
        return state

    # ------------------------------------------------------------------ pieces
    def val_loss(self, params: Params, client: int) -> float:
        """Mean cross-entropy of ``params`` on ``client``'s validation set."""
        e = self.engine
        idx = self.val[client]
        return float(F.cross_entropy(e.logits(params, e.data.x[idx]), e.data.y[idx]))

    def steps(self, client: int) -> int:
        """Local steps per round: ``local_steps`` or epochs over the non-validation part."""
        cfg = self.engine.cfg
        if cfg.local_steps > 0:
            return cfg.local_steps
        return cfg.local_epochs * math.ceil(len(self.fit[client]) / cfg.batch_size)

    def batches(self, client: int, rnd: int, steps: int) -> list[torch.Tensor]:
        """The engine's batch stream (seeded permutations), over the non-validation part."""
        idx = self.fit[client]
        n = len(idx)
        bs = min(self.engine.cfg.batch_size, n)
        gen = torch_generator(self.engine.seed, rnd, client, "local")
        perms = [torch.randperm(n, generator=gen) for _ in range(math.ceil(steps * bs / n))]
        order = torch.cat(perms)[:steps * bs].to(idx.device)
        return list(idx[order].split(bs))

    def train(self, params: Params, opt: OptState, client: int,
              rnd: int) -> tuple[Params, OptState, float]:
        """Local optimiser steps on the client's non-validation data; mean batch loss."""
        e = self.engine
        batches = self.batches(client, rnd, self.steps(client))
        total = 0.0
        for idx in batches:
            loss, grads = e.loss_and_grad(params, idx)
            params, opt = e.optimizer.step(params, grads, opt)
            total += loss
        return params, opt, total / len(batches)

    def downloads(self, affinity: torch.Tensor, rnd: int) -> list[list[int]]:
        """Clients whose models each client receives (never itself), sorted."""
        k_all = affinity.shape[0]
        m = self.hp.downloads
        if m == -1 or m == k_all - 1:
            return [[j for j in range(k_all) if j != i] for i in range(k_all)]
        eps = max(0.0, self.hp.epsilon - (rnd - 1) * self.hp.epsilon_decay)
        chosen = []
        for i in range(k_all):
            rng = numpy_generator(self.engine.seed, rnd, i, "fedfomo_downloads")
            others = np.array([j for j in range(k_all) if j != i])
            random_order = list(rng.permutation(others))
            shuffled = rng.permutation(others)  # random tie-breaking of equal affinities
            top = list(shuffled[np.argsort(-affinity[i, shuffled].numpy(), kind="stable")])
            picks: list[int] = []
            while len(picks) < m:
                pool = random_order if rng.random() < eps else top
                j = int(pool.pop(0))
                while j in picks:
                    j = int(pool.pop(0))
                picks.append(j)
            chosen.append(sorted(picks))
        return chosen

    # ------------------------------------------------------------------ round
    def round(self, state: State, rnd: int) -> tuple[State, np.ndarray]:
        """Score downloads on the validation set, mix, update affinities, train locally."""
        e = self.engine
        k_all = e.num_clients
        old = {name: v.clone() for name, v in state["params"].items()}
        received = self.downloads(state["affinity"], rnd)
        weights = torch.zeros(k_all, k_all, dtype=torch.float64)
        losses = np.full(k_all, np.nan)

        def client(i: int) -> None:
            own = e.take(old, i)
            models = {j: e.take(old, j) for j in received[i]}
            scores = fomo_scores(self.val_loss(own, i), own,
                                 {j: self.val_loss(models[j], i) for j in models}, models)
            w = normalise(scores)
            for j, value in w.items():
                weights[i, j] = value
            if self.hp.affinity == "clipped":
                state["affinity"][i] += weights[i]
            else:
                total = abs(sum(scores.values()))
                for j, s in scores.items():
                    state["affinity"][i, j] += s / total if total > 0 else 0.0
            params, opt, losses[i] = self.train(fomo_update(own, models, w),
                                                e.take(state["opt"], i), i, rnd)
            e.put(state["params"], i, params)
            e.put(state["opt"], i, opt)

        e.run_clients(client, range(k_all))
        state["weights"] = weights
        return state, losses

    # ------------------------------------------------------------------ predict
    def predict(self, state: State, client: int, x: torch.Tensor, rnd: int) -> torch.Tensor:
        """Client ``client`` predicts with its own model."""
        return self.engine.probs(self.engine.take(state["params"], client), x)

    def record(self, state: State, rnd: int, log: MetricLog) -> None:
        """Log the round's normalised weights w_ij (client i, peer j; 0 if not received)."""
        log.add_matrix(rnd, WEIGHT, state["weights"].numpy())
