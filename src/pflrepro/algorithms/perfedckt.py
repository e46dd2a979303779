"""PerFed-CKT: personalised FL by co-distillation within clusters of similar clients.

Cho, Wang, Joshi, Zhou, Lee, "Personalized Federated Learning for Heterogeneous
Clients with Clustered Knowledge Transfer" (clustered knowledge transfer, arXiv 2021).
Clients keep their own models (architectures may differ) and exchange soft decisions
on an unlabeled public set P instead of parameters. Each round t:

1. m = C·K clients are sampled without replacement (``training.client_fraction``;
   ``engine.participants``); each resumes from its own last model;
2. once centroids exist (every round after the first), each sampled client k picks
   the one nearest (ℓ2) to its current soft decisions s_k on P (eq. 4: "each client
   k′ ∈ S … determines the centroid that is closest to its current model's logit"),
   also on its first participation, as its target s̄_k, then takes τ local steps on
   F_k(w) + λ · KL(s̄_k(x) ‖ s(w, x)) over a public mini-batch (eq. 2), the private
   loss on a private mini-batch;
3. it sends its new soft decisions on P (|P| × N numbers); the server runs k-means
   (scikit-learn, c clusters) on the m flattened matrices and sends the c centroids
   to the next round's sampled clients (c · |P| · N numbers each).

Client k predicts with its own model. Clients may run different architectures
(``training.architectures``; the paper's Table 2: VGG13 / VGG11 / CNN by data size):
only soft decisions on P cross the network, so nothing here depends on the model.

Choices where the text is silent:

* the distillation term is the *mean* KL over the public mini-batch (eq. 2 writes the
  sum; λ here is the paper's λ times the batch size); default λ = 1, not stated;
* the public mini-batch has ``training.batch_size`` rows (``public_batch`` overrides),
  drawn from the client's seeded stream (purpose ``public``);
* in round 1 there are no centroids yet: every client trains without the
  distillation term (the text starts the exchange with the first round's logits);
* each client starts from a model of its own (seed slot k), as decentralised
  clients would; k-means: ``n_init=10``, seeded by (seed, round);
* p_k, the chance a client is sampled, is not defined in the text: the experiment's
  ``training.client_selection`` decides (:mod:`pflrepro.training.selection`;
  ``uniform``, p_k = 1/K, in the paper-scale experiments; ``data_size``, p_k = n_k / n,
  the authors' convention in their client-selection work, is the named variant; the
  CPU design reshuffles so that its 20 rounds train every client, as the paper's ~70
  rounds do). Which test rows a client is scored on and how client accuracies are
  averaged is not stated either: each client's own test share (``training.eval_test:
  own``), averaged unweighted (config.yaml gives the reasons; docs/methods/perfedckt.md
  the measurements and the majority-class reference);
* c ≤ m is required (k-means cannot make more clusters than points).

Training path: the local steps are the objective :class:`Distill` (the public batch
its extra seeded stream, each client's centroid its target), trained by
:meth:`pflrepro.training.engine.Engine.train` once per architecture for the round's
participants of that architecture: the per-client loop on the CPU, vmapped on CUDA.
"""

from __future__ import annotations

import dataclasses
from typing import TypedDict

import numpy as np
import torch
from torch import nn

from pflrepro.algorithms.base import Algorithm, register_algorithm
from pflrepro.algorithms.registry import hyper
from pflrepro.seeding import NO_CLIENT, derive_seed
from pflrepro.training.distillation import distill_cross
from pflrepro.training.objective import (
    Aux,
    Batch,
    Objective,
    Stream,
    masked_ce,
    per_client_field,
)
from pflrepro.training.optim import OptState, Params
from pflrepro.training.params import take


