"""FedAMP: federated attentive message passing between personalised models.

Huang, Chu, Zhou, Wang, Liu, Pei, Zhang, "Personalized Cross-Silo Federated Learning
on Non-IID Data", AAAI 2021 (arXiv:2007.03797). It minimises
Σ_i F_i(w_i) + λ Σ_{i<j} A(‖w_i − w_j‖²) with A(x) = 1 − e^{−x/σ}, alternating:

1. *Server* (eq. 5): a personalised cloud model u_i = Σ_j ξ_ij w_j per client, with
   ξ_ij = α · A′(‖w_i − w_j‖²) for j ≠ i, A′(x) = e^{−x/σ}/σ, and ξ_ii = 1 − Σ_{j≠i} ξ_ij;
   ‖·‖ is the Euclidean norm over *all* parameters, flattened.
2. *Client* (eq. 6): w_i ← argmin_w F_i(w) + λ/(2α) ‖w − u_i‖², solved approximately
   by the engine's local steps with the proximal gradient (λ/α)(w − u_i) added to
   every step's data gradient (the term must act: one public implementation detaches
   it, which silently turns it off; the tests check it acts).

Client i predicts with its own w_i.

Choices where the paper is silent (the text gives no hyperparameter values):

* every client starts from *one shared model* (``init: shared``, drawn from the run's
  seed as FedAvg's global model), as the reference implementations do (each PFLlib
  client copies one ``args.model``). ``init: independent`` gives each client a model of
  its own: two independent draws of the 784-200-200 MLP are
  ‖w_i − w_j‖² ≈ 270–300 apart and of the CIFAR CNN ≈ 470, so any σ small enough to
  tell groups apart later leaves every peer weight ≈ 0 at the start (ξ ≈ I) and
  FedAMP is local training in disguise;
* ``distance: mean`` (default) measures x_ij = ‖w_i − w_j‖²/P, the mean squared
  distance *per parameter* (P parameters), so that σ means the same for a 2-layer
  MLP and a CNN. Since ξ_ij = α e^{−x/σ}/σ, this is eq. 5 exactly with the paper's
  (λ, σ, α) = P · (λ, σ, α) of the config (the client's coefficient λ/α is unchanged);
  ``distance: sum`` is the paper's printed form with ‖w_i − w_j‖²;
* defaults σ = 1e-5, α = 1e-7 and λ = 1e-7: σ is the per-parameter squared distance
  that local training puts between clients of different groups from a shared start
  on the CPU-scale design (measured:
  docs/methods/fedamp.md#the-cpu-scale-grids-and-their-cost);
  α/σ = 0.01 keeps ξ_ii ≥ 0 at any distances for up to 101 clients (each peer weighs
  1 % at zero distance); λ = α makes the proximal coefficient λ/α = 1, as the
  reference code's λ = α_K = 1. ``config.yaml``'s FedAMP experiments do not use these
  defaults: they select σ, α (as α/σ) and λ/α on validation (their ``tune:`` blocks);
* the client's local optimisation *starts from u_i* (the common choice; the exact
  minimiser does not depend on the start) and runs the engine's usual local steps;
  clients keep their own optimiser state across rounds, as in FedAvg here;
* α and σ are separate knobs, as eq. 5 writes them. Tuning (:mod:`pflrepro.tuning`)
  reads α as ``alpha_ratio`` = α/σ = α·A′(0), the weight of a peer at zero distance,
  on a grid of its own, and λ = prox · α (:meth:`FedAMP.tied_values`). The *tied
  reading* α = σ/K (``alpha_ratio`` 1/K, one point of the grids) caps every peer
  weight at 1/K: a block ξ over a group of g clients (1/g each, g < K) cannot be
  expressed at any σ, and ξ can only go from ≈ I (σ ≪ distances) to ≈ flat (σ ≫
  distances). α/σ up to 1 lets a group's members weigh up to e^{−x/σ} each;
* ``step: capped`` (default): α_k = min(α, 1 / max_i Σ_{j≠i} A′(x_ij)), the largest
  step ≤ α that keeps every ξ_ii ≥ 0, so u_i is the convex combination of the messages
  that the paper says it is (its α_k is indexed by the iteration and unstated; its
  convergence results assume it small). With α ≤ σ/(K − 1) the cap never binds (the
  tied reading runs at α every round). The client step's coefficient is eq. 6's
  λ/α_k with the round's α_k. With the shared start every distance is 0 at round 1:
  the cap is σ/(K − 1), ξ_ii = 0, and u_i = w_i (all models are the same);
* ``step: fixed``: α_k = ``alpha`` every round, and ξ_ii < 0 (α too large for σ at the
  current distances) raises ValueError — a negative self weight makes u_i an
  extrapolation, not a convex combination, and is never clipped; α ≤ σ/(K − 1) rules
  it out for any distances (and the shared start's round 1 needs it);
* the ξ logged at round r (``results.WEIGHT``, client i, peer j) is the one round r
  used, computed from the models after round r − 1, and beside it the mean squared
  per-parameter distances x_ij it was computed from (``results.MODEL_DISTANCE``,
  whatever ``distance`` is); nothing is logged at round 0.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import torch

from pflrepro.algorithms.base import Algorithm, ClientModels, register_algorithm
from pflrepro.algorithms.registry import hyper, require_positive
from pflrepro.store.results import MODEL_DISTANCE, WEIGHT, MetricLog
from pflrepro.training.optim import Params
from pflrepro.training.params import take
from pflrepro.training.terms import GradTerm, Proximal


class FedAMPState(ClientModels):
    """Each client's model and optimiser state (stacked), and what the last round used."""

    xi: torch.Tensor  #: ξ (K, K), float64: NaN before round 1
    distance: torch.Tensor  #: the distances ξ came from (K, K), float64: NaN before round 1


