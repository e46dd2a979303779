"""FedeRiCo: decentralised EM over client models ("Find Your Friends").

Zhong, Smith, Mundt, Morris, Ji, Nair, Mihalas, "Find Your Friends: Personalized
Federated Learning with the Right Collaborators", 2022 (arXiv:2210.06597).

Each client i owns a model φ_i and a loss table L̂_i over all clients. One round:

1. *Sampling* (ε-greedy): with probability ε client i picks M neighbours uniformly
   from the others, otherwise the M others with the highest weights w_ij.
2. *E-step*: client i refreshes ℓ_ij — the cross-entropy of φ_j on its own
   training data (summed over the samples, eq. 3) — for itself and its neighbours, tracks
   L̂_ij ← (1 − β) L̂_ij + β ℓ_ij (EMA; the ``accumulative`` variant adds the latest
   known ℓ_ij of every j each round instead), and sets w_i = softmax_j(−L̂_ij).
3. *M-step*: model φ_k moves along Σ_i w_ik ∇ℓ(φ_k; batch of D_i) over the clients i
   that used it this round (itself and every client that sampled it): a model is
   trained by how much the *others* use it (w_ik, not w_ki).

Client i predicts with the mixture Σ_j w_ij p(y | x; φ_j).

The paper's form (defaults): ℓ_ij is the cross-entropy *summed* over client i's
training samples (eq. 3; ``estep_loss: sum``), and the M-step is one optimiser step
per round on eq. 4's objective (1/n) Σ_i w_ik Σ_{s∈D_i} ℓ(φ_k) ("small gradient steps
in lieu of full optimization"; ``mstep: step``), its gradient estimated from one
mini-batch of every client i that used model k, sample weights w_ik · n_i / (n |B_i|)
(n = all clients' training samples), so the estimate is unbiased.

Named variant (our former default, kept for comparison): ``estep_loss: mean`` uses
the per-sample mean loss (a softmax over losses ~n_i times smaller, hence much
flatter weights), and ``mstep: epoch`` runs the owner's local epoch of steps, each
step one mini-batch from every contributing client with its batch mean weighted by
w_ik.

Choices where the paper is silent (documented in config.yaml): the table starts from
one all-to-all evaluation before round 1 when M > 0; with M = 0 no client ever
receives another's model, so the table holds only the client's own loss and its
weights are one-hot on itself (local training, the paper's reading of M = 0); each
client initialises its own model (decentralised; identical models would make the
first weights uniform and the first greedy choices arbitrary).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from pflrepro.algorithms.base import Algorithm, State, register_algorithm
from pflrepro.algorithms.registry import hyper
from pflrepro.params import put, take
from pflrepro.results import WEIGHT, MetricLog
from pflrepro.seeding import numpy_generator


@dataclasses.dataclass(frozen=True)
class FedeRiCoHyper:
    """Hyperparameters of FedeRiCo (defaults from the paper)."""

    neighbors: int = hyper(3, "M: neighbours each client samples per round.", minimum=0)
    epsilon: float = hyper(0.3, "ε of ε-greedy sampling (1 = uniform).", minimum=0.0,
                           maximum=1.0)
    beta: float = hyper(0.6, "β: momentum of the EMA loss tracking.", minimum=0.0, maximum=1.0)
    loss_tracking: str = hyper("ema", "'ema' (paper default) or 'accumulative' (Fig. 5a).",
                               choices=("ema", "accumulative"))
    estep_loss: str = hyper("sum", "ℓ_ij of the E-step: 'sum' of the cross-entropy over client "
                            "i's training samples (eq. 3, the paper's form) or the per-sample "
                            "'mean' (our former default; much flatter weights).",
                            choices=("sum", "mean"))
    mstep: str = hyper("step", "M-step per round: 'step' = one optimiser step on eq. 4's "
                       "(1/n) Σ_i w_ik Σ_{s∈D_i} ℓ (the paper's 'small gradient steps'), from "
                       "one mini-batch of every client that used model k; 'epoch' = the "
                       "owner's local epoch of such steps, each client's batch mean weighted "
                       "by w_ik (our former default).", choices=("step", "epoch"))


@register_algorithm
class FedeRiCo(Algorithm):
    """Decentralised EM with ε-greedy neighbour sampling; see the module docstring."""

    name = "federico"
    summary = "FedeRiCo (Zhong et al. 2022): decentralised EM over client models."
    Hyper = FedeRiCoHyper
    records = (WEIGHT,)

    # ------------------------------------------------------------------ state
    def init(self) -> State:
        """Own model per client; loss table from one all-to-all pass.

        With M = 0 the table holds only the client's own loss (others +∞, weight 0).
        """
        e = self.engine
        state: State = e.client_init()
        k_all = e.num_clients
        reach = ([list(range(k_all))] * k_all if self.hp.neighbors > 0
                 else [[i] for i in range(k_all)])
        losses = self._losses(state, reach)
        self.count_traffic(reach, gradients=False)  # the first table: every model to all
        losses = torch.where(torch.isnan(losses), torch.full_like(losses, float("inf")), losses)
        state["last"] = losses
        state["table"] = losses.clone()
        state["weights"] = torch.softmax(-state["table"], dim=1)
        return state

    def pair_loss(self, params: dict[str, torch.Tensor], client: int) -> float:
        """ℓ of ``params`` on ``client``'s training data: summed (eq. 3) or mean."""
        e = self.engine
        mean = e.mean_loss(params, client, "train")
        return mean * e.n_train(client) if self.hp.estep_loss == "sum" else mean

    def _losses(self, state: State, pairs: list[list[int]]) -> torch.Tensor:
        """ℓ_ij for client i and each j in ``pairs[i]`` (NaN elsewhere), float64."""
        e = self.engine
        out = torch.full((e.num_clients, e.num_clients), float("nan"), dtype=torch.float64)

        def row(i: int) -> None:
            for j in pairs[i]:
                out[i, j] = self.pair_loss(take(state["params"], j), i)

        e.threads.run_clients(row, range(len(pairs)))
        return out

    # ------------------------------------------------------------------ round
    def neighbours(self, weights: torch.Tensor, rnd: int) -> list[list[int]]:
        """ε-greedy choice of M neighbours per client (never itself)."""
        k_all = weights.shape[0]
        m = min(self.hp.neighbors, k_all - 1)
        chosen = []
        for i in range(k_all):
            rng = numpy_generator(self.engine.seed, rnd, i, "federico_neighbours")
            others = np.array([j for j in range(k_all) if j != i])
            if m == 0:
                chosen.append([])
            elif rng.random() < self.hp.epsilon:
                chosen.append(sorted(rng.choice(others, size=m, replace=False).tolist()))
            else:
                # random order first, so ties (e.g. uniform weights) are broken at random
                shuffled = rng.permutation(others)
                w = weights[i, shuffled].numpy()
                top = shuffled[np.argsort(-w, kind="stable")[:m]]
                chosen.append(sorted(top.tolist()))
        return chosen

    def round(self, state: State, rnd: int) -> tuple[State, np.ndarray]:
        """ε-greedy sampling, E-step on the refreshed losses, weighted M-step."""
        e = self.engine
        k_all = e.num_clients
        nbrs = self.neighbours(state["weights"], rnd)
        used = [sorted([i, *nbrs[i]]) for i in range(k_all)]
        fresh = self._losses(state, used)
        seen = ~torch.isnan(fresh)
        state["last"] = torch.where(seen, fresh, state["last"])
        if self.hp.loss_tracking == "ema":
            b = self.hp.beta
            state["table"] = torch.where(seen, (1 - b) * state["table"] + b * fresh,
                                         state["table"])
        else:
            state["table"] = state["table"] + state["last"]
        state["weights"] = torch.softmax(-state["table"], dim=1)
        w = state["weights"].to(torch.float32)

        losses = np.full(k_all, np.nan)

        n_all = float(sum(e.n_train(i) for i in range(k_all)))

        def share(i: int, batch: int) -> float:
            """Weight of each of client i's ``batch`` samples in model k's step."""
            if self.hp.mstep == "step":  # eq. 4: (1/n) Σ_i w_ik Σ_s ℓ, unbiased
                return e.n_train(i) / (n_all * batch)
            return 1.0 / batch  # former: each client's batch mean

        def client(k: int) -> None:
            users = [i for i in range(k_all) if k in used[i]]
            steps = 1 if self.hp.mstep == "step" else e.steps_per_round(k)
            streams = {i: e.minibatches(i, rnd, f"federico_mstep_{k}", steps) for i in users}
            params, opt = take(state["params"], k), take(state["opt"], k)
            total = 0.0
            for s in range(steps):
                idx = torch.cat([streams[i][s] for i in users])
                sw = torch.cat([torch.full((len(streams[i][s]),), float(w[i, k]) *
                                           share(i, len(streams[i][s])), device=e.device)
                                for i in users])
                loss, grads = e.loss_and_grad(params, idx, sample_weight=sw)
                params, opt = e.optimizer.step(params, grads, opt)
                total += loss
            put(state["params"], k, params)
            put(state["opt"], k, opt)
            losses[k] = total / steps

        e.threads.run_clients(client, range(k_all))
        self.count_traffic(nbrs)
        return state, losses

    def count_traffic(self, reach: list[list[int]], gradients: bool = True) -> None:
        """Peer traffic of a round in which client i received the models of ``reach[i]``.

        Each model j → i is P scalars up for j and down for i; with ``gradients``
        (the M-step) i sends back w_ij and its weighted gradient on φ_j (P + 1), once
        per M-step of φ_j (one with ``mstep: step``, the owner's local steps with
        ``epoch``). The mixture a client predicts with (every φ_j with w_ij > 0) is
        not counted: the papers count training traffic.
        """
        e = self.engine
        p = e.model_size
        for i, peers in enumerate(reach):
            for j in peers:
                if j == i:
                    continue
                e.traffic.send_up(j, p)
                e.traffic.send_down(i, p)
                if gradients:
                    steps = 1 if self.hp.mstep == "step" else e.steps_per_round(j)
                    e.traffic.send_up(i, steps * (p + 1))
                    e.traffic.send_down(j, steps * (p + 1))

    # ------------------------------------------------------------------ predict
    def predict(self, state: State, client: int, x: torch.Tensor, rnd: int) -> torch.Tensor:
        """Mixture Σ_j w_ij p(y | x; φ_j)."""
        e = self.engine
        w = state["weights"][client].to(torch.float32)
        out = torch.zeros(len(x), e.data.num_classes, device=e.device)
        for j in range(e.num_clients):
            out += float(w[j]) * e.probs(take(state["params"], j), x)
        return out

    def record(self, state: State, rnd: int, log: MetricLog) -> None:
        """Log the client weights w_ij (client i, peer j)."""
        log.add_matrix(rnd, WEIGHT, state["weights"].numpy())