@dataclasses.dataclass(frozen=True)
class Distill(Objective):
    """The batch's mean cross-entropy plus ``lam`` × the mean KL(target ‖ s(w, x)) on P.

    Each step also draws a batch of rows of the public set P (stream ``purpose``, rows
    of ``batch_size`` or ``training.batch_size``); ``targets`` (|P|, N) holds a
    probability vector per public row, one such matrix per client when ``per_client``.
    Only the cross-entropy part −Σ target · log s(w, x) of the KL carries gradient.
    The reported loss is the private batch's. PerFed-CKT's local step (Cho et al.
    2021, eq. 2) towards the nearest centroid.
    """

    targets: torch.Tensor = per_client_field()
    lam: float = 0.0
    purpose: str = "public"
    batch_size: int | None = None
    per_client: bool = False

    @property
    def streams(self) -> tuple[Stream, ...]:  # type: ignore[override]
        """The public batch's stream."""
        return (Stream(self.purpose, public=True, batch_size=self.batch_size),)

    def loss(self, model: nn.Module, params: Params, batch: Batch, extra: list[Batch],
             state: object) -> tuple[torch.Tensor, Aux]:
        """Both losses in one pass; padding carries mask 0 in each."""
        private = masked_ce(model, params, batch)
        pub = extra[0]
        cross = distill_cross(model, params, pub.x, self.targets[pub.idx], pub.mask, pub.count)
        return private + self.lam * cross, {"loss": private.detach()}


class PerFedCKTState(TypedDict):
    """PerFed-CKT's state (lists by client: architectures may differ)."""

    params: list[Params]  #: each client's model
    opt: list[OptState]  #: each client's optimiser state
    centroids: torch.Tensor  #: the clusters' soft decisions (clusters, |P|, classes)
    has_centroids: torch.Tensor  #: () bool: whether any round has set the centroids


@dataclasses.dataclass(frozen=True)
class PerFedCKTHyper:
    """Hyperparameters of PerFed-CKT."""

    clusters: int = hyper(3, "c: k-means clusters of the sampled clients' soft decisions "
                             "(1 <= c <= m, the clients sampled per round).", minimum=1)
    lam: float = hyper(1.0, "λ: weight of the distillation term, the mean KL(s̄_k ‖ s(w, x)) "
                            "over a public mini-batch (0: local training).", minimum=0.0)
    public_batch: int = hyper(0, "Rows of a public mini-batch (0 = training.batch_size).",
                              minimum=0)


def cluster_soft_decisions(decisions: torch.Tensor, clusters: int,
                           seed: int) -> tuple[torch.Tensor, np.ndarray]:
    """k-means of m soft-decision matrices (m, |P|, N) into ``clusters`` centroids.

    Returns the centroids (c, |P|, N), float32, and each matrix's cluster label.
    """
    from sklearn.cluster import KMeans  # 2 s to import: only where it is used

    m = decisions.shape[0]
    if not 1 <= clusters <= m:
        raise ValueError(f"perfedckt: {clusters} clusters of {m} clients' soft decisions; "
                         f"need 1 <= clusters <= {m}")
    flat = decisions.reshape(m, -1).to(torch.float64).cpu().numpy()
    km = KMeans(n_clusters=clusters, n_init=10, random_state=seed % 2**32).fit(flat)
    centroids = torch.from_numpy(km.cluster_centers_).to(torch.float32)
    return centroids.reshape(clusters, *decisions.shape[1:]), km.labels_.astype(np.int64)


def nearest(centroids: torch.Tensor, decisions: torch.Tensor) -> int:
    """Index of the centroid (c, |P|, N) nearest in ℓ2 to ``decisions`` (|P|, N) (eq. 4)."""
    gaps = ((centroids - decisions.unsqueeze(0)) ** 2).flatten(1).sum(dim=1)
    return int(gaps.argmin())