#: How FedAMP / HeurFedAMP clients start: one seeded model copied to every client (the
#: reference implementations), or a model of its own per client.
AMP_INITS = ("shared", "independent")
#: FedAMP's server step α_k per round: α capped to keep ξ_ii >= 0, or α as given.
AMP_STEPS = ("capped", "fixed")


@dataclasses.dataclass(frozen=True)
class FedAMPHyper:
    """Hyperparameters of FedAMP (the paper gives no values; see fedamp.py for the defaults)."""

    lam: float = hyper(1e-7, "λ: weight of the attention-inducing penalty; the client's "
                       "proximal pull towards u_i has coefficient λ/α (default 1; 0: none).",
                       minimum=0.0)
    sigma: float = hyper(1e-5, "σ (> 0) of A(x) = 1 − exp(−x/σ), on the scale of x, the "
                         "squared model distance that `distance` names (per parameter by "
                         "default, so σ does not change with the model's size); σ ≪ x means "
                         "no messages, σ ≫ x equal weights for every peer.", minimum=0.0)
    alpha: float = hyper(1e-7, "α_k (> 0, constant): server step; ξ_ij = α·exp(−x_ij/σ)/σ. "
                         "α ≤ σ/(K − 1) keeps ξ_ii ≥ 0 at any distances (default α/σ = 0.01: "
                         "up to 101 clients); a negative ξ_ii raises.", minimum=0.0)
    distance: str = hyper("mean", "x_ij: 'mean' = ‖w_i − w_j‖²/P (mean squared distance per "
                          "parameter, P parameters; eq. 5 with λ, σ, α all multiplied by P), "
                          "'sum' = ‖w_i − w_j‖² as printed in the paper (σ then depends on "
                          "the model's size).", choices=("mean", "sum"))
    init: str = hyper("shared", "'shared': every client starts from one seeded model (as the "
                      "reference implementations); 'independent': each client draws its own.",
                      choices=AMP_INITS)
    step: str = hyper("capped", "the server step α_k: 'capped' = min(α, the largest step that "
                      "keeps every ξ_ii >= 0 this round), so u_i stays a convex combination "
                      "as the paper says; 'fixed' = α every round (a negative ξ_ii raises).",
                      choices=AMP_STEPS)

    def __post_init__(self) -> None:
        require_positive("fedamp", sigma=self.sigma, alpha=self.alpha)


#: Rounding tolerance of the ξ_ii ≥ 0 check (ξ is computed in float64).
XI_TOLERANCE = 1e-12


def flatten(stacked: Params) -> torch.Tensor:
    """(K, d) float64 matrix: each client's parameters flattened, in name order.

    Each tensor is converted straight into its columns (no float64 copy to concatenate).
    """
    items = sorted(stacked.items())
    first = items[0][1]
    sizes = [v[0].numel() for _, v in items]
    out = torch.empty(first.shape[0], sum(sizes), dtype=torch.float64, device=first.device)
    start = 0
    for (_, v), size in zip(items, sizes, strict=True):
        out[:, start:start + size].copy_(v.detach().reshape(v.shape[0], -1))
        start += size
    return out


