"""Weighted data losses: per-sample weights and a weighted sum of several clients' losses.

FedEM's responsibilities weight the samples; FedeRiCo's M-step weights batch losses on
its peers' data.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from pflrepro.training.objectives.base import Batch, Objective, Stream, _vmapped_grad, masked_ce
from pflrepro.training.optim import OptState, Params

if TYPE_CHECKING:
    from pflrepro.training.engine import Engine


@dataclass(frozen=True)
class SampleWeighted(Objective):
    """``Σ_s weight_s · ℓ_s / |batch|``: the batch's cross-entropy, each sample weighted.

    ``weights`` has one entry per row of the data set (``engine.data.x``), or one row of
    those per client when ``per_client``; a client's batch uses the entries of its
    samples' rows. With all weights 1 it is the plain mean loss. FedEM's M-step for
    component m: weight_s = q_s(m), the sample's responsibility (Marfoq et al. 2021).
    """

    weights: torch.Tensor
    per_client: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "weights", self.weights.detach())

    def loss_and_grad(self, engine: Engine, params: Params, idx: torch.Tensor,
                      state: OptState, extra: Sequence[torch.Tensor] = ()
                      ) -> tuple[float, Params]:
        """The engine's weighted loss with weights ``weight[idx] / len(idx)``."""
        return engine.loss_and_grad(params, idx, sample_weight=self.weights[idx] / len(idx))

    def stacked_loss_and_grad(self, model: nn.Module, params: Params, x: torch.Tensor,
                              y: torch.Tensor, mask: torch.Tensor, count: torch.Tensor,
                              idx: torch.Tensor, state: OptState,
                              active: torch.Tensor | None,
                              extra: Sequence[Batch] = ()) -> tuple[torch.Tensor, Params]:
        """Padding has mask 0; the sum is divided by the real batch size."""
        weight = torch.gather(self.weights, 1, idx) * mask

        def batch_loss(p: Params, x_: torch.Tensor, y_: torch.Tensor, w: torch.Tensor,
                       n: torch.Tensor) -> torch.Tensor:
            out = functional_call(model, p, (x_,))
            return (F.cross_entropy(out, y_, reduction="none") * w).sum() / n

        grads, loss = _vmapped_grad(batch_loss)(params, x, y, weight, count)
        return loss, grads

    def row(self, i: int) -> SampleWeighted:
        """Client ``i``'s weights (a view) or the shared ones."""
        return SampleWeighted(self.weights[i]) if self.per_client else self

    def stacked(self, params: Params) -> SampleWeighted:
        """The weights with a client dimension (broadcast if shared)."""
        if self.per_client:
            return self
        c = next(iter(params.values())).shape[0]
        return SampleWeighted(self.weights.unsqueeze(0).expand(c, -1), per_client=True)

    def rows(self, a: int, b: int) -> SampleWeighted:
        """Trained clients ``a..b-1``."""
        return SampleWeighted(self.weights[a:b], per_client=True)


@dataclass(frozen=True)
class PeerWeighted(Objective):
    """``Σ_u coef_u · mean ℓ(batch of stream u)``: one model trained on several clients' data.

    ``users`` holds, per trained client, its streams (each usually with ``client`` set:
    a batch of that user's training rows, drawn and seeded by the user), ``coef`` the
    weight of each stream's batch-mean cross-entropy, float64 (one row per trained
    client, zero-padded beyond a row's streams). The training call's own batch is not
    used: a client's own data enters as one of its streams, if at all. A client with
    no stream takes a zero gradient. The loop adds the users' weighted gradients in
    stream order and reports Σ_u coef_u ℓ_u. FedeRiCo's M-step (Sui et al. 2022, eq.
    4-6): model k on the batches of every client i that used it, coefficient w_ik.
    """

    users: tuple[tuple[Stream, ...], ...]
    coef: torch.Tensor
    per_client: bool = True

    def __post_init__(self) -> None:
        coef = self.coef.detach()
        if coef.dim() != 2 or coef.shape[0] != len(self.users):
            raise ValueError(f"coef must be ({len(self.users)}, U), got {tuple(coef.shape)}")
        widest = max((len(u) for u in self.users), default=0)
        if coef.shape[1] < widest:
            raise ValueError(f"coef has {coef.shape[1]} columns for {widest} streams")
        if not self.per_client and len(self.users) != 1:
            raise ValueError("a shared PeerWeighted has one row of streams")
        object.__setattr__(self, "coef", coef)

    @property
    def streams(self) -> tuple[Stream, ...]:  # type: ignore[override]
        """The streams of the one trained client (a row or a shared objective)."""
        if self.per_client:
            raise TypeError("a per-client PeerWeighted has streams per client: "
                            "client_streams(i)")
        return self.users[0]

    def client_streams(self, i: int) -> tuple[Stream, ...]:
        """The ``i``-th trained client's streams."""
        return self.users[i] if self.per_client else self.users[0]

    def loss_and_grad(self, engine: Engine, params: Params, idx: torch.Tensor,
                      state: OptState, extra: Sequence[torch.Tensor] = ()
                      ) -> tuple[float, Params]:
        """An engine pass per stream, ``c_u ∇ mean ℓ_u`` added in stream order."""
        grads: Params = {}
        loss = 0.0
        for u, rows in enumerate(extra):
            c = float(self.coef[0, u])
            lu, gu = engine.loss_and_grad(params, rows)
            for n, g in gu.items():
                grads[n] = c * g if n not in grads else grads[n] + c * g
            loss += c * lu
        if not extra:
            grads = {n: torch.zeros_like(v) for n, v in params.items()}
        return loss, grads

    def stacked_loss_and_grad(self, model: nn.Module, params: Params, x: torch.Tensor,
                              y: torch.Tensor, mask: torch.Tensor, count: torch.Tensor,
                              idx: torch.Tensor, state: OptState,
                              active: torch.Tensor | None,
                              extra: Sequence[Batch] = ()) -> tuple[torch.Tensor, Params]:
        """One vmapped pass: a forward per stream slot, padded slots carrying mask 0."""
        dtype = next(iter(params.values())).dtype
        coef = self.coef[:, :len(extra)].to(dtype)

        def weighted(p: Params, c: torch.Tensor, *batches: tuple[torch.Tensor, ...]
                     ) -> tuple[torch.Tensor, torch.Tensor]:
            total = torch.zeros((), dtype=dtype, device=c.device)
            for u, batch in enumerate(batches):
                total = total + c[u] * masked_ce(model, p, *batch)
            return total, total.detach()

        grads, (_, loss) = _vmapped_grad(weighted, has_aux=True)(
            params, coef, *[b[1:] for b in extra])
        return loss, grads

    def row(self, i: int) -> PeerWeighted:
        """Client ``i``'s streams and coefficients, or the shared ones."""
        if not self.per_client:
            return self
        return PeerWeighted((self.users[i],), self.coef[i:i + 1], per_client=False)

    def stacked(self, params: Params) -> PeerWeighted:
        """One row per client (the shared row repeated)."""
        if self.per_client:
            return self
        c = next(iter(params.values())).shape[0]
        return PeerWeighted(self.users * c, self.coef.expand(c, -1), per_client=True)

    def rows(self, a: int, b: int) -> PeerWeighted:
        """Trained clients ``a..b-1``."""
        return PeerWeighted(self.users[a:b], self.coef[a:b], per_client=True)
