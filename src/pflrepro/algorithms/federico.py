"""FedeRiCo: decentralised EM over client models ("Find Your Friends").

Sui, Wen, Lau, Ross, Cresswell, "Find Your Friends: Personalized Federated Learning
with the Right Collaborators", 2022 (arXiv:2210.06597).

Each client i owns a model φ_i and a loss table L̂_i over all clients. One round:

1. *Sampling* (ε-greedy): with probability ε client i picks M neighbours uniformly
   from the others, otherwise the M others with the highest weights w_ij.
2. *E-step*: client i refreshes ℓ_ij — the cross-entropy of φ_j on its own training
   data — for itself and its neighbours, tracks L̂_ij ← (1 − β) L̂_ij + β ℓ_ij (EMA; the
   ``accumulative`` variant adds the latest known ℓ_ij of every j each round instead),
   and sets w_i = softmax_j(−L̂_ij).
3. *M-step*: model φ_k moves along Σ_i c_ik ∇ mean ℓ(φ_k; batch of D_i) over the clients
   i that used it this round (itself and every client that sampled it; client i
   computes and sends its term g_ki): a model is trained by how much the *others* use
   it (w_ik, not w_ki).

Client i predicts with the mixture Σ_j w_ij p(y | x; φ_j).

Readings of an ambiguous text, each a named choice (measured at CPU scale both ways
with ``benchmarks/federico_readings.py``; numbers in docs/methods/federico.md):

* ``estep_loss``: eq. 3 sums the loss over D_i (``sum``); ``mean`` is the per-sample
  mean. The text gives no temperature for the softmax. Default ``mean``: the summed
  loss of models that differ by a fraction of a nat per sample differs by tens to
  hundreds of nats, so the first table already makes every row one-hot on whichever
  random model scored best, and it stays locked there, whereas Sec. 3.3 says a model
  slightly better at the start is *likely* (not surely) sampled more often, and Figs.
  5b/7 show EMA weights that are spread and move more smoothly with a smaller β — which
  the mean loss gives at CPU scale and the sum does not. Fig. 3 (group-mates mix, a
  lone client uses only itself) holds under neither: with the mean a lone client keeps
  about a third of its weight on itself, with the sum none.
* ``mstep``: eq. 6 and the practical M-step send g_ij = w_ji Σ_{s∈D_j} ∇ℓ, a gradient
  over all of D_j: ``full`` is one step per round on eq. 4's (1/n) Σ_i w_ik Σ_{s∈D_i} ℓ
  (coefficient c_ik = w_ik n_i / n on the mean over all of D_i); ``step`` the same from
  one mini-batch per client (unbiased); ``epoch`` the owner's local epoch(s) of such
  steps, each on one mini-batch of every user with c_ik = w_ik on its batch mean.
  Default ``epoch``: the text speaks of "small gradient steps" (plural) "in lieu of
  full optimization", and Fig. 6b says M = 0 "is similar to Local Training": with
  ``epoch`` and M = 0 (w_kk = 1) model k takes exactly Local's steps on Local's batches
  (the owner's stream has Local's purpose, ``local``), so the run equals Local bit for
  bit on the per-client loop path (tested); ``step``/``full`` take one step per round
  of size ∝ n_k / n there.
* ``table_start``: the text does not say how the table starts. ``all_to_all`` (default)
  evaluates every model on every client once before round 1; ``uniform`` knows only
  the client's own loss (no model travels): an unknown entry (NaN in the table) enters
  the softmax as the mean of its row's known entries, so the weights start exactly
  uniform and an unsampled model keeps a neutral share; the first refresh of an entry
  sets it to ℓ_ij (EMA) or (t + 1) ℓ_ij in round t (accumulative, the scale of the
  row's sums). The mixture may then use a model the client has not received yet (a
  simulation shortcut; prediction traffic is not counted either way).

* ``warmup_rounds``: the text leaves local epochs, initialisation and any warm-up
  unstated (its "additional experiment details", Appendix D, is missing from our
  copy). With W warm-up rounds each model first takes W rounds of its owner's local
  steps (weights one-hot on the client itself, nothing sampled or sent), then the
  table starts (``table_start``) and the algorithm runs as written. Default 1: without
  a warm-up the first table compares untrained models, so round 1's M-step trains
  every model on whichever clients sampled it, and from then on a client's weights
  follow whom it sampled, not whose data resembles its own — the lock-in Sec. 3.3
  describes for a model "slightly better at the start". The paper's described
  behaviour is the other one: Fig. 3's block structure (group-mates mix, a lone client
  uses only itself), footnote 4's "most of the client weights are 0 after a few
  rounds", weights that still move with β (Fig. 7). One warm-up round gives Fig. 3's
  structure and footnote 4's zeros at CPU scale (Fig. 7's movement only faintly:
  group-mates' models are about equally good), and more rounds add nothing but delay
  (measurements: docs/methods/federico.md#warmup_rounds); 0 starts without a warm-up.
* ``ema_start``: the EMA L̂^(t) = (1 − β) L̂^(t−1) + β ℓ^(t) is given without L̂ before
  the first loss. ``first`` (default): an entry starts at its first loss (the table's
  start holds the losses themselves, whatever β); ``zero``: L̂ = 0 before any loss, so
  the first one enters as β ℓ (the textbook EMA start; the accumulative sum also
  starts empty) and a small β starts with spread weights that sharpen over rounds.
  Default ``first``: measured against the fifteen behaviours the readings script
  checks (Figs. 3, 5b, 6a-c, 7, footnote 4, Table 1), it gives fourteen, the most of
  any reading, Fig. 7's among them (a bigger β moves the weights more in the first
  rounds after the table starts, a smaller one more smoothly, the final weights
  alike); ``zero`` makes β 0.1 as unsmooth as 0.9 over the rounds (its weights keep
  sharpening), against Fig. 7. With the warm-up the first table already separates
  the groups, so β moves the weights among group-mates, whose models predict alike:
  Fig. 6c's slower accuracy with a small β shows only in readings that lose Fig. 3
  or Fig. 7 (no warm-up, or a uniform table from zero).

Other choices where the paper is silent (documented in config.yaml): with M = 0 no
client ever receives another's model, so the table holds only the client's own loss
(others +∞, weight 0) and its weights are one-hot on itself (local training, the
paper's reading of M = 0); each client initialises its own model (decentralised;
identical models would make the first weights uniform and the first greedy choices
arbitrary); the M-step's gradient terms of the users are summed in the order of the
clients.

Training path: the M-step trains every model k in one
:meth:`pflrepro.training.engine.Engine.train` call with the objective
:class:`PeerWeighted`: per model, one stream per user i that used
it (sorted), seeded by i and drawn from D_i (:class:`~pflrepro.training.objective.Stream` with
``client=i``: the owner's with purpose ``local``, another user's with
``federico_mstep_<k>``; with ``mstep: full`` a ``whole`` stream, D_i in stored order),
coefficient c_ik; the call's own batches go unused. On the per-client loop (the CPU)
each step's loss sums the users' terms in the order of the clients; on CUDA the models
train in one vectorised pass, a client with fewer users padded with empty streams
(coefficient 0).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch
from torch import nn

from pflrepro.algorithms.base import Algorithm, ClientModels, register_algorithm
from pflrepro.algorithms.registry import hyper
from pflrepro.seeding import numpy_generator
from pflrepro.store.results import WEIGHT, MetricLog
from pflrepro.training.objective import (
    Aux,
    Batch,
    Objective,
    Stream,
    masked_ce,
    per_client_field,
)
from pflrepro.training.optim import Params
from pflrepro.training.params import take


@dataclasses.dataclass(frozen=True)
class PeerWeighted(Objective):
    """``Σ_u coef_u · mean ℓ(batch of stream u)``: one model trained on several clients' data.

    ``users``: a trained client's streams (each usually with ``client`` set: a batch of
    that user's training rows, drawn and seeded by the user); ``coef``: the weight of
    each stream's batch-mean cross-entropy, float64, zero beyond the client's streams.
    Per client (``per_client``, the default): a tuple of such stream tuples and a (C, U)
    matrix. The training call's own batch is not used; a client with no stream takes a
    zero gradient. The reported loss is Σ_u coef_u ℓ_u (float64). FedeRiCo's M-step
    (Sui et al. 2022, eq. 4-6): model k on the batches of every client i that used it,
    coefficient w_ik.
    """

    users: tuple[Stream, ...] | tuple[tuple[Stream, ...], ...] = per_client_field()
    coef: torch.Tensor = per_client_field()
    per_client: bool = True

    def __post_init__(self) -> None:
        rows = self.users if self.per_client else (self.users,)
        coef = self.coef if self.per_client else self.coef.unsqueeze(0)
        if coef.dim() != 2 or coef.shape[0] != len(rows):
            raise ValueError(f"coef must be ({len(rows)}, U), got {tuple(self.coef.shape)}")
        widest = max((len(u) for u in rows), default=0)
        if coef.shape[1] < widest:
            raise ValueError(f"coef has {coef.shape[1]} columns for {widest} streams")

    @property
    def streams(self) -> tuple[Stream, ...]:  # type: ignore[override]
        """The streams of the one trained client (a row or a shared objective)."""
        if self.per_client:
            raise TypeError("a per-client PeerWeighted has streams per client: "
                            "client_streams(i)")
        return self.users  # type: ignore[return-value]

    def loss(self, model: nn.Module, params: Params, batch: Batch, extra: list[Batch],
             state: object) -> tuple[torch.Tensor, Aux]:
        """A forward per stream (padded slots carry mask 0), weighted and summed."""
        first = next(iter(params.values()))
        coef = self.coef.to(first.device)
        total = torch.zeros((), dtype=first.dtype, device=first.device)
        reported = torch.zeros((), dtype=torch.float64, device=first.device)
        for u, b in enumerate(extra):
            ce = masked_ce(model, params, b)
            total = total + coef[u].to(first.dtype) * ce
            reported = reported + coef[u] * ce.detach().to(torch.float64)
        return total, {"loss": reported}


class FedeRiCoState(ClientModels):
    """Each client's model and optimiser state (stacked), and the E-step's tables."""

    last: torch.Tensor  #: the latest loss ℓ_ij of model j on client i (K, K)
    table: torch.Tensor  #: the tracked losses L̂_ij (K, K): NaN where unknown
    weights: torch.Tensor  #: w_ij = softmax_j(−L̂_ij) (K, K)


@dataclasses.dataclass(frozen=True)
class FedeRiCoHyper:
    """Hyperparameters of FedeRiCo (paper defaults; readings of the text as choices)."""

    neighbors: int = hyper(3, "M: neighbours each client samples per round.", minimum=0)
    epsilon: float = hyper(0.3, "ε of ε-greedy sampling (1 = uniform).", minimum=0.0,
                           maximum=1.0)
    beta: float = hyper(0.6, "β: momentum of the EMA loss tracking.", minimum=0.0, maximum=1.0)
    loss_tracking: str = hyper("ema", "'ema' (paper default) or 'accumulative' (Fig. 5a).",
                               choices=("ema", "accumulative"))
    estep_loss: str = hyper("mean", "ℓ_ij of the E-step: the per-sample 'mean' cross-entropy "
                            "of φ_j on client i's training data (default: weights that "
                            "follow the paper's prose and figures, see the module "
                            "docstring) or its 'sum' over the samples (eq. 3 literally; "
                            "one-hot weights from the first table on).",
                            choices=("sum", "mean"))
    mstep: str = hyper("epoch", "M-step of model k per round: 'epoch' = the owner's local "
                       "epoch of steps, each on one mini-batch of every client i that used "
                       "φ_k, its batch mean weighted by w_ik (default: 'small gradient "
                       "steps', and M = 0 is Local bit for bit); 'step' = one step on eq. "
                       "4's (1/n) Σ_i w_ik Σ_{s∈D_i} ℓ from one mini-batch per client; "
                       "'full' = one step on the same objective over all of every D_i "
                       "(eq. 6 literally).", choices=("full", "step", "epoch"))
    table_start: str = hyper("all_to_all", "Loss table before round 1: 'all_to_all' = one "
                             "evaluation of every model on every client; 'uniform' = "
                             "only the own loss known, an unknown entry enters the "
                             "softmax as the mean of its row's known entries (uniform "
                             "weights at the start) until the model is first sampled.",
                             choices=("all_to_all", "uniform"))
    warmup_rounds: int = hyper(1, "Rounds 1..W in which each model trains on its owner's "
                               "data only (Local's steps, weights one-hot on the client "
                               "itself, no sampling); the loss table then starts as "
                               "table_start says and the algorithm runs as usual. 0: the "
                               "table starts before round 1. Default 1 (unstated in the "
                               "paper): weights that follow the clients' distributions "
                               "(Fig. 3, footnote 4) instead of whom they sampled first, "
                               "see the module docstring.", minimum=0)
    ema_start: str = hyper("first", "What the EMA table starts from (loss_tracking 'ema'): "
                           "'first' = an entry's first observed loss ℓ_ij as is; 'zero' = "
                           "L̂_ij = 0 before any observation, so the first one enters as "
                           "β ℓ_ij (the textbook EMA start; an unknown entry is 0, not "
                           "NaN). See the module docstring.", choices=("first", "zero"))


@register_algorithm
class FedeRiCo(Algorithm[FedeRiCoState]):
    """Decentralised EM with ε-greedy neighbour sampling; see the module docstring."""

    name = "federico"
    summary = "FedeRiCo (Sui et al. 2022): decentralised EM over client models."
    Hyper = FedeRiCoHyper
    records = (WEIGHT,)

    # ------------------------------------------------------------------ state
    def init(self) -> FedeRiCoState:
        """Own model per client; the loss table of :meth:`start_table` at round 0."""
        e = self.engine
        start = e.client_init()
        unknown = torch.full((e.num_clients, e.num_clients), float("nan"), dtype=torch.float64)
        state: FedeRiCoState = {"params": start["params"], "opt": start["opt"],
                                "last": unknown, "table": unknown, "weights": unknown}
        self.start_table(state, 0)  # sets the three tables
        return state

    @property
    def warmup(self) -> int:
        """Rounds of owner-only training before the first table (0 without neighbours)."""
        return self.hp.warmup_rounds if self.hp.neighbors > 0 else 0

    @property
    def zero_start(self) -> bool:
        """Whether the EMA table starts from L̂ = 0 (``ema_start: zero``, EMA tracking)."""
        return self.hp.loss_tracking == "ema" and self.hp.ema_start == "zero"

    def start_table(self, state: FedeRiCoState, rnd: int) -> None:
        """The loss table at the end of round ``rnd`` (0: before round 1): own or all-to-all.

        During the warm-up (``rnd`` < :attr:`warmup`) and with M = 0 no other model has
        arrived: those entries are +∞ (weight 0), so the weights are one-hot on the
        client itself. At the end of the warm-up (or at round 0 without one) the table
        starts as ``table_start`` says: every model on every client (``all_to_all``) or
        the own loss only, the others NaN (unknown) until sampled (``uniform``). With
        ``ema_start: zero`` the EMA starts from L̂ = 0: the start's losses enter as β ℓ
        and an unknown entry is 0.
        """
        e = self.engine
        k_all = e.num_clients
        solo = self.hp.neighbors == 0 or rnd < self.warmup
        reach = ([list(range(k_all))] * k_all
                 if not solo and self.hp.table_start == "all_to_all"
                 else [[i] for i in range(k_all)])
        losses = self._losses(state, reach)
        self.count_traffic(reach, gradients=False)  # the table (nothing for own only)
        if solo:
            losses = torch.where(torch.isnan(losses), torch.full_like(losses, float("inf")),
                                 losses)
        state["last"] = losses
        table = losses.clone()
        if self.zero_start and not solo:
            table = torch.where(torch.isnan(losses), torch.zeros_like(losses),
                                self.hp.beta * losses)
        state["table"] = table
        state["weights"] = self.posterior(state["table"])

    @staticmethod
    def posterior(table: torch.Tensor) -> torch.Tensor:
        """w_i = softmax_j(−L̂_ij); an unknown (NaN) entry counts as its row's known mean."""
        known = ~torch.isnan(table)
        fill = torch.nanmean(table, dim=1, keepdim=True).expand_as(table)
        return torch.softmax(-torch.where(known, table, fill), dim=1)

    def pair_loss(self, params: dict[str, torch.Tensor], client: int) -> float:
        """ℓ of ``params`` on ``client``'s training data: summed (eq. 3) or mean."""
        e = self.engine
        mean = e.mean_loss(params, client, "train")
        return mean * e.n_train(client) if self.hp.estep_loss == "sum" else mean

    def _losses(self, state: FedeRiCoState, pairs: list[list[int]]) -> torch.Tensor:
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

    def track(self, state: FedeRiCoState, fresh: torch.Tensor, rnd: int) -> None:
        """Fold the refreshed losses ``fresh`` (NaN = not refreshed) into the table.

        EMA: L̂ ← (1 − β) L̂ + β ℓ on refreshed entries. Accumulative: every known entry
        adds its latest ℓ. An entry seen for the first time (``table_start: uniform``)
        starts at ℓ (EMA) or (rnd − W + 1) ℓ, W the warm-up rounds (accumulative: as if
        that loss had held since the table's start, so it is on the scale of the row's
        other sums).
        """
        seen = ~torch.isnan(fresh)
        known = ~torch.isnan(state["table"])
        first = seen & ~known
        state["last"] = torch.where(seen, fresh, state["last"])
        table = state["table"]
        if self.hp.loss_tracking == "ema":
            b = self.hp.beta
            table = torch.where(seen & known, (1 - b) * table + b * fresh, table)
            table = torch.where(first, fresh, table)
        else:
            table = torch.where(known, table + state["last"], table)
            table = torch.where(first, (rnd - self.warmup + 1) * fresh, table)
        state["table"] = table
        state["weights"] = self.posterior(table)

    def mstep_objective(self, used: list[list[int]], rnd: int, w: torch.Tensor
                        ) -> tuple[int | None, PeerWeighted]:
        """Steps of each model's M-step (None: its owner's epoch) and its objective.

        Model k trains on one stream per user i that used it (sorted), coefficient
        c_ik: ``epoch``: the owner's local steps, batches of size B, c_ik = w_ik on the
        batch mean; ``step`` / ``full``: one step, one mini-batch / all of D_i in stored
        order, c_ik = w_ik n_i / n on the mean (eq. 4's (1/n) Σ_i w_ik Σ_{s∈D_i}; unbiased
        for ``step``). The owner's batches are Local's stream (purpose ``local``),
        another user's its own (seeded by i, purpose ``federico_mstep_<k>``).
        """
        e = self.engine
        k_all = e.num_clients
        mode = self.hp.mstep
        n_all = float(sum(e.n_train(i) for i in range(k_all)))
        streams: list[tuple[Stream, ...]] = []
        coef = torch.zeros(k_all, k_all, dtype=torch.float64)
        for k in range(k_all):
            users = [i for i in range(k_all) if k in used[i]]
            streams.append(tuple(Stream("local" if i == k else f"federico_mstep_{k}",
                                        client=i, whole=mode == "full") for i in users))
            for u, i in enumerate(users):
                scale = 1.0 if mode == "epoch" else e.n_train(i) / n_all
                coef[k, u] = float(w[i, k]) * scale
        return (None if mode == "epoch" else 1), PeerWeighted(tuple(streams), coef)

    def round(self, state: FedeRiCoState, rnd: int) -> tuple[FedeRiCoState, np.ndarray]:
        """ε-greedy sampling, E-step on the refreshed losses, weighted M-step.

        A warm-up round samples no one: each model takes its owner's local steps (w_ii
        = 1, Local's round); the last one ends with the table's start.
        """
        e = self.engine
        k_all = e.num_clients
        nbrs = ([[] for _ in range(k_all)] if rnd <= self.warmup
                else self.neighbours(state["weights"], rnd))
        used = [sorted([i, *nbrs[i]]) for i in range(k_all)]
        self.track(state, self._losses(state, used), rnd)
        steps, objective = self.mstep_objective(used, rnd, state["weights"].to(torch.float32))
        # the call's own batches go unused: each model's data, its owner's too, are streams
        state["params"], state["opt"], losses = e.train(
            state["params"], state["opt"], list(range(k_all)), rnd, steps=steps,
            objective=objective)
        self.count_traffic(nbrs)
        if rnd == self.warmup:
            self.start_table(state, rnd)
        return state, losses

    def count_traffic(self, reach: list[list[int]], gradients: bool = True) -> None:
        """Peer traffic of a round in which client i received the models of ``reach[i]``.

        Each model j → i is P scalars up for j and down for i; with ``gradients``
        (the M-step) i sends back w_ij and its weighted gradient on φ_j (P + 1), once
        per M-step of φ_j (one with ``mstep: step`` or ``full``, the owner's local steps
        with ``epoch``). The mixture a client predicts with (every φ_j with w_ij > 0) is
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
                    steps = e.steps_per_round(j) if self.hp.mstep == "epoch" else 1
                    e.traffic.send_up(i, steps * (p + 1))
                    e.traffic.send_down(j, steps * (p + 1))

    # ------------------------------------------------------------------ predict
    def predict(self, state: FedeRiCoState, client: int, x: torch.Tensor, rnd: int
                ) -> torch.Tensor:
        """Mixture Σ_j w_ij p(y | x; φ_j)."""
        e = self.engine
        w = state["weights"][client].to(torch.float32)
        out = torch.zeros(len(x), e.data.num_classes, device=e.device)
        for j in range(e.num_clients):
            out += float(w[j]) * e.probs(take(state["params"], j), x)
        return out

    def record(self, state: FedeRiCoState, rnd: int, log: MetricLog) -> None:
        """Log the client weights w_ij (client i, peer j)."""
        log.add_matrix(rnd, WEIGHT, state["weights"].numpy())
