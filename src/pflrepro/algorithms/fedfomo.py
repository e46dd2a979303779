"""FedFomo: first-order model optimisation, each client mixing in the models that help it.

Zhang, Sapra, Fidler, Yeung, Alvarez, "Personalized Federated Learning with First
Order Model Optimization", ICLR 2021. Each client i keeps its own model θ_i and holds
out part of its training data as a validation set. It also keeps φ_i, its model as it
stood before its last local training (the result of its last update). One round
(synchronous, every client at once, from the models as they stood at the start of the
round):

1. client i downloads the models of ``downloads`` other clients (all others by
   default; fewer: ε-greedy by its affinity vector P_i); its candidates are these and
   its own current (trained) model θ_i;
2. on its validation set it scores each candidate c against φ_i by
   s_ic = (L_i(φ_i) − L_i(θ_c)) / ‖θ_c − φ_i‖_1, sets w_ic = max(0, s_ic) normalised
   by their sum (no positive score: all w_ic = 0) and updates
   θ_i ← φ_i + Σ_c w_ic (θ_c − φ_i), which becomes the new φ_i;
3. it adds the round's weights to its affinities (P_ic += w_ic) and runs its local
   training steps on the rest of its training data.

Client i predicts with its own model. As the new θ_i is a convex combination of the
candidates, the client's own training of the last round keeps the weight w_ii; if no
candidate, its own trained model included, beats φ_i on the validation set, the client
goes back to φ_i.

What the official code (NVlabs/FedFomo, run as in its README: ``--federation_method
fomo --baseline_model first_model``, default ``--model_delta_norm l1``) does, and where:

* candidates: ``Client.get_federating_clients`` (client.py) starts the list with the
  client itself, then adds the ε-greedy choice among the others; the client's entry is
  its current model ``client.model``, the one trained last round;
* reference φ_i: ``Client.save_first_model`` (client.py), called after each federated
  update and at the start of ``GlobalServer.local_train`` (server.py), i.e. the model
  before the last local training; ``Federation.eval_client_requested_models`` and
  ``Federation.federate`` (federation.py) use it as the baseline of the scores and as
  the point the update starts from (``baseline_model == 'first_model'``);
* scores: ``compute_fomo_weights`` (federation.py) divides the validation-loss
  differences by ``compute_parameter_difference(norm=args.model_delta_norm)``
  (federated/utils.py), whose default ``l1`` is Σ|θ_c − φ_i| over all trainable
  parameters; its other choices are ``l2`` (the *squared* Euclidean distance) and
  ``l2_root`` (the sum of the per-tensor Euclidean norms);
* weights: ``Federation.update_client_weights`` keeps the positive scores and divides
  them by their sum; with none positive the client's models become [φ_i] with weight 1,
  so ``Federation.federate`` returns φ_i;
* every client starts from the one global model (``GlobalServer.__init__``, server.py),
  and the first round (its epoch 0) only trains. Here every client starts from one
  model drawn from the run's seed (``init: shared``), so round 1's scores are all 0/0
  and round 1 is local training too; round t here is the official epoch t − 1, and
  ε_t = max(0, ε − (t − 1)·``epsilon_decay``) equals the official ε − epoch·decay.

Named options for the other readings: ``reference: current`` scores the
downloads against the client's current θ_i and moves from it (the client's own model is
then not a candidate: its score would be 0/0; the official ``--baseline_model current``
behaves the same), so a positive score for any download discards the client's last
training; ``distance: l2`` is the Euclidean norm over all parameters (none of the
official choices); ``init: independent`` draws a model per client.

Other choices where the paper is silent or the brief fixes them:
the validation split (``val_fraction`` 0.2, as in FedeRiCo's comparison) is one
seeded permutation from (seed, setup round, client, ``fedfomo_val``) of
round(f·n) samples (half up); a client left without a validation or training sample
raises. Local epochs count batches of the remaining samples only.
L_i is the mean cross-entropy on the validation set (official: mean of the batch means,
batches of 50) and 0/0 := 0. The ε-greedy choice follows the official code
(``Client.get_federating_clients``): slot by slot, with probability ε_t the next client
of a random order, else the next one by descending P_ij (ties broken at random),
skipping clients already chosen; official defaults ε = 0.3, decay 0.05. ``affinity``
``clipped`` adds the normalised weights to P (the brief); ``signed`` adds the unclipped
scores divided by |Σ_c s_ic| (the client's own score included), as the official code
does, so that harmful models fall below untried ones (P_ii is updated too but never
used: a client does not download itself). Clients keep their optimiser state across
rounds (the official code resets it at every update).

Client sampling (``training.client_fraction`` < 1, PerFed-CKT's Table 1): only
the round's participants (``engine.participants``) download, mix, train and upload;
the server holds every client's last uploaded model, so a participant's downloads are
chosen among all other clients as above (a client never sampled yet still offers its
initial model). The others keep their models, φ, affinities and optimiser states,
and their row of the round's weights is zero.

Deviations from the official code kept on purpose: it also adds to every client's
candidates the averages of ``-nf`` sub-federations (spectral clustering of the
symmetrised affinities) and their global average (``GlobalServer.update_server_models``,
its "hierarchical FedFomo" extension), which we leave out: each client mixes client
models only; and it resets the optimiser at every update (see above).
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, TypedDict

import numpy as np
import torch
import torch.nn.functional as F

from pflrepro.algorithms.base import Algorithm, ClientModels, register_algorithm
from pflrepro.algorithms.registry import hyper
from pflrepro.seeding import SETUP_ROUND, numpy_generator, torch_generator
from pflrepro.store.results import WEIGHT, MetricLog
from pflrepro.training.optim import Params
from pflrepro.training.params import put, put_rows, rows, take

if TYPE_CHECKING:  # the engine imports algorithms.base: no runtime import
    from pflrepro.training.engine import Engine


class FedFomoReference(TypedDict, total=False):
    """The key with ``reference: previous`` only (a class of its own: optional keys)."""

    previous: Params  #: φ_i, stacked by client


class FedFomoState(ClientModels, FedFomoReference):
    """Each client's model and optimiser state (stacked), φ, the affinities, the weights."""

    affinity: torch.Tensor  #: the download affinities P (K, K), float64
    weights: torch.Tensor  #: the last round's weights w_ij (K, K), float64


