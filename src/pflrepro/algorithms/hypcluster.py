"""HypCluster: q shared hypotheses, every client trains the one that fits it best.

Mansour, Mohri, Ro, Suresh, "Three Approaches for Personalization with Applications to
Federated Learning", 2020 (the hypothesis-based clustering algorithm, HYPCLUSTER); a
baseline of PerFed-CKT. The server holds q hypotheses h_0..h_{q−1} (one model each).
One round:

1. every client k of the round (all of them unless ``training.client_fraction`` < 1)
   receives all q hypotheses and scores each on its whole training set,
   L_k(h_m) = mean cross-entropy (one full pass per hypothesis, no grad);
2. it chooses c_k = argmin_m L_k(h_m), ties going to the lowest index m;
3. it runs its local steps from h_{c_k} (the engine's local training, as FedAvg's) and
   sends the trained model back;
4. the server replaces every hypothesis h_m by the training-size-weighted average of
   the models trained from it: h_m ← Σ_{k: c_k = m} n_k h_m^(k) / Σ_{k: c_k = m} n_k. A
   hypothesis that no client chose stays as it was.

Client k predicts with h_{c_k}, c_k = argmin_m L_k(h_m) chosen afresh at evaluation
from its current training losses of every current hypothesis (the assignment step
above, as Mansour et al. define a client's hypothesis): a client that did not take
part in the latest round does not keep a stale choice. With q = 1 the method is
FedAvg.

Choices where the paper is silent (its algorithm samples clients and leaves the
initialisation and the local optimiser open):

* q = ``hypotheses`` defaults to 3: PerFed-CKT states no setting for this baseline, and
  3 is the number of clusters c with which PerFed-CKT itself does best (its Table 1);
* initialisation: hypothesis 0 is FedAvg's start (``engine.init_params()``, the draw
  without a client), hypothesis m ≥ 1 is drawn from the seed stream
  ``engine.init_params(client=m)`` (the client slot used as a hypothesis id, as FedEM
  does for its components), so the hypotheses start distinct, q = 1 is FedAvg bit for
  bit, and raising q keeps the first hypotheses; the authors' FedJAX code offers a
  random draw like this one or a k-means++-style start from locally trained models;
* before round 1 (the round-0 evaluation and cluster record) each client holds the
  hypothesis of lowest training loss at initialisation, i.e. the one round 1 chooses;
* participation: ``training.client_fraction`` (C) < 1 samples that fraction of the
  clients uniformly without replacement each round (the paper's algorithm samples
  clients too); only they choose, train and upload; C = 1, every client every round,
  is the config's default;
* evaluation scores every hypothesis on the client's whole training set again (q
  forward passes per client and evaluation); the recorded ``cluster`` is the choice
  each client made when it last took part (the one it trained), which can differ from
  the one it predicts with after the hypotheses moved;
* each client keeps one optimiser state across rounds, whichever hypothesis it trains
  (as FedAvg here; with plain SGD it holds only a step count, and the authors' code
  starts a fresh client optimiser each round), and the local steps use the purpose
  ``local`` batches of the engine, exactly as FedAvg's;
* a hypothesis whose loss on a client is NaN (non-finite parameters) counts as +∞
  there, so it is never preferred to a finite one;
* the per-client training loss reported is the mean data loss of its local steps;
* traffic per round: every client downloads the q hypotheses (q × P scalars, P the
  size of one model) and uploads its trained model (P); the round-0 choice uses the
  same hypotheses as round 1's download and is not counted again.

Each client's chosen index is recorded every round (and at round 0) as the metric
``cluster``, the one Clustered FL records, so the workflow draws the same cluster
figure for both.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TypedDict

import numpy as np
import torch

from pflrepro.algorithms.base import Algorithm, register_algorithm
from pflrepro.algorithms.registry import hyper
from pflrepro.store.results import CLUSTER, MetricLog
from pflrepro.training.optim import OptState, Params
from pflrepro.training.params import put_rows, rows, stack, take, weighted_mean


def _argmin(scores: np.ndarray) -> np.ndarray:
    """Row-wise first argmin of (clients, q) losses, NaN counting as +∞ (int64)."""
    scores = np.where(np.isnan(scores), math.inf, scores)
    return np.argmin(scores, axis=1).astype(np.int64)


class HypClusterState(TypedDict):
    """HypCluster's state."""

    hypotheses: Params  #: the q hypotheses, stacked by hypothesis
    cluster: torch.Tensor  #: each client's chosen hypothesis (K,), int64
    opt: OptState  #: each client's optimiser state, stacked by client