def squared_distances(flat: torch.Tensor) -> torch.Tensor:
    """(K, K) matrix of ‖w_i − w_j‖², exact differences (no Gram-matrix shortcut).

    Each pair once (j > i, mirrored; zero diagonal), squared in place: the same sums,
    bit for bit, as squaring every row's K differences. The differences of every row go
    into one buffer, allocated once: a fresh (K, d) block per row costs the kernel a
    page fault per 4 KiB touched, more than the arithmetic at paper scale.
    """
    k = flat.shape[0]
    out = torch.zeros(k, k, dtype=flat.dtype, device=flat.device)
    buffer = torch.empty(max(k - 1, 0), flat.shape[1], dtype=flat.dtype, device=flat.device)
    for i in range(k - 1):
        diff = torch.sub(flat[i + 1:], flat[i], out=buffer[:k - i - 1])
        row = diff.mul_(diff).sum(dim=1)
        out[i, i + 1:] = row
        out[i + 1:, i] = row
    return out


def _similarity(flat: torch.Tensor, sigma: float, per_parameter: bool,
                squared: torch.Tensor | None) -> torch.Tensor:
    """A′(x_ij) = e^{−x/σ}/σ off the diagonal, 0 on it."""
    k = flat.shape[0]
    off = ~torch.eye(k, dtype=torch.bool, device=flat.device)
    x = squared_distances(flat) if squared is None else squared
    if per_parameter:
        x = x / flat.shape[1]
    a = torch.exp(-x / sigma) / sigma
    return torch.where(off, a, torch.zeros_like(a))


def capped_step(flat: torch.Tensor, alpha: float, sigma: float, per_parameter: bool = False,
                squared: torch.Tensor | None = None) -> float:
    """α_k = min(α, 1 / max_i Σ_{j≠i} A′(x_ij)): the largest step ≤ α with every ξ_ii ≥ 0.

    At least σ/(K − 1) (A′ ≤ 1/σ); ``flat``, ``squared``, ``per_parameter`` as for
    :func:`fedamp_attention`.
    """
    peak = float(_similarity(flat, sigma, per_parameter, squared).sum(dim=1).max())
    return min(alpha, 1.0 / peak) if peak > 0 else alpha


def fedamp_attention(flat: torch.Tensor, alpha: float, sigma: float,
                     per_parameter: bool = False,
                     squared: torch.Tensor | None = None) -> torch.Tensor:
    """ξ of eq. 5: α·e^{−x/σ}/σ off the diagonal, ξ_ii = 1 − Σ_{j≠i} ξ_ij.

    x = ‖w_i − w_j‖², divided by the number of parameters when ``per_parameter``;
    ``squared``: :func:`squared_distances` of ``flat`` when the caller has it already.
    Raises ValueError where some ξ_ii < 0 (beyond rounding).
    """
    k = flat.shape[0]
    xi = alpha * _similarity(flat, sigma, per_parameter, squared)
    xi = xi + torch.diag(1.0 - xi.sum(dim=1))
    diag = torch.diagonal(xi)
    if bool((diag < -XI_TOLERANCE).any()):
        i = int(diag.argmin())
        raise ValueError(
            f"fedamp: self weight ξ_ii = {float(diag[i]):.4g} < 0 for client {i}: alpha = "
            f"{alpha} is too large for sigma = {sigma} at the current model distances "
            f"(Σ_j alpha·exp(−d²/sigma)/sigma > 1); use alpha <= sigma/(K − 1) = "
            f"{sigma / max(k - 1, 1):.4g}, which keeps ξ_ii >= 0 for any distances, or "
            "step: capped")
    return xi


def mix(stacked: Params, xi: torch.Tensor) -> Params:
    """Cloud models u_i = Σ_j ξ_ij w_j, stacked (computed in float64)."""
    return {n: torch.tensordot(xi, v.to(torch.float64), dims=1).to(v.dtype)
            for n, v in stacked.items()}