@dataclasses.dataclass(frozen=True)
class FedFomoHyper:
    """Hyperparameters of FedFomo (defaults: FedeRiCo's comparison and the official code)."""

    val_fraction: float = hyper(0.2, "Fraction of each client's training data held out to "
                                "score downloaded models (0 < f < 1).", minimum=0.0, maximum=1.0)
    downloads: int = hyper(-1, "Models each client downloads per round (-1: all K-1 others).",
                           minimum=-1)
    epsilon: float = hyper(0.3, "ε of the ε-greedy download choice (used when downloads < K-1).",
                           minimum=0.0, maximum=1.0)
    epsilon_decay: float = hyper(0.05, "ε decreases by this much every round (official code).",
                                 minimum=0.0)
    affinity: str = hyper("clipped", "Affinity update: 'clipped' adds the normalised weights, "
                          "'signed' the unclipped scores / |their sum| (official code).",
                          choices=("clipped", "signed"))
    reference: str = hyper("previous", "Model φ_i the candidates are scored against and the "
                           "update starts from: 'previous' = the client's model before its "
                           "last local training, its trained model being a candidate too "
                           "(official code, baseline 'first_model'); 'current' = its trained "
                           "model, downloads only (a positive download discards the "
                           "client's last training).",
                           choices=("previous", "current"))
    distance: str = hyper("l1", "Parameter distance dividing the loss gains: 'l1' = Σ|θ_c − φ_i| "
                          "(official default); 'l2' = Euclidean norm (no official choice).",
                          choices=("l1", "l2"))
    init: str = hyper("shared", "'shared': every client starts from one seeded model (official "
                      "code); 'independent': each client draws its own.",
                      choices=("shared", "independent"))

    def __post_init__(self) -> None:
        if not 0.0 < self.val_fraction < 1.0:
            raise ValueError(f"algorithm 'fedfomo': val_fraction must lie strictly between "
                             f"0 and 1, got {self.val_fraction}")
        if self.downloads == 0:
            raise ValueError("algorithm 'fedfomo': downloads must be >= 1 or -1 (all others)")


def param_distance(a: Params, b: Params, distance: str = "l1") -> float:
    """‖a − b‖ over all parameters: ``l1`` Σ|a − b|, ``l2`` √Σ(a − b)² (float64)."""
    if distance == "l1":
        return sum(float((a[k] - b[k]).double().abs().sum()) for k in b)
    if distance == "l2":
        return math.sqrt(sum(float(((a[k] - b[k]).double() ** 2).sum()) for k in b))
    raise ValueError(f"unknown distance {distance!r}")


def fomo_scores(ref_loss: float, ref: Params, losses: dict[int, float],
                models: dict[int, Params], distance: str = "l1") -> dict[int, float]:
    """Unclipped scores (L_i(φ_i) − L_i(θ_c)) / ‖θ_c − φ_i‖ of each candidate c (0/0 := 0).

    ``ref`` is the model φ_i the candidates are compared with, ``ref_loss`` its loss.
    """
    out = {}
    for c, loss in losses.items():
        dist = param_distance(models[c], ref, distance)
        out[c] = (ref_loss - loss) / dist if dist > 0 else 0.0
    return out


def normalise(scores: dict[int, float]) -> dict[int, float]:
    """max(0, score) divided by the sum of the positive parts (all zero when none is > 0)."""
    pos = {j: max(0.0, s) for j, s in scores.items()}
    total = sum(pos.values())
    return {j: (v / total if total > 0 else 0.0) for j, v in pos.items()}


def fomo_update(ref: Params, models: dict[int, Params], weights: dict[int, float]) -> Params:
    """φ_i + Σ_c w_ic (θ_c − φ_i) (a copy; ``ref`` is φ_i)."""
    out = {k: v.clone() for k, v in ref.items()}
    for c, w in weights.items():
        if w != 0.0:
            for k in out:
                out[k] += w * (models[c][k] - ref[k])
    return out