@dataclasses.dataclass(frozen=True)
class HypClusterHyper:
    """Hyperparameters of HypCluster."""

    hypotheses: int = hyper(3, "q: number of shared hypotheses (models); each client trains "
                               "the one with the lowest loss on its training data (1 = "
                               "FedAvg).", minimum=1)

    def __post_init__(self) -> None:
        if isinstance(self.hypotheses, bool) or not isinstance(self.hypotheses, int):
            raise ValueError(f"hypcluster: hyperparameter 'hypotheses' must be an int, "
                             f"got {self.hypotheses!r}")
        if self.hypotheses < 1:
            raise ValueError(f"hypcluster: hyperparameter 'hypotheses' must be >= 1, "
                             f"got {self.hypotheses}")


@register_algorithm
class HypCluster(Algorithm[HypClusterState]):
    """q shared hypotheses; each client trains and uses its lowest-loss one."""

    name = "hypcluster"
    display_name = "HypCluster"
    summary = ("HypCluster (Mansour et al. 2020): q shared models, each client trains and "
               "uses the one of lowest training loss.")
    Hyper = HypClusterHyper
    records = (CLUSTER,)
    client_sampling = True

    # ------------------------------------------------------------------ state
    def init(self) -> HypClusterState:
        """The q hypotheses (0: FedAvg's start, m ≥ 1: seed slot m), initial choices, opt states."""
        e = self.engine
        drawn = [e.init_params() if m == 0 else e.init_params(client=m)
                 for m in range(self.hp.hypotheses)]
        hypotheses = {n: torch.stack([h[n] for h in drawn]) for n in drawn[0]}
        return {"hypotheses": hypotheses, "cluster": self.assign(hypotheses),
                "opt": stack(e.init_opt(drawn[0]), e.num_clients)}

    # ------------------------------------------------------------------ choice
    def losses(self, hypotheses: Params, clients: list[int] | None = None) -> np.ndarray:
        """L_k(h_m): (len(clients), q) mean training loss of every hypothesis per client."""
        e = self.engine
        q = self.hp.hypotheses
        clients = list(range(e.num_clients)) if clients is None else clients

        def client(k: int) -> list[float]:
            return [e.mean_loss(take(hypotheses, m), k, "train") for m in range(q)]

        scores = list(e.threads.map_clients(client, clients))
        return np.asarray(scores, dtype=np.float64).reshape(len(clients), q)

    def assign(self, hypotheses: Params, clients: list[int] | None = None) -> torch.Tensor:
        """Each client's argmin_m L_k(h_m) (ties: lowest m; NaN counts as +∞), on the CPU."""
        return torch.from_numpy(_argmin(self.losses(hypotheses, clients)))

    # ------------------------------------------------------------------ round
    def round(self, state: HypClusterState, rnd: int) -> tuple[HypClusterState, np.ndarray]:
        """Choose, train the chosen hypothesis locally, average per hypothesis by size.

        Only the round's participants (all by default) choose and train; the others
        keep their previous choice and optimiser state.
        """
        e = self.engine
        q = self.hp.hypotheses
        hypotheses = state["hypotheses"]
        chosen = e.participants(rnd)
        e.traffic.send_down(chosen, q * e.model_size)  # every hypothesis, to score
        picks = self.assign(hypotheses, chosen)
        cluster = state["cluster"].clone()
        cluster[chosen] = picks
        start = {n: v[picks.to(v.device)] for n, v in hypotheses.items()}
        trained, opt, done = e.train(start, rows(state["opt"], chosen), chosen, rnd)
        put_rows(state["opt"], chosen, opt)
        e.traffic.send_up(chosen, e.model_size)  # the trained model
        sizes = e.train_sizes()[chosen]
        new = {n: v.clone() for n, v in hypotheses.items()}
        for m in range(q):
            members = (picks == m).nonzero().flatten().to(e.device)
            if len(members) == 0:
                continue  # no participant chose h_m: it stays as it was
            mean = weighted_mean({n: v[members] for n, v in trained.items()}, sizes[members])
            for n in new:
                new[n][m] = mean[n]
        state["hypotheses"] = new
        state["cluster"] = cluster
        losses = np.full(e.num_clients, np.nan)
        losses[chosen] = done
        return state, losses

    # ------------------------------------------------------------------ predict
    def current_choice(self, state: HypClusterState, client: int) -> int:
        """argmin_m L_client(h_m) over the current hypotheses (ties: lowest m; NaN = +∞)."""
        e = self.engine
        hypotheses = state["hypotheses"]
        scores = [e.mean_loss(take(hypotheses, m), client, "train")
                  for m in range(self.hp.hypotheses)]
        return int(_argmin(np.asarray([scores], dtype=np.float64))[0])

    def predict(self, state: HypClusterState, client: int, x: torch.Tensor, rnd: int
                ) -> torch.Tensor:
        """The prediction of the hypothesis of lowest current training loss for the client."""
        m = self.current_choice(state, client)
        return self.engine.probs(take(state["hypotheses"], m), x)

    def record(self, state: HypClusterState, rnd: int, log: MetricLog) -> None:
        """Log each client's chosen hypothesis index (metric ``cluster``)."""
        log.add_per_client(rnd, CLUSTER, state["cluster"].tolist())