@register_algorithm
class PerFedCKT(Algorithm[PerFedCKTState]):
    """Own model per client, co-distilled towards the nearest cluster centroid."""

    name = "perfedckt"
    summary = ("PerFed-CKT (Cho et al. 2021): clients co-distill on an unlabeled public set "
               "towards the nearest k-means centroid of the sampled clients' soft decisions.")
    Hyper = PerFedCKTHyper
    client_sampling = True
    needs_public = True
    heterogeneous_models = True

    def init(self) -> PerFedCKTState:
        """Per-client models and optimiser states (lists: architectures may differ).

        No centroids yet.
        """
        e = self.engine
        public = e.data.public
        if public is None:
            raise ValueError("perfedckt needs the experiment's public set (public: in the "
                             "config)")
        m = max(1, round(e.cfg.client_fraction * e.num_clients))
        if self.hp.clusters > m:
            raise ValueError(f"perfedckt: clusters = {self.hp.clusters} exceeds the {m} "
                             f"clients sampled per round (client_fraction "
                             f"{e.cfg.client_fraction} of {e.num_clients})")
        params, opt = e.client_models()
        shape = (self.hp.clusters, len(public), e.data.num_classes)
        return {"params": params, "opt": opt,
                "centroids": torch.zeros(shape, dtype=torch.float32),
                "has_centroids": torch.zeros((), dtype=torch.bool)}

    def soft_decisions(self, params: Params) -> torch.Tensor:
        """s(w, x) for every x of the public set: (|P|, N) probabilities."""
        e = self.engine
        assert e.data.public is not None
        return e.probs(params, e.data.public)

    def public_batches(self, client: int, rnd: int, steps: int) -> list[torch.Tensor]:
        """``steps`` public mini-batches (row indices of P), the engine's seeded stream."""
        e = self.engine
        assert e.data.public is not None
        rows = torch.arange(len(e.data.public), device=e.device)
        return e.minibatches(client, rnd, "public", steps, pool=rows,
                             batch_size=self.hp.public_batch or None)

    def local_update(self, params: Params, opt: OptState, client: int, rnd: int,
                     target: torch.Tensor | None) -> tuple[Params, OptState, float]:
        """τ steps on F_k + λ·KL(target ‖ s(w, ·)); without a target: plain local steps."""
        e = self.engine
        return e.train_client(params, opt, client, rnd, objective=self.objective(target))

    def objective(self, targets: torch.Tensor | None, per_client: bool = False
                  ) -> Distill | None:
        """The distillation objective towards ``targets`` (None: plain local steps)."""
        if targets is None or self.hp.lam == 0:
            return None
        return Distill(targets, float(self.hp.lam), "public", self.hp.public_batch or None,
                       per_client=per_client)

    def round(self, state: PerFedCKTState, rnd: int) -> tuple[PerFedCKTState, np.ndarray]:
        """Sampled clients distill towards their nearest centroid, then k-means anew."""
        e = self.engine
        chosen = e.participants(rnd)
        assert e.data.public is not None
        numbers = len(e.data.public) * e.data.num_classes  # one soft-decision matrix
        has = bool(state["has_centroids"])
        centroids = state["centroids"].to(e.device)
        if has:  # the sampled clients receive the centroids
            e.traffic.send_down(chosen, self.hp.clusters * numbers)
        losses = np.full(e.num_clients, np.nan)

        def target(k: int) -> torch.Tensor:
            # eq. 4: the centroid nearest to its current soft decisions
            return centroids[nearest(centroids, self.soft_decisions(state["params"][k]))]

        targets = list(e.threads.map_clients(target, chosen)) if has else None
        # one training call per architecture (a call trains stacked models of one shape)
        for arch in sorted({e.arch_of[k] for k in chosen}):
            pos = [i for i, k in enumerate(chosen) if e.arch_of[k] == arch]
            group = [chosen[i] for i in pos]
            params = {n: torch.stack([state["params"][k][n] for k in group])
                      for n in state["params"][group[0]]}
            opt = {n: torch.stack([state["opt"][k][n] for k in group])
                   for n in state["opt"][group[0]]}
            objective = None if targets is None else self.objective(
                torch.stack([targets[i] for i in pos]), per_client=True)
            params, opt, group_losses = e.train(params, opt, group, rnd, objective=objective)
            for i, k in enumerate(group):
                # copies, not views of the stack (a checkpoint stores each client's own)
                state["params"][k] = {n: v.clone() for n, v in take(params, i).items()}
                state["opt"][k] = {n: v.clone() for n, v in take(opt, i).items()}
                losses[k] = group_losses[i]
        sent = torch.stack(list(e.threads.map_clients(
            lambda k: self.soft_decisions(state["params"][k]), chosen)))
        e.traffic.send_up(chosen, numbers)  # each sends its new soft decisions
        seed = derive_seed(e.seed, rnd, NO_CLIENT, "kmeans")
        new_centroids, _ = cluster_soft_decisions(sent, self.hp.clusters, seed)
        state["centroids"] = new_centroids
        state["has_centroids"] = torch.ones((), dtype=torch.bool)
        return state, losses

    def predict(self, state: PerFedCKTState, client: int, x: torch.Tensor, rnd: int
                ) -> torch.Tensor:
        """Client ``client`` predicts with its own model."""
        return self.engine.probs(state["params"][client], x)
