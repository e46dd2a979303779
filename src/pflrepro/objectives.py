"""Objectives: what a local step differentiates when it is not the plain mean loss.

Local training (:mod:`pflrepro.local_training`) draws the mini-batches, adds the
gradient terms (:mod:`pflrepro.terms`), steps the optimiser and masks padded steps;
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

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad, grad_and_value, vjp, vmap

from pflrepro.distillation import distill_loss_and_grad
from pflrepro.optim import OptState, Params

if TYPE_CHECKING:
    from pflrepro.engine import Engine

__all__ = ["BASE", "EXPERT_LOSS_KEY", "GATE", "MAML", "MIXED", "Distill", "GatedExperts",
           "MixedPair", "Objective", "PeerWeighted", "SampleWeighted", "Stream", "expert_prefix",
           "gate_logits", "join_experts", "join_pair", "split_experts", "split_pair"]

#: A padded batch of a further stream in a vectorised pass: ``(index, x, y, mask, count)``.
Batch = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]


@dataclass(frozen=True)
class Stream:
    """A further seeded mini-batch stream of an objective (see :attr:`Objective.streams`).

    ``public``: batches are row indices of the public set (``engine.data.public``), not
    of the data set; else the client's training rows (or the call's pool).
    ``batch_size``: None for ``training.batch_size`` (capped by the pool's size).
    ``client``: None for the trained client; else the batches are rows of that client's
    training set (never the call's pool), seeded by (seed, round, ``client``,
    ``purpose``): exactly the batches ``engine.minibatches(client, ...)`` gives that
    client's own training under ``purpose``. ``whole``: every step's batch is the whole
    pool in stored order (no draw; ``batch_size`` does not apply).
    """

    purpose: str
    public: bool = False
    batch_size: int | None = None
    client: int | None = None
    whole: bool = False

    def __post_init__(self) -> None:
        if self.public and self.client is not None:
            raise ValueError(f"stream {self.purpose!r}: a public stream has no client")
        if self.whole and self.batch_size is not None:
            raise ValueError(f"stream {self.purpose!r}: a whole-pool stream has no batch size")


class Objective(ABC):
    """The loss and gradient of one local step (see the module docstring)."""

    #: Whether the objective's tensors carry a leading client dimension.
    per_client: bool
    #: Further mini-batch streams a step draws a batch from, besides the training
    #: call's own (Per-FedAvg's inner and Hessian batches, PerFed-CKT's public batch):
    #: seeded like it by (seed, round, client, purpose), as many steps. Those of one
    #: trained client; see :meth:`client_streams` for a per-client objective's.
    streams: tuple[Stream, ...] = ()

    def client_streams(self, i: int) -> tuple[Stream, ...]:
        """The further streams of the ``i``-th trained client (its :meth:`row`'s).

        They may differ from client to client (:class:`PeerWeighted`); the vectorised
        path pads a client with fewer streams with empty batches (mask 0).
        """
        return self.row(i).streams

    @abstractmethod
    def loss_and_grad(self, engine: Engine, params: Params, idx: torch.Tensor,
                      state: OptState, extra: Sequence[torch.Tensor] = ()
                      ) -> tuple[float, Params]:
        """One client's reported loss and gradient on samples ``idx`` (loop path).

        ``state`` is the client's optimiser state; the objective may update its own
        ``obj.*`` entries in place. ``extra``: this step's batch of each of
        :attr:`streams`.
        """

    @abstractmethod
    def stacked_loss_and_grad(self, model: nn.Module, params: Params, x: torch.Tensor,
                              y: torch.Tensor, mask: torch.Tensor, count: torch.Tensor,
                              idx: torch.Tensor, state: OptState,
                              active: torch.Tensor | None,
                              extra: Sequence[Batch] = ()) -> tuple[torch.Tensor, Params]:
        """Every client's loss (C,) and gradient at once (vectorised path).

        ``x``, ``y``, ``mask`` (C, B, ...): the padded batches, ``count`` (C,) their real
        sizes, ``idx`` (C, B) their data rows; ``active`` (C,) bool or None (all):
        clients whose step is real. ``obj.*`` state of inactive clients must not move.
        ``extra``: per stream of :attr:`streams`, this step's padded batch
        ``(index, x, y, mask, count)`` (``y`` zeros for the label-less public set).
        """

    @abstractmethod
    def row(self, i: int) -> Objective:
        """The objective of the ``i``-th trained client alone (itself if shared)."""

    @abstractmethod
    def stacked(self, params: Params) -> Objective:
        """The objective with a client dimension like stacked ``params``."""

    @abstractmethod
    def rows(self, a: int, b: int) -> Objective:
        """The objective of trained clients ``a..b-1`` (stacked objectives only)."""


def masked_ce(model: nn.Module, p: Params, x: torch.Tensor, y: torch.Tensor,
              m: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
    """One client's padded-batch loss: Σ mask · ℓ / n (the loop's mean over real samples)."""
    out = functional_call(model, p, (x,))
    return (F.cross_entropy(out, y, reduction="none") * m).sum() / n


def _vmapped_grad(loss: Callable[..., torch.Tensor], argnums: int | tuple[int, ...] = 0,
                  has_aux: bool = False) -> Callable[..., object]:
    return vmap(grad_and_value(loss, argnums=argnums, has_aux=has_aux))


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


#: Key prefixes of the two models of a :class:`MixedPair` in one parameter dict.
BASE, MIXED = "base.", "mixed."
#: The optimiser-state key of a :class:`MixedPair`'s mixing weight.
ALPHA_KEY = "obj.alpha"


def join_pair(base: Params, mixed: Params) -> Params:
    """One parameter dict of the two models of a :class:`MixedPair`."""
    return {**{BASE + k: v for k, v in base.items()}, **{MIXED + k: v for k, v in mixed.items()}}


def split_pair(params: Params) -> tuple[Params, Params]:
    """The two models of a :class:`MixedPair`'s parameter dict (``base``, ``mixed``)."""
    return ({k[len(BASE):]: v for k, v in params.items() if k.startswith(BASE)},
            {k[len(MIXED):]: v for k, v in params.items() if k.startswith(MIXED)})


def join_pair_states(base: OptState, mixed: OptState, alpha: torch.Tensor) -> OptState:
    """One optimiser state for a :class:`MixedPair` (both models take every step).

    The two step counts must agree (both models step together); ``alpha`` is the
    mixing weight (float64), one per client when stacked.
    """
    if not torch.equal(base["step"], mixed["step"]):
        raise ValueError("the two models' optimiser step counts differ")
    out: OptState = {"step": base["step"]}
    for prefix, state in ((BASE, base), (MIXED, mixed)):
        for key, value in state.items():
            if key != "step":
                slot, name = key.split(".", 1)
                out[f"{slot}.{prefix}{name}"] = value
    out[ALPHA_KEY] = alpha
    return out


def split_pair_states(state: OptState) -> tuple[OptState, OptState, torch.Tensor]:
    """Inverse of :func:`join_pair_states`: the two states and the mixing weight."""
    base: OptState = {"step": state["step"]}
    mixed: OptState = {"step": state["step"].clone()}
    for key, value in state.items():
        if key in ("step", ALPHA_KEY):
            continue
        slot, name = key.split(".", 1)
        if name.startswith(BASE):
            base[f"{slot}.{name[len(BASE):]}"] = value
        else:
            mixed[f"{slot}.{name[len(MIXED):]}"] = value
    return base, mixed, state[ALPHA_KEY]


def mix(v: Params, w: Params, alpha: float | torch.Tensor) -> Params:
    """The parameter mixture α v + (1 − α) w."""
    return {k: alpha * v[k] + (1.0 - alpha) * w[k] for k in w}


@dataclass(frozen=True)
class MixedPair(Objective):
    """A base model w on its own loss, a model v on the loss of α v + (1 − α) w.

    Parameters are one dict holding both (:func:`join_pair`), α a float64 per client
    in the optimiser state (:func:`join_pair_states`). The step's gradient is
    ``∇f(w)`` for w and ``α ∇f(v̄)`` for v, v̄ = α v + (1 − α) w (the gradient of
    ``f(w) + f(α v + (1 − α) sg(w))``, sg: no gradient); with ``adaptive`` α moves by a
    plain SGD step ``α ← clip[0,1](α − lr · ⟨∇f(v̄), v − w⟩)`` from the pre-step values
    (all three from the same batch). The reported loss is the mixed model's.
    APFL's local update (Deng et al. 2020, Algorithm 1).
    """

    lr: float
    adaptive: bool = True
    per_client: bool = False

    def loss_and_grad(self, engine: Engine, params: Params, idx: torch.Tensor,
                      state: OptState, extra: Sequence[torch.Tensor] = ()
                      ) -> tuple[float, Params]:
        """Two engine passes (w, then v̄); α updated in ``state`` after both."""
        w, v = split_pair(params)
        alpha = float(state[ALPHA_KEY])
        _, g_w = engine.loss_and_grad(w, idx)
        loss, g_bar = engine.loss_and_grad(mix(v, w, alpha), idx)
        g_v = {k: alpha * g for k, g in g_bar.items()}
        if self.adaptive:
            g_alpha = float(sum(torch.sum(g_bar[k] * (v[k] - w[k])) for k in w))
            state[ALPHA_KEY].fill_(min(max(alpha - self.lr * g_alpha, 0.0), 1.0))
        return loss, join_pair(g_w, g_v)

    def stacked_loss_and_grad(self, model: nn.Module, params: Params, x: torch.Tensor,
                              y: torch.Tensor, mask: torch.Tensor, count: torch.Tensor,
                              idx: torch.Tensor, state: OptState,
                              active: torch.Tensor | None,
                              extra: Sequence[Batch] = ()) -> tuple[torch.Tensor, Params]:
        """One vmapped pass differentiating ``f(w) + f(v̄)`` in w, v and α."""
        alpha = state[ALPHA_KEY]

        def ce(p: Params, x_: torch.Tensor, y_: torch.Tensor, m: torch.Tensor,
               n: torch.Tensor) -> torch.Tensor:
            return masked_ce(model, p, x_, y_, m, n)

        def pair_loss(p: Params, a: torch.Tensor, x_: torch.Tensor, y_: torch.Tensor,
                      m: torch.Tensor, n: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            w, v = split_pair(p)
            a32 = a.to(next(iter(w.values())).dtype)
            bar = mix(v, {k: t.detach() for k, t in w.items()}, a32)
            mixed = ce(bar, x_, y_, m, n)
            return ce(w, x_, y_, m, n) + mixed, mixed.detach()

        (grads, g_alpha), (_, loss) = _vmapped_grad(pair_loss, argnums=(0, 1), has_aux=True)(
            params, alpha, x, y, mask, count)
        if self.adaptive:
            new = (alpha - self.lr * g_alpha.to(alpha.dtype)).clamp(0.0, 1.0)
            alpha.copy_(new if active is None else torch.where(active, new, alpha))
        return loss, grads

    def row(self, i: int) -> MixedPair:
        """The same objective (α lives in the client's optimiser state)."""
        return self

    def stacked(self, params: Params) -> MixedPair:
        """The same objective (α lives in the stacked optimiser state)."""
        return self

    def rows(self, a: int, b: int) -> MixedPair:
        """The same objective."""
        return self


def hessian_vector_product(net: nn.Module, x: torch.Tensor, y: torch.Tensor,
                           params: Params, vector: Params) -> Params:
    """∇²f(params) · vector, f the mean cross-entropy of ``net`` on (x, y), exactly.

    The gradient of ⟨∇f(params), vector⟩ by double backward; no finite differences.
    """
    p = {k: v.detach().clone().requires_grad_(True) for k, v in params.items()}
    leaves = list(p.values())
    with torch.enable_grad():
        out = functional_call(net, p, (x,))
        loss = F.cross_entropy(out, y)
        grads = torch.autograd.grad(loss, leaves, create_graph=True)
        dot = torch.stack([(g * vector[k].detach()).sum()
                           for k, g in zip(p, grads, strict=True)]).sum()
        hv = torch.autograd.grad(dot, leaves, allow_unused=True)
    return {k: torch.zeros_like(p[k]) if h is None else h.detach()
            for k, h in zip(p, hv, strict=True)}


@dataclass(frozen=True)
class MAML(Objective):
    """The stochastic gradient of the MAML loss f(w − α ∇f(w; D); D').

    D' is the training call's own batch, D the batch of stream ``inner`` and, with
    ``hessian`` set, D'' that of stream ``hessian``. The step direction is
    ``∇f(temp; D')``, temp = w − α ∇f(w; D) (first order), minus
    ``α ∇²f(w; D'') ∇f(temp; D')`` with ``hessian`` (an exact Hessian-vector product,
    double backward). The reported loss is f(temp; D'). Per-FedAvg's local step
    (Fallah et al. 2020, Algorithm 1: FO and HF variants).
    """

    alpha: float
    inner: str
    hessian: str | None = None
    per_client: bool = False

    @property
    def streams(self) -> tuple[Stream, ...]:  # type: ignore[override]
        """The inner batch's stream, then the Hessian batch's (if any)."""
        names = (self.inner,) if self.hessian is None else (self.inner, self.hessian)
        return tuple(Stream(n) for n in names)

    def loss_and_grad(self, engine: Engine, params: Params, idx: torch.Tensor,
                      state: OptState, extra: Sequence[torch.Tensor] = ()
                      ) -> tuple[float, Params]:
        """Engine passes: ∇f(w; D), then f and ∇f at temp on D', then the HVP on D''."""
        alpha = float(self.alpha)
        _, g = engine.loss_and_grad(params, extra[0])
        temp = {k: params[k] - alpha * g[k] for k in params}
        loss, direction = engine.loss_and_grad(temp, idx)
        if self.hessian is not None:
            d2 = extra[1]
            hv = hessian_vector_product(engine.net_for(params), engine.data.x[d2],
                                        engine.data.y[d2], params, direction)
            direction = {k: direction[k] - alpha * hv[k] for k in direction}
        return loss, direction

    def stacked_loss_and_grad(self, model: nn.Module, params: Params, x: torch.Tensor,
                              y: torch.Tensor, mask: torch.Tensor, count: torch.Tensor,
                              idx: torch.Tensor, state: OptState,
                              active: torch.Tensor | None,
                              extra: Sequence[Batch] = ()) -> tuple[torch.Tensor, Params]:
        """One vmapped pass: inner gradient, outer gradient, and the HVP by vjp."""
        alpha = float(self.alpha)
        use_hessian = self.hessian is not None

        def f(p: Params, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
            return masked_ce(model, p, *batch)

        def one(p: Params, outer: tuple[torch.Tensor, ...], inner: tuple[torch.Tensor, ...],
                *rest: tuple[torch.Tensor, ...]) -> tuple[Params, torch.Tensor]:
            g = grad(f)(p, inner)
            temp = {k: p[k] - alpha * g[k] for k in p}
            direction, loss = grad_and_value(f)(temp, outer)
            if use_hessian:
                _, hvp = vjp(lambda q: grad(f)(q, rest[0]), p)
                (hv,) = hvp(direction)
                direction = {k: direction[k] - alpha * hv[k] for k in direction}
            return direction, loss

        grads, loss = vmap(one)(params, (x, y, mask, count), *[b[1:] for b in extra])
        return loss, grads

    def row(self, i: int) -> MAML:
        """The same objective (nothing per client)."""
        return self

    def stacked(self, params: Params) -> MAML:
        """The same objective."""
        return self

    def rows(self, a: int, b: int) -> MAML:
        """The same objective."""
        return self


@dataclass(frozen=True)
class Distill(Objective):
    """The batch's mean cross-entropy plus ``lam`` × the mean KL(target ‖ s(w, x)) on P.

    Each step also draws a batch of rows of the public set P (stream ``purpose``, rows
    of ``batch_size`` or ``training.batch_size``); ``targets`` (|P|, N) holds a
    probability vector per public row, or one such matrix per client when
    ``per_client``. Only the cross-entropy part −Σ target · log s(w, x) of the KL carries
    gradient. The reported loss is the private batch's. PerFed-CKT's local step
    (Cho et al. 2021, eq. 2) towards the nearest centroid.
    """

    targets: torch.Tensor
    lam: float
    purpose: str = "public"
    batch_size: int | None = None
    per_client: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "targets", self.targets.detach())

    @property
    def streams(self) -> tuple[Stream, ...]:  # type: ignore[override]
        """The public batch's stream."""
        return (Stream(self.purpose, public=True, batch_size=self.batch_size),)

    def loss_and_grad(self, engine: Engine, params: Params, idx: torch.Tensor,
                      state: OptState, extra: Sequence[torch.Tensor] = ()
                      ) -> tuple[float, Params]:
        """The engine's private pass, then its distillation pass on the public rows."""
        assert engine.data.public is not None
        rows = extra[0]
        loss, grads = engine.loss_and_grad(params, idx)
        _, distill = distill_loss_and_grad(engine, params, engine.data.public[rows],
                                           self.targets[rows])
        return loss, {k: g + self.lam * distill[k] for k, g in grads.items()}

    def stacked_loss_and_grad(self, model: nn.Module, params: Params, x: torch.Tensor,
                              y: torch.Tensor, mask: torch.Tensor, count: torch.Tensor,
                              idx: torch.Tensor, state: OptState,
                              active: torch.Tensor | None,
                              extra: Sequence[Batch] = ()) -> tuple[torch.Tensor, Params]:
        """One vmapped pass of both losses; padding carries mask 0 in each."""
        rows, x_pub, _, m_pub, n_pub = extra[0]
        target = torch.gather(self.targets, 1, rows.unsqueeze(-1).expand(
            -1, -1, self.targets.shape[-1]))
        lam = float(self.lam)

        def both(p: Params, x_: torch.Tensor, y_: torch.Tensor, m: torch.Tensor,
                 n: torch.Tensor, xp: torch.Tensor, t: torch.Tensor, mp: torch.Tensor,
                 np_: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            private = masked_ce(model, p, x_, y_, m, n)
            log_q = functional_call(model, p, (xp,)).log_softmax(dim=-1)
            cross = (-(t * log_q).sum(dim=-1) * mp).sum() / np_
            return private + lam * cross, private.detach()

        grads, (_, loss) = _vmapped_grad(both, has_aux=True)(
            params, x, y, mask, count, x_pub, target, m_pub, n_pub)
        return loss, grads

    def row(self, i: int) -> Distill:
        """Client ``i``'s targets (a view) or the shared ones."""
        if not self.per_client:
            return self
        return dataclasses.replace(self, targets=self.targets[i], per_client=False)

    def stacked(self, params: Params) -> Distill:
        """The targets with a client dimension (broadcast if shared)."""
        if self.per_client:
            return self
        c = next(iter(params.values())).shape[0]
        return dataclasses.replace(self, targets=self.targets.unsqueeze(0).expand(c, -1, -1),
                                   per_client=True)

    def rows(self, a: int, b: int) -> Distill:
        """Trained clients ``a..b-1``."""
        return dataclasses.replace(self, targets=self.targets[a:b])


# ---------------------------------------------------------------------- gated experts
#: Key prefix of the gate's parameters in a :class:`GatedExperts` parameter dict.
GATE = "gate."
#: The optimiser-state key of a :class:`GatedExperts`' running per-expert losses.
EXPERT_LOSS_KEY = "obj.expert_loss"


def expert_prefix(k: int) -> str:
    """Key prefix of expert ``k``'s parameters in a :class:`GatedExperts` parameter dict."""
    return f"expert{k}."


def join_experts(experts: Sequence[Params], gate: Params) -> Params:
    """One parameter dict of K experts and a gate (empty: no gate), experts first."""
    out: Params = {}
    for k, params in enumerate(experts):
        out.update({expert_prefix(k) + n: v for n, v in params.items()})
    out.update({GATE + n: v for n, v in gate.items()})
    return out


def split_experts(params: Params, experts: int) -> tuple[list[Params], Params]:
    """Inverse of :func:`join_experts`: the K experts' dicts and the gate's."""
    out = []
    for k in range(experts):
        prefix = expert_prefix(k)
        out.append({n[len(prefix):]: v for n, v in params.items() if n.startswith(prefix)})
    return out, {n[len(GATE):]: v for n, v in params.items() if n.startswith(GATE)}


def gate_logits(gate: Params, x: torch.Tensor) -> torch.Tensor:
    """A gate MLP's logits (n, K) on inputs ``x`` (flattened); pure tensor ops.

    ``gate`` holds ``w1``, ``b1`` (the hidden ReLU layer, absent for a linear gate),
    ``w2``, ``b2``; FedMix's gate p(z | x, θ_s).
    """
    h = x.flatten(1)
    if "w1" in gate:
        h = F.relu(F.linear(h, gate["w1"], gate["b1"]))
    return F.linear(h, gate["w2"], gate["b2"])


def gate_grad(gate: Params, x: torch.Tensor, target: torch.Tensor) -> Params:
    """Gradient of the gate's mean cross-entropy against soft targets ``target`` (n, K)."""
    p = {n: v.detach().requires_grad_(True) for n, v in gate.items()}
    with torch.enable_grad():
        logp = gate_logits(p, x).log_softmax(dim=-1)
        loss = -(target.detach() * logp).sum(dim=1).mean()
        grads = torch.autograd.grad(loss, list(p.values()))
    return dict(zip(p.keys(), grads, strict=True))


@dataclass(frozen=True)
class GatedExperts(Objective):
    """K experts and a gate, one parameter dict (:func:`join_experts`), trained jointly.

    Each step first sets the batch's responsibilities r (n, K): q(z = k | y_i), a row
    of ``q`` (C, K) per label, or with ``marginal`` the posterior
    p(z = k | x_i, y_i) ∝ p(y_i | x_i, w_k) · p(z = k | x_i) under the current experts and
    gate (no gradient through it). Expert k's loss is Σ_i r_ik ℓ_ik / |batch| (the plain
    batch mean where every r_ik is 1); an expert takes no gradient (a zero one) where
    ``trains`` is false or every r_ik of the batch is 0; with ``learned_gate`` the gate's
    loss is the mean cross-entropy of its p(z | x) against r. ``prior`` (K,) is the
    log p(z | x) of a fixed gate (zeros for none; 0 on one expert and −∞ elsewhere for a
    one-hot gate), used by ``marginal`` when there is no learned gate. The reported loss
    is the sum of the experts' losses that stepped; each expert's running sum is kept
    in the optimiser state under :data:`EXPERT_LOSS_KEY` (float64, (K,) per client),
    which the caller sets to zeros. Per client (``per_client``): ``q`` (P, C, K),
    ``trains`` (P, K), ``prior`` (P, K).

    A zero gradient leaves an expert exactly as it was under plain SGD (p − lr · 0 =
    p, bit for bit), the optimiser FedMix requires; the optimiser state (a step count)
    is one for the whole dict. FedMix's local step (Reisser et al. 2021, eq. 5).
    """

    q: torch.Tensor
    trains: torch.Tensor
    prior: torch.Tensor
    experts: int
    marginal: bool = False
    learned_gate: bool = True
    per_client: bool = False

    def __post_init__(self) -> None:
        for name in ("q", "trains", "prior"):
            object.__setattr__(self, name, getattr(self, name).detach())

    def responsibilities(self, engine: Engine, experts: Sequence[Params], gate: Params,
                         idx: torch.Tensor) -> torch.Tensor:
        """The responsibilities r (n, K) of samples ``idx``, float32 (one client)."""
        y = engine.data.y[idx]
        if not self.marginal:
            return self.q[y]
        x = engine.data.x[idx]
        cols = [engine.logits(p, x).log_softmax(dim=-1).gather(1, y[:, None])[:, 0]
                for p in experts]
        if self.learned_gate:
            with torch.no_grad():
                chunks = [gate_logits(gate, c).log_softmax(dim=-1)
                          for c in x.split(engine.eval_chunk)]
            log_gate = torch.cat(chunks)
        else:
            log_gate = self.prior.expand(len(x), -1)
        # a clone made outside inference mode: autograd may save it (sample weights)
        return torch.softmax(torch.stack(cols, dim=1) + log_gate, dim=1).clone()

    def loss_and_grad(self, engine: Engine, params: Params, idx: torch.Tensor,
                      state: OptState, extra: Sequence[torch.Tensor] = ()
                      ) -> tuple[float, Params]:
        """Engine passes per expert that steps (weighted or plain), then the gate's."""
        experts, gate = split_experts(params, self.experts)
        r = self.responsibilities(engine, experts, gate, idx)
        running = state[EXPERT_LOSS_KEY]
        grads: Params = {}
        total = 0.0
        for k, expert in enumerate(experts):
            w = r[:, k]
            prefix = expert_prefix(k)
            if not bool(self.trains[k]) or not bool((w != 0).any()):
                grads.update({prefix + n: torch.zeros_like(v) for n, v in expert.items()})
                continue
            if bool((w == 1).all()):
                loss, g = engine.loss_and_grad(expert, idx)
            else:
                loss, g = engine.loss_and_grad(expert, idx, sample_weight=w / len(idx))
            running[k] += loss
            total += loss
            grads.update({prefix + n: v for n, v in g.items()})
        if self.learned_gate:
            g = gate_grad(gate, engine.data.x[idx], r)
            grads.update({GATE + n: v for n, v in g.items()})
        return total, grads

    def stacked_loss_and_grad(self, model: nn.Module, params: Params, x: torch.Tensor,
                              y: torch.Tensor, mask: torch.Tensor, count: torch.Tensor,
                              idx: torch.Tensor, state: OptState,
                              active: torch.Tensor | None,
                              extra: Sequence[Batch] = ()) -> tuple[torch.Tensor, Params]:
        """One vmapped pass of every expert's weighted loss and the gate's."""
        k_all, marginal, learned = self.experts, self.marginal, self.learned_gate

        def one(p: Params, x_: torch.Tensor, y_: torch.Tensor, m: torch.Tensor,
                n: torch.Tensor, q: torch.Tensor, trains: torch.Tensor, prior: torch.Tensor
                ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
            experts, gate = split_experts(p, k_all)
            outs = [functional_call(model, e, (x_,)) for e in experts]
            if marginal:
                ll = torch.stack([o.log_softmax(-1).gather(1, y_[:, None])[:, 0]
                                  for o in outs], dim=1)
                log_gate = (gate_logits(gate, x_).log_softmax(-1) if learned
                            else prior.expand(x_.shape[0], -1))
                r = torch.softmax((ll + log_gate).detach(), dim=1)
            else:
                r = torch.index_select(q, 0, y_)
            real = r * m[:, None]
            steps = ((real != 0).any(dim=0) & trains).to(r.dtype)  # (K,)
            losses = torch.stack([(F.cross_entropy(o, y_, reduction="none") * real[:, k])
                                  .sum() / n for k, o in enumerate(outs)]) * steps
            total = losses.sum()
            if learned:
                logp = gate_logits(gate, x_).log_softmax(-1)
                total = total + (-(r * logp).sum(dim=1) * m).sum() / n
            return total, (losses.detach(), steps)

        grads, (_, (losses, _)) = _vmapped_grad(one, has_aux=True)(
            params, x, y, mask, count, self.q, self.trains, self.prior)
        if active is not None:
            losses = torch.where(active[:, None], losses, torch.zeros_like(losses))
        state[EXPERT_LOSS_KEY].add_(losses.to(state[EXPERT_LOSS_KEY].dtype))
        return losses.sum(dim=1), grads

    def row(self, i: int) -> GatedExperts:
        """Client ``i``'s q, trains and prior (views), or the shared ones."""
        if not self.per_client:
            return self
        return dataclasses.replace(self, q=self.q[i], trains=self.trains[i],
                                   prior=self.prior[i], per_client=False)

    def stacked(self, params: Params) -> GatedExperts:
        """The tensors with a client dimension (broadcast if shared)."""
        if self.per_client:
            return self
        c = next(iter(params.values())).shape[0]
        return dataclasses.replace(self, q=self.q.unsqueeze(0).expand(c, -1, -1),
                                   trains=self.trains.unsqueeze(0).expand(c, -1),
                                   prior=self.prior.unsqueeze(0).expand(c, -1),
                                   per_client=True)

    def rows(self, a: int, b: int) -> GatedExperts:
        """Trained clients ``a..b-1``."""
        return dataclasses.replace(self, q=self.q[a:b], trains=self.trains[a:b],
                                   prior=self.prior[a:b])
