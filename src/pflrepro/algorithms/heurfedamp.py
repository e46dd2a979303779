"""HeurFedAMP: FedAMP with cosine-similarity attention for deep models.

Huang, Chu, Zhou, Wang, Liu, Pei, Zhang, "Personalized Cross-Silo Federated Learning
on Non-IID Data", AAAI 2021, section 6 (eq. 8). It follows FedAMP's steps exactly
(cloud models u_i = Σ_j ξ_ij w_j on the server, proximal local training towards u_i
on the clients; :mod:`pflrepro.algorithms.fedamp`) and changes only the message
weights: ξ_ii is a self-attention hyperparameter and, for j ≠ i,

    ξ_ij = (1 − ξ_ii) · exp(σ cos(w_i, w_j)) / Σ_{h≠i} exp(σ cos(w_i, w_h)),

with cos the cosine similarity of the flattened parameter vectors (all parameters).
The weights are non-negative and every row sums to 1.

Choices where the paper is silent (besides FedAMP's, which apply here too):

* defaults ξ_ii = 0.5 and σ = 50: once clients have exchanged messages their
  parameter vectors point in similar directions (cosines close to 1), so σ must be
  large for cosine gaps of about 0.01 to matter; on the digits smoke setting σ = 10
  gave same-group peers 1.1× the weight of other peers, σ = 50 and 100 gave 2×,
  all three within a point of accuracy;
* α only sets the proximal coefficient λ/α (ξ does not depend on it, and eq. 8's ξ is
  convex for any α, so FedAMP's capped step does not apply: α_k = α); λ = α = 1 as
  for FedAMP; tuning (:mod:`pflrepro.tuning`) sets λ = prox · α from a tuned prox = λ/α;
* parameter norms are clamped at 1e-8 in the cosine (a zero vector has similarity 0
  with everything, as with ``torch.nn.functional.cosine_similarity``);
* at least 2 clients are required (there are no others to attend to otherwise).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from pflrepro.algorithms.base import register_algorithm
from pflrepro.algorithms.fedamp import AMP_INITS, FedAMP, FedAMPState
from pflrepro.algorithms.registry import hyper, require_positive


@dataclasses.dataclass(frozen=True)
class HeurFedAMPHyper:
    """Hyperparameters of HeurFedAMP (the paper gives no values; defaults fit digits)."""

    lam: float = hyper(1.0, "λ: the client's proximal pull towards u_i has coefficient λ/α "
                       "(0: none).", minimum=0.0)
    alpha: float = hyper(1.0, "α_k (> 0, constant): only sets the proximal coefficient λ/α "
                         "(the weights ξ do not depend on it).", minimum=0.0)
    sigma: float = hyper(50.0, "σ (> 0): scale of the cosine similarities in the softmax over "
                         "the other clients.", minimum=0.0)
    self_attention: float = hyper(0.5, "ξ_ii: weight of a client's own model in its cloud model; "
                                  "the others share 1 − ξ_ii.", minimum=0.0, maximum=1.0)
    init: str = hyper("shared", "'shared': every client starts from one seeded model (as the "
                      "reference implementations); 'independent': each client draws its own.",
                      choices=AMP_INITS)

    def __post_init__(self) -> None:
        require_positive("heurfedamp", sigma=self.sigma, alpha=self.alpha)


#: Norms below this are clamped in the cosine similarity (as torch's cosine_similarity).
NORM_EPS = 1e-8


def heuristic_attention(flat: torch.Tensor, self_attention: float, sigma: float) -> torch.Tensor:
    """ξ of eq. 8: ξ_ii = self_attention, the rest (1 − ξ_ii)·softmax_{h≠i}(σ cos(w_i, w_h))."""
    k = flat.shape[0]
    if k < 2:
        raise ValueError(f"heurfedamp needs at least 2 clients, got {k}")
    unit = flat / flat.norm(dim=1, keepdim=True).clamp_min(NORM_EPS)
    cos = unit @ unit.T
    eye = torch.eye(k, dtype=torch.bool, device=flat.device)
    logits = (sigma * cos).masked_fill(eye, float("-inf"))
    others = torch.softmax(logits, dim=1)  # exactly 0 on the diagonal
    return (1.0 - self_attention) * others + self_attention * eye.to(flat.dtype)


@register_algorithm
class HeurFedAMP(FedAMP):
    """FedAMP whose attention is a softmax of cosine similarities; see the module docstring."""

    name = "heurfedamp"
    summary = ("HeurFedAMP (Huang et al. 2021): FedAMP with a fixed self-attention and a "
               "softmax of scaled cosine similarities over the other clients.")
    Hyper = HeurFedAMPHyper
    TUNE_KEYS = {"prox": "λ/α, the client's proximal coefficient (λ = prox · α; default 1)"}

    @staticmethod
    def tied_values(values: dict[str, Any], clients: int) -> dict[str, Any]:
        """Hyperparameters of a tuning grid point: the point, and λ = prox · α.

        σ and ξ_ii (``self_attention``) are tuned as they are; α only scales λ/α, so a
        tuned prox = λ/α sets λ = prox · α (α: given, else the default 1).
        """
        out = {k: v for k, v in values.items() if k != "prox"}
        if "prox" in values and "lam" not in values:
            alpha = float(values.get("alpha", HeurFedAMPHyper.alpha))
            out["lam"] = float(values["prox"]) * alpha
        return out

    def init(self) -> FedAMPState:
        """FedAMP's initial state; fewer than 2 clients raise ValueError."""
        if self.engine.num_clients < 2:
            raise ValueError(f"heurfedamp needs at least 2 clients, got {self.engine.num_clients}")
        return super().init()

    def server_step(self, flat: torch.Tensor, squared: torch.Tensor) -> float:
        """α: ξ does not depend on it (eq. 8), so no cap applies; it sets λ/α only."""
        return self.hp.alpha

    def attention(self, flat: torch.Tensor, squared: torch.Tensor,
                  step: float | None = None) -> torch.Tensor:
        """ξ from cosine similarities (eq. 8) instead of FedAMP's A′ of the distances.

        ``squared`` (the squared distances) is unused: HeurFedAMP records it only;
        ``step`` too (ξ does not depend on α).
        """
        return heuristic_attention(flat, self.hp.self_attention, self.hp.sigma)