@register_algorithm
class FedFomo(Algorithm[FedFomoState]):
    """Per-client models updated by validation-scored first-order model mixing."""

    name = "fedfomo"
    display_name = "FedFomo"
    summary = "FedFomo (Zhang et al. 2021): clients mix in models that lower their val loss."
    Hyper = FedFomoHyper
    records = (WEIGHT,)
    client_sampling = True

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
                                 f"validation or training part (it needs at least "
                                 f"3 training samples at 0.2: raise the partition's "
                                 f"min_samples, e.g. to 5, or val_fraction)")
            order = torch.randperm(n, generator=torch_generator(engine.seed, SETUP_ROUND, k,
                                                                "fedfomo_val"))
            self.val.append(idx[order[:n_val].to(idx.device)].sort().values)
            self.fit.append(idx[order[n_val:].to(idx.device)].sort().values)

    # ------------------------------------------------------------------ state
    def init(self) -> FedFomoState:
        """Models, optimisers, φ (``reference: previous``), zero affinities and weights.

        Every client starts from one model (``init: independent``: one each); φ starts
        as that model.
        """
        e = self.engine
        start = e.client_init(shared=self.hp.init == "shared")
        k_all = e.num_clients
        state: FedFomoState = {"params": start["params"], "opt": start["opt"],
                               "affinity": torch.zeros(k_all, k_all, dtype=torch.float64),
                               "weights": torch.zeros(k_all, k_all, dtype=torch.float64)}
        if self.hp.reference == "previous":
            state["previous"] = {k: v.clone() for k, v in start["params"].items()}
        return state

    # ------------------------------------------------------------------ pieces
    def val_loss(self, params: Params, client: int) -> float:
        """Mean cross-entropy of ``params`` on ``client``'s validation set."""
        e = self.engine
        idx = self.val[client]
        return float(F.cross_entropy(e.logits(params, e.data.x[idx]), e.data.y[idx]))

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
    def round(self, state: FedFomoState, rnd: int) -> tuple[FedFomoState, np.ndarray]:
        """Participants score the candidates on their validation set, mix, train."""
        e = self.engine
        k_all = e.num_clients
        chosen = e.participants(rnd)
        # the models as they stand at the round's start: read, never written, until the
        # trained models replace them after every participant has mixed
        old = state["params"]
        previous = self.hp.reference == "previous"
        received = self.downloads(state["affinity"], rnd)
        weights = torch.zeros(k_all, k_all, dtype=torch.float64)
        # the participants' mixed models, one row each in the order of ``chosen``
        slot = {k: n for n, k in enumerate(chosen)}
        mixed_all = {name: v.new_empty((len(chosen), *v.shape[1:])) for name, v in old.items()}

        def client(i: int) -> None:
            own = take(old, i)
            ref = take(state["previous"], i) if previous else own
            models = {j: take(old, j) for j in received[i]}
            if previous:
                models[i] = own  # the client's own trained model is a candidate
            scores = fomo_scores(self.val_loss(ref, i), ref,
                                 {c: self.val_loss(models[c], i) for c in models}, models,
                                 self.hp.distance)
            w = normalise(scores)
            for c, value in w.items():
                weights[i, c] = value
            if self.hp.affinity == "clipped":
                state["affinity"][i] += weights[i]
            else:
                total = abs(sum(scores.values()))
                for c, s in scores.items():
                    state["affinity"][i, c] += s / total if total > 0 else 0.0
            mixed = fomo_update(ref, models, w)
            if previous:
                put(state["previous"], i, mixed)
            put(mixed_all, slot[i], mixed)

        e.threads.run_clients(client, chosen)
        # local training from the mixed models, on each client's non-validation part
        params, opt, trained = e.train(mixed_all, rows(state["opt"], chosen),
                                       chosen, rnd, pools=[self.fit[k] for k in chosen])
        put_rows(state["params"], chosen, params)
        put_rows(state["opt"], chosen, opt)
        state["weights"] = weights
        # up: the client's trained model to the server; down: the models it received
        e.traffic.send_up(chosen, e.model_size)
        for i in chosen:
            e.traffic.send_down(i, len(received[i]) * e.model_size)
        losses = np.full(k_all, np.nan)
        losses[chosen] = trained
        return state, losses

    # ------------------------------------------------------------------ predict
    def predict(self, state: FedFomoState, client: int, x: torch.Tensor, rnd: int
                ) -> torch.Tensor:
        """Client ``client`` predicts with its own model."""
        return self.engine.probs(take(state["params"], client), x)

    def record(self, state: FedFomoState, rnd: int, log: MetricLog) -> None:
        """Log the round's normalised weights w_ij (client i, candidate j; 0 otherwise).

        w_ii is the weight of the client's own trained model (``reference: previous``).
        """
        log.add_matrix(rnd, WEIGHT, state["weights"].numpy())