@register_algorithm
class FedAMP(Algorithm[FedAMPState]):
    """Attention-weighted cloud models, proximal local training; see the module docstring."""

    name = "fedamp"
    summary = ("FedAMP (Huang et al. 2021): per-client cloud models mixed by attention "
               "exp(−‖w_i − w_j‖²/σ), proximal local training.")
    Hyper = FedAMPHyper
    records = (WEIGHT, MODEL_DISTANCE)
    #: Keys a ``tune:`` block may name besides the hyperparameters (:mod:`pflrepro.tuning`).
    TUNE_KEYS = {"prox": "λ/α, the client's proximal coefficient (λ = prox · α; default 1)",
                 "alpha_ratio": "α/σ = α·A′(0), a peer's weight at zero distance (α = "
                                "alpha_ratio · σ; 1/K is the tied reading α = σ/K)"}

    @staticmethod
    def tied_values(values: dict[str, Any], clients: int) -> dict[str, Any]:
        """Hyperparameters of a tuning grid point (``values``: the point and fixed keys).

        α and σ are separate knobs, as eq. 5 writes them: α as given, else
        ``alpha_ratio`` · σ (the weight α·A′(0) a peer at zero distance gets, on a grid
        of its own), else σ/K, the tied reading (every peer and the client itself 1/K
        at zero distance: FedAvg's mean; each peer weighs at most 1/K). λ = prox · α
        (prox = λ/α, default 1 as the reference code's λ = α_K = 1).
        """
        sigma = float(values.get("sigma", FedAMPHyper.sigma))
        ratio = float(values.get("alpha_ratio", 1.0 / clients))
        alpha = float(values.get("alpha", ratio * sigma))
        lam = float(values.get("lam", float(values.get("prox", 1.0)) * alpha))
        return {"sigma": sigma, "alpha": alpha, "lam": lam}

    def init(self) -> FedAMPState:
        """One shared model copied to every client, an optimiser state per client.

        ``init: independent`` draws one model per client. No ξ and distances yet (NaN).
        """
        e = self.engine
        start = e.client_init(shared=self.hp.init == "shared")
        nan = torch.full((e.num_clients, e.num_clients), float("nan"), dtype=torch.float64)
        return {"params": start["params"], "opt": start["opt"], "xi": nan,
                "distance": nan.clone()}

    def attention(self, flat: torch.Tensor, squared: torch.Tensor,
                  step: float | None = None) -> torch.Tensor:
        """ξ (K × K, float64, rows sum to 1, on ``flat``'s device) from the models.

        ``flat``: the flattened models; ``squared``: their :func:`squared_distances`;
        ``step``: the round's α_k (default :meth:`server_step`).
        """
        alpha = self.server_step(flat, squared) if step is None else step
        return fedamp_attention(flat, alpha, self.hp.sigma,
                                per_parameter=self.hp.distance == "mean", squared=squared)

    def server_step(self, flat: torch.Tensor, squared: torch.Tensor) -> float:
        """α_k of this round: α, or (``step: capped``) :func:`capped_step`'s min(α, cap)."""
        if self.hp.step == "fixed":
            return self.hp.alpha
        return capped_step(flat, self.hp.alpha, self.hp.sigma,
                           per_parameter=self.hp.distance == "mean", squared=squared)

    def terms(self, cloud: Params, step: float | None = None) -> tuple[GradTerm, ...]:
        """(λ/α_k)(w − u_i): each client's pull towards its cloud model (none when λ = 0).

        ``step``: the round's α_k (eq. 6's coefficient λ/(2α_k) of ‖w − u_i‖²; default α).
        """
        if self.hp.lam <= 0:
            return ()
        alpha = self.hp.alpha if step is None else step
        return (Proximal(cloud, self.hp.lam / alpha, per_client=True),)

    def round(self, state: FedAMPState, rnd: int) -> tuple[FedAMPState, np.ndarray]:
        """Server: ξ and cloud models from the current w; clients: proximal training from u_i."""
        e = self.engine
        flat = flatten(state["params"])
        squared = squared_distances(flat)  # once: for ξ and for the record
        step = self.server_step(flat, squared)
        xi = self.attention(flat, squared, step)
        cloud = mix(state["params"], xi)
        state["xi"] = xi.cpu()
        state["distance"] = (squared / flat.shape[1]).cpu()
        # clients start from and are pulled towards their cloud models u_i
        state["params"], state["opt"], losses = e.train(cloud, state["opt"],
                                                        range(e.num_clients), rnd,
                                                        terms=self.terms(cloud, step))
        # each client uploads w_i and downloads its own cloud model u_i
        e.traffic.exchange(range(e.num_clients), up=e.model_size, down=e.model_size)
        return state, losses

    def predict(self, state: FedAMPState, client: int, x: torch.Tensor, rnd: int
                ) -> torch.Tensor:
        """Client ``client`` predicts with its own model w_i."""
        return self.engine.probs(take(state["params"], client), x)

    def record(self, state: FedAMPState, rnd: int, log: MetricLog) -> None:
        """Log ξ_ij used in round ``rnd`` (client i, peer j) and its distances.

        The distances are mean squared per parameter; nothing is logged at round 0.
        """
        if rnd > 0:
            log.add_matrix(rnd, WEIGHT, state["xi"].numpy())
            log.add_matrix(rnd, MODEL_DISTANCE, state["distance"].numpy())
