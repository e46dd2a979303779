"""Plain per-client PyTorch loops of every registered method: the benchmarks' reference.

Each class here is one method written the way pFL libraries write it, independently
of ``pflrepro.algorithms`` and of the engine's training paths: per client a fresh
``nn.Module`` (built by ``pflrepro.models.build_model``, without the engine's
``speed_up`` surgery) loaded with the client's parameters, ``torch.optim.SGD``, a
``DataLoader`` over a ``TensorDataset`` of the run's data, ``loss.backward()`` and
``optimizer.step()``, the method's regulariser written into the loss (FedProx's
``μ/2‖w − w_g‖²``, SCAFFOLD's ``⟨c − c_i, w⟩``, ...), and its server step in plain
tensor arithmetic. The server steps of FedDF use ``torch.optim.Adam``,
``CosineAnnealingLR`` and ``clip_grad_norm_``; k-means and complete linkage come from
scikit-learn, as in the methods.

What the reference shares with the engine, so that both compute the same thing:

* the data (the engine's ``data.x``/``data.y``, already normalised) and the starting
  parameters (``engine.init_params``);
* every random choice, taken from the same seeded streams: the mini-batch indices
  (``engine.minibatches``, handed to the ``DataLoader`` as its ``batch_sampler``),
  FedeRiCo's neighbour draws, FedFomo's validation split, FedMix's gate initialisation,
  FedDF's held-out rows, PerFed-CKT's k-means seed (:mod:`pflrepro.seeding`);
* the hyperparameters (the method's parsed ``Hyper``).

So where a method is deterministic given those (all of them, with plain SGD and full
participation), the reference reaches the engine's parameters and predictions up to
float rounding; ``tests/unit/test_benchmarks.py`` checks that for every method.
Limits, asserted on construction: plain SGD without momentum (the reference keeps no
optimiser state across rounds, and plain SGD has none), one architecture, every
client in every round (``client_fraction`` 1), and FedFomo with all downloads (no
ε-greedy affinity bookkeeping).
"""

from __future__ import annotations

import copy
import math
from typing import Any, ClassVar

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

Params = dict[str, torch.Tensor]


class Reference:
    """Shared plumbing: the plain model, loaders, SGD loops, averaging."""

    #: Registry name of the method this class re-implements.
    name: ClassVar[str]

    def __init__(self, engine: Any, hp: Any) -> None:
        from pflrepro.models import build_model

        cfg = engine.cfg
        if cfg.optimizer != "sgd" or cfg.momentum != 0:
            raise ValueError("the reference loops use plain SGD (no optimiser state to keep)")
        if cfg.client_fraction != 1.0 or engine.heterogeneous:
            raise ValueError("the reference loops train every client, one architecture")
        self.e = engine
        self.hp = hp
        self.lr = float(cfg.lr)
        self.x, self.y = engine.data.x, engine.data.y
        self.dataset = TensorDataset(self.x, self.y)
        self.k_all = engine.num_clients
        self.sizes = [len(engine.data.train[k]) for k in range(self.k_all)]
        name, options = engine.archs[0]
        self.template = build_model(name, engine.in_shape, engine.data.num_classes,
                                    **dict(options)).to(engine.device)

    # ------------------------------------------------------------------ models
    def net(self, params: Params) -> nn.Module:
        """A fresh trainable module holding a copy of ``params``."""
        net = copy.deepcopy(self.template)
        with torch.no_grad():
            for n, p in net.named_parameters():
                p.copy_(params[n])
        return net

    @staticmethod
    def params(net: nn.Module) -> Params:
        """The module's parameters, detached copies."""
        return {n: p.detach().clone() for n, p in net.named_parameters()}

    def probs(self, params: Params, x: torch.Tensor) -> torch.Tensor:
        """Class probabilities of the model ``params`` on ``x``."""
        with torch.no_grad():
            return torch.softmax(self.net(params)(x), dim=-1)

    def mean_loss(self, params: Params, idx: torch.Tensor) -> float:
        """Mean cross-entropy of ``params`` on rows ``idx``."""
        with torch.no_grad():
            return float(F.cross_entropy(self.net(params)(self.x[idx]), self.y[idx]))

    # ------------------------------------------------------------------ data
    def steps(self, k: int, samples: int | None = None, epochs: int | None = None) -> int:
        """Local steps of client ``k``: epochs × batches of its pool."""
        cfg = self.e.cfg
        if epochs is None and cfg.local_steps > 0:
            return cfg.local_steps
        n = self.sizes[k] if samples is None else samples
        return (cfg.local_epochs if epochs is None else epochs) * math.ceil(n / cfg.batch_size)

    def batches(self, k: int, rnd: int, purpose: str = "local", steps: int | None = None,
                pool: torch.Tensor | None = None, batch_size: int | None = None
                ) -> list[list[int]]:
        """The seeded mini-batch indices (the engine's stream), as lists for a sampler."""
        if steps is None:
            steps = self.steps(k, None if pool is None else len(pool))
        out = self.e.minibatches(k, rnd, purpose, steps, pool, batch_size)
        return [b.tolist() for b in out]

    def loader(self, batches: list[list[int]], dataset: TensorDataset | None = None
               ) -> DataLoader:
        """A DataLoader yielding exactly ``batches`` of ``dataset`` (default: x, y)."""
        return DataLoader(self.dataset if dataset is None else dataset, batch_sampler=batches)

    def sgd(self, net: nn.Module, batches: list[list[int]],
            regulariser: Any = None, lr: float | None = None) -> float:
        """Plain SGD on the batches' mean cross-entropy (+ ``regulariser(net)``); mean loss."""
        opt = torch.optim.SGD(net.parameters(), lr=self.lr if lr is None else lr)
        total = 0.0
        for xb, yb in self.loader(batches):
            opt.zero_grad()
            data = F.cross_entropy(net(xb), yb)
            loss = data if regulariser is None else data + regulariser(net)
            loss.backward()
            opt.step()
            total += data.item()
        return total / max(len(batches), 1)

    @staticmethod
    def average(models: list[Params], weights: list[float]) -> Params:
        """Σ_i (weight_i / Σ weight) · model_i."""
        total = float(sum(weights))
        out = {n: torch.zeros_like(v) for n, v in models[0].items()}
        for m, w in zip(models, weights, strict=True):
            for n in out:
                out[n] += m[n] * (w / total)
        return out

    @staticmethod
    def proximal(anchor: Params, coef: float) -> Any:
        """The regulariser (coef/2) ‖w − anchor‖²."""
        def reg(net: nn.Module) -> torch.Tensor:
            return 0.5 * coef * sum(((p - anchor[n]) ** 2).sum()
                                    for n, p in net.named_parameters())
        return reg

    # ------------------------------------------------------------------ the method
    def init(self) -> None:
        """Set up the method's state."""
        raise NotImplementedError

    def round(self, rnd: int) -> np.ndarray:
        """Run round ``rnd``; each client's reported training loss."""
        raise NotImplementedError

    def predict(self, k: int, x: torch.Tensor, rnd: int) -> torch.Tensor:
        """Client ``k``'s class probabilities on ``x``."""
        raise NotImplementedError


REFERENCES: dict[str, type[Reference]] = {}


def register(cls: type[Reference]) -> type[Reference]:
    """Make ``cls`` the reference of method ``cls.name``."""
    REFERENCES[cls.name] = cls
    return cls


# ---------------------------------------------------------------------- FedAvg family
@register
class Local(Reference):
    """Every client trains its own model on its own data."""

    name = "local"

    def init(self) -> None:
        self.models = [self.e.init_params(k) for k in range(self.k_all)]

    def round(self, rnd: int) -> np.ndarray:
        losses = np.zeros(self.k_all)
        for k in range(self.k_all):
            net = self.net(self.models[k])
            losses[k] = self.sgd(net, self.batches(k, rnd))
            self.models[k] = self.params(net)
        return losses

    def predict(self, k: int, x: torch.Tensor, rnd: int) -> torch.Tensor:
        return self.probs(self.models[k], x)


@register
class Majority(Reference):
    """Each client predicts its most frequent training label (ties: the smallest)."""

    name = "majority"

    def init(self) -> None:
        from collections import Counter

        self.labels = []
        for k in range(self.k_all):
            counts = Counter(self.y[self.e.data.train[k]].tolist())
            top = max(counts.values(), default=0)
            self.labels.append(min((c for c, n in counts.items() if n == top), default=0))

    def round(self, rnd: int) -> np.ndarray:
        return np.full(self.k_all, np.nan)  # nothing trains

    def predict(self, k: int, x: torch.Tensor, rnd: int) -> torch.Tensor:
        return F.one_hot(torch.full((len(x),), self.labels[k]),
                         self.e.data.num_classes).float()


@register
class FedAvg(Reference):
    """Local steps from the global model, size-weighted average."""

    name = "fedavg"

    def init(self) -> None:
        self.glob = self.e.init_params()

    def regulariser(self, k: int) -> Any:
        """The local objective's extra term (none for FedAvg)."""
        return None

    def round(self, rnd: int) -> np.ndarray:
        losses = np.zeros(self.k_all)
        trained = []
        for k in range(self.k_all):
            net = self.net(self.glob)
            losses[k] = self.sgd(net, self.batches(k, rnd), self.regulariser(k))
            trained.append(self.params(net))
        self.glob = self.average(trained, self.sizes)
        return losses

    def predict(self, k: int, x: torch.Tensor, rnd: int) -> torch.Tensor:
        return self.probs(self.glob, x)


class FineTuned:
    """Prediction of FedAvg+ / FedProx-FT: a fresh SGD epoch from the global model."""

    def predict(self, k: int, x: torch.Tensor, rnd: int) -> torch.Tensor:
        net = self.net(self.glob)  # type: ignore[attr-defined]
        steps = self.steps(k, epochs=self.hp.finetune_epochs)  # type: ignore[attr-defined]
        self.sgd(net, self.batches(k, rnd, "finetune", steps))  # type: ignore[attr-defined]
        return self.probs(self.params(net), x)  # type: ignore[attr-defined]


@register
class FedAvgPlus(FineTuned, FedAvg):
    """FedAvg, fine-tuned per client before predicting."""

    name = "fedavg_plus"


@register
class FedProx(FedAvg):
    """FedAvg with (μ/2)‖w − w_g‖² in the local loss."""

    name = "fedprox"

    def regulariser(self, k: int) -> Any:
        return self.proximal(self.glob, float(self.hp.mu))


@register
class FedProxFT(FineTuned, FedProx):
    """FedProx, fine-tuned per client before predicting."""

    name = "fedprox_ft"


@register
class Scaffold(Reference):
    """Local loss + ⟨c − c_i, w⟩; option II controls; uniform server step."""

    name = "scaffold"

    def init(self) -> None:
        self.glob = self.e.init_params()
        self.c = {n: torch.zeros_like(v) for n, v in self.glob.items()}
        self.ci = [{n: torch.zeros_like(v) for n, v in self.glob.items()}
                   for _ in range(self.k_all)]

    def round(self, rnd: int) -> np.ndarray:
        losses = np.zeros(self.k_all)
        x, c = self.glob, self.c
        ys, dcs = [], []
        for k in range(self.k_all):
            corr = {n: c[n] - self.ci[k][n] for n in c}

            def reg(net: nn.Module, corr: Params = corr) -> torch.Tensor:
                return sum((p * corr[n]).sum() for n, p in net.named_parameters())

            net = self.net(x)
            batches = self.batches(k, rnd)
            losses[k] = self.sgd(net, batches, reg)
            y = self.params(net)
            new = {n: self.ci[k][n] - c[n] + (x[n] - y[n]) / (len(batches) * self.lr)
                   for n in x}
            dcs.append({n: new[n] - self.ci[k][n] for n in x})
            self.ci[k] = new
            ys.append(y)
        ones = [1.0] * self.k_all
        dy = self.average([{n: y[n] - x[n] for n in x} for y in ys], ones)
        dc = self.average(dcs, ones)
        self.glob = {n: x[n] + self.hp.server_lr * dy[n] for n in x}
        self.c = {n: c[n] + dc[n] for n in c}
        return losses

    def predict(self, k: int, x: torch.Tensor, rnd: int) -> torch.Tensor:
        return self.probs(self.glob, x)


@register
class Ditto(FedAvg):
    """FedAvg's global model plus personal models with (λ/2)‖v − w^t‖²."""

    name = "ditto"

    def init(self) -> None:
        super().init()
        self.personal = [{n: v.clone() for n, v in self.glob.items()}
                         for _ in range(self.k_all)]

    def round(self, rnd: int) -> np.ndarray:
        anchor = self.glob
        super().round(rnd)
        losses = np.zeros(self.k_all)
        for k in range(self.k_all):
            net = self.net(self.personal[k])
            steps = self.hp.personal_steps or None
            losses[k] = self.sgd(net, self.batches(k, rnd, "personal", steps),
                                 self.proximal(anchor, float(self.hp.lam)))
            self.personal[k] = self.params(net)
        return losses

    def predict(self, k: int, x: torch.Tensor, rnd: int) -> torch.Tensor:
        return self.probs(self.personal[k], x)


# ---------------------------------------------------------------------- mixtures
@register
class APFL(Reference):
    """w on its loss, v on the mixed model's, α by ⟨∇f(v̄), v − w⟩."""

    name = "apfl"

    def init(self) -> None:
        self.glob = self.e.init_params()
        self.personal = [{n: v.clone() for n, v in self.glob.items()}
                         for _ in range(self.k_all)]
        self.alpha = [float(self.hp.alpha)] * self.k_all

    def round(self, rnd: int) -> np.ndarray:
        losses = np.zeros(self.k_all)
        trained = []
        for k in range(self.k_all):
            w_net, v_net = self.net(self.glob), self.net(self.personal[k])
            opt_w = torch.optim.SGD(w_net.parameters(), lr=self.lr)
            opt_v = torch.optim.SGD(v_net.parameters(), lr=self.lr)
            batches = self.batches(k, rnd)
            total = 0.0
            for xb, yb in self.loader(batches):
                opt_w.zero_grad()
                opt_v.zero_grad()
                F.cross_entropy(w_net(xb), yb).backward()
                a = torch.tensor(self.alpha[k], requires_grad=True)
                mixed = {n: a * v + (1 - a) * w.detach() for (n, v), w in
                         zip(v_net.named_parameters(), w_net.parameters(), strict=True)}
                loss = F.cross_entropy(torch.func.functional_call(self.template, mixed, (xb,)),
                                       yb)
                loss.backward()
                opt_w.step()
                opt_v.step()
                if self.hp.adaptive_alpha:
                    step = self.alpha[k] - self.hp.alpha_lr * float(a.grad)
                    self.alpha[k] = min(max(step, 0.0), 1.0)
                total += loss.item()
            losses[k] = total / max(len(batches), 1)
            trained.append(self.params(w_net))
            self.personal[k] = self.params(v_net)
        self.glob = self.average(trained, self.sizes)
        return losses

    def predict(self, k: int, x: torch.Tensor, rnd: int) -> torch.Tensor:
        a = self.alpha[k]
        return self.probs({n: a * self.personal[k][n] + (1 - a) * self.glob[n]
                           for n in self.glob}, x)


@register
class FedEM(Reference):
    """E-step per client, q-weighted M-step per component, size-weighted average."""

    name = "fedem"

    def init(self) -> None:
        self.m_all = self.hp.components
        self.comps = [self.e.init_params(client=m) for m in range(self.m_all)]
        self.pi = torch.full((self.k_all, self.m_all), 1.0 / self.m_all, dtype=torch.float64)

    def round(self, rnd: int) -> np.ndarray:
        losses = np.zeros(self.k_all)
        qs = []
        for k in range(self.k_all):
            idx = self.e.data.train[k]
            with torch.no_grad():
                ell = torch.stack([F.cross_entropy(self.net(c)(self.x[idx]), self.y[idx],
                                                   reduction="none") for c in self.comps],
                                  dim=1).double()
            q = torch.softmax(self.pi[k].log() - ell, dim=1)
            self.pi[k] = q.mean(dim=0)
            qs.append(q)
        new = []
        for m in range(self.m_all):
            trained = []
            for k in range(self.k_all):
                weight = torch.zeros(len(self.x))
                weight[self.e.data.train[k]] = qs[k][:, m].float()
                net = self.net(self.comps[m])
                opt = torch.optim.SGD(net.parameters(), lr=self.lr)
                batches = self.batches(k, rnd, f"fedem_{m}")
                total = 0.0
                for xb, yb, wb in self.loader(batches, TensorDataset(self.x, self.y, weight)):
                    opt.zero_grad()
                    loss = (F.cross_entropy(net(xb), yb, reduction="none") * wb).sum() / len(yb)
                    loss.backward()
                    opt.step()
                    total += loss.item()
                losses[k] += total / max(len(batches), 1)
                trained.append(self.params(net))
            new.append(self.average(trained, self.sizes))
        self.comps = new
        return losses

    def predict(self, k: int, x: torch.Tensor, rnd: int) -> torch.Tensor:
        return sum(float(self.pi[k, m]) * self.probs(c, x) for m, c in enumerate(self.comps))


# ---------------------------------------------------------------------- meta-learning
@register
class PerFedAvg(Reference):
    """MAML steps (FO, or HF with an exact Hessian-vector product); α-step personalisation."""

    name = "per_fedavg"

    def init(self) -> None:
        self.glob = self.e.init_params()

    def round(self, rnd: int) -> np.ndarray:
        alpha = float(self.hp.alpha)
        hf = self.hp.variant == "hf"
        losses = np.zeros(self.k_all)
        trained = []
        for k in range(self.k_all):
            net = self.net(self.glob)
            opt = torch.optim.SGD(net.parameters(), lr=self.lr)
            outer = self.batches(k, rnd, "local")
            steps = len(outer)
            loaders = [self.loader(outer), self.loader(self.batches(k, rnd, "maml_inner", steps))]
            if hf:
                loaders.append(self.loader(self.batches(k, rnd, "maml_hessian", steps)))
            total = 0.0
            for (xo, yo), (xi, yi), *rest in zip(*loaders, strict=True):
                params = list(net.parameters())
                g = torch.autograd.grad(F.cross_entropy(net(xi), yi), params)
                temp = {n: p.detach() - alpha * gi
                        for (n, p), gi in zip(net.named_parameters(), g, strict=True)}
                temp = {n: t.requires_grad_(True) for n, t in temp.items()}
                loss = F.cross_entropy(torch.func.functional_call(self.template, temp, (xo,)), yo)
                direction = torch.autograd.grad(loss, list(temp.values()))
                if hf:
                    xh, yh = rest[0]
                    gh = torch.autograd.grad(F.cross_entropy(net(xh), yh), params,
                                             create_graph=True)
                    dot = sum((a * d).sum() for a, d in zip(gh, direction, strict=True))
                    hv = torch.autograd.grad(dot, params)
                    direction = tuple(d - alpha * h for d, h in zip(direction, hv, strict=True))
                opt.zero_grad()
                for p, d in zip(params, direction, strict=True):
                    p.grad = d.detach().clone()
                opt.step()
                total += loss.item()
            losses[k] = total / max(steps, 1)
            trained.append(self.params(net))
        weights = [1.0] * self.k_all if self.hp.aggregation == "uniform" else self.sizes
        self.glob = self.average(trained, weights)
        return losses

    def predict(self, k: int, x: torch.Tensor, rnd: int) -> torch.Tensor:
        net = self.net(self.glob)
        self.sgd(net, self.batches(k, rnd, "personalise", self.hp.personal_steps),
                 lr=float(self.hp.alpha))
        return self.probs(self.params(net), x)


# ---------------------------------------------------------------------- clustering
@register
class HypCluster(Reference):
    """Each client trains the hypothesis of lowest training loss; average per hypothesis."""

    name = "hypcluster"

    def init(self) -> None:
        self.hyps = [self.e.init_params() if m == 0 else self.e.init_params(client=m)
                     for m in range(self.hp.hypotheses)]

    def choice(self, k: int) -> int:
        """argmin_m of the client's training loss (NaN counts as +∞, ties: lowest m)."""
        scores = [self.mean_loss(h, self.e.data.train[k]) for h in self.hyps]
        scores = [math.inf if math.isnan(s) else s for s in scores]
        return int(np.argmin(scores))

    def round(self, rnd: int) -> np.ndarray:
        losses = np.zeros(self.k_all)
        picks = [self.choice(k) for k in range(self.k_all)]
        trained = []
        for k in range(self.k_all):
            net = self.net(self.hyps[picks[k]])
            losses[k] = self.sgd(net, self.batches(k, rnd))
            trained.append(self.params(net))
        for m in range(len(self.hyps)):
            members = [k for k in range(self.k_all) if picks[k] == m]
            if members:
                self.hyps[m] = self.average([trained[k] for k in members],
                                            [self.sizes[k] for k in members])
        return losses

    def predict(self, k: int, x: torch.Tensor, rnd: int) -> torch.Tensor:
        return self.probs(self.hyps[self.choice(k)], x)


@register
class ClusteredFL(Reference):
    """Cluster models; bipartition by update cosine when ε₁/ε₂ say so."""

    name = "clustered_fl"

    def init(self) -> None:
        self.models = [self.e.init_params()]
        self.cluster = [0] * self.k_all

    def round(self, rnd: int) -> np.ndarray:
        from sklearn.cluster import AgglomerativeClustering

        losses = np.zeros(self.k_all)
        deltas = []
        for k in range(self.k_all):
            start = self.models[self.cluster[k]]
            net = self.net(start)
            losses[k] = self.sgd(net, self.batches(k, rnd))
            end = self.params(net)
            deltas.append({n: end[n] - start[n] for n in start})
        flat = torch.stack([torch.cat([d[n].reshape(-1).double() for n in sorted(d)])
                            for d in deltas])
        parents = list(range(len(self.models)))
        if rnd > self.hp.warmup_rounds:
            for c in range(len(parents)):
                members = [k for k in range(self.k_all) if self.cluster[k] == c]
                if len(members) < self.hp.min_cluster_size:
                    continue
                upd = flat[members]
                w = torch.tensor([self.sizes[k] for k in members], dtype=torch.float64)
                mean_norm = float((w / w.sum() @ upd).norm())
                max_norm = float(upd.norm(dim=1).max())
                if not (mean_norm < self.hp.eps1 and max_norm > self.hp.eps2):
                    continue
                unit = upd / upd.norm(dim=1, keepdim=True).clamp_min(1e-300)
                dist = (1.0 - unit @ unit.T).clamp_min(0.0).numpy()
                np.fill_diagonal(dist, 0.0)
                labels = AgglomerativeClustering(n_clusters=2, metric="precomputed",
                                                 linkage="complete").fit(dist).labels_
                for k, lab in zip(members, labels, strict=True):
                    if lab != labels[0]:
                        self.cluster[k] = len(parents)
                parents.append(c)
        new = []
        for c, parent in enumerate(parents):
            members = [k for k in range(self.k_all) if self.cluster[k] == c]
            mean = self.average([deltas[k] for k in members], [self.sizes[k] for k in members])
            new.append({n: self.models[parent][n] + mean[n] for n in mean})
        self.models = new
        return losses

    def predict(self, k: int, x: torch.Tensor, rnd: int) -> torch.Tensor:
        return self.probs(self.models[self.cluster[k]], x)


@register
class PerFedCKT(Reference):
    """Co-distillation towards the nearest k-means centroid of soft decisions."""

    name = "perfedckt"

    def init(self) -> None:
        assert self.e.data.public is not None
        self.public = self.e.data.public
        self.models = [self.e.init_params(k) for k in range(self.k_all)]
        self.centroids: torch.Tensor | None = None

    def soft(self, params: Params) -> torch.Tensor:
        """Soft decisions on the public set."""
        return self.probs(params, self.public)

    def round(self, rnd: int) -> np.ndarray:
        from sklearn.cluster import KMeans

        from pflrepro.seeding import NO_CLIENT, derive_seed

        losses = np.zeros(self.k_all)
        rows = torch.arange(len(self.public))
        for k in range(self.k_all):
            net = self.net(self.models[k])
            batches = self.batches(k, rnd)
            if self.centroids is None or self.hp.lam == 0:
                losses[k] = self.sgd(net, batches)
            else:
                gaps = ((self.centroids - self.soft(self.models[k])) ** 2).flatten(1).sum(1)
                target = self.centroids[int(gaps.argmin())]
                pub = self.batches(k, rnd, "public", len(batches), rows,
                                   self.hp.public_batch or None)
                opt = torch.optim.SGD(net.parameters(), lr=self.lr)
                total = 0.0
                for (xb, yb), (xp, tp) in zip(
                        self.loader(batches),
                        self.loader(pub, TensorDataset(self.public, target)), strict=True):
                    opt.zero_grad()
                    private = F.cross_entropy(net(xb), yb)
                    kl = -(tp * net(xp).log_softmax(-1)).sum(-1).mean()
                    (private + self.hp.lam * kl).backward()
                    opt.step()
                    total += private.item()
                losses[k] = total / max(len(batches), 1)
            self.models[k] = self.params(net)
        sent = torch.stack([self.soft(m) for m in self.models])
        seed = derive_seed(self.e.seed, rnd, NO_CLIENT, "kmeans")
        km = KMeans(n_clusters=self.hp.clusters, n_init=10, random_state=seed % 2**32)
        km.fit(sent.reshape(self.k_all, -1).double().numpy())
        self.centroids = torch.from_numpy(km.cluster_centers_).float().reshape(
            self.hp.clusters, *sent.shape[1:])
        return losses

    def predict(self, k: int, x: torch.Tensor, rnd: int) -> torch.Tensor:
        return self.probs(self.models[k], x)


# ---------------------------------------------------------------------- peer mixing
def _flat(params: Params) -> torch.Tensor:
    return torch.cat([params[n].reshape(-1).double() for n in sorted(params)])


@register
class FedAMP(Reference):
    """Cloud models u_i = Σ_j ξ_ij w_j; local loss + (λ/2α)‖w − u_i‖²."""

    name = "fedamp"

    def init(self) -> None:
        if self.hp.init == "shared":
            start = self.e.init_params()
            self.models = [{n: v.clone() for n, v in start.items()} for _ in range(self.k_all)]
        else:
            self.models = [self.e.init_params(k) for k in range(self.k_all)]

    def attention(self, flat: torch.Tensor) -> torch.Tensor:
        """FedAMP's ξ (eq. 5) from the flattened models."""
        x = torch.stack([((flat - flat[i]) ** 2).sum(1) for i in range(len(flat))])
        if self.hp.distance == "mean":
            x = x / flat.shape[1]
        xi = self.hp.alpha * torch.exp(-x / self.hp.sigma) / self.hp.sigma
        xi.fill_diagonal_(0.0)
        return xi + torch.diag(1.0 - xi.sum(1))

    def round(self, rnd: int) -> np.ndarray:
        xi = self.attention(torch.stack([_flat(m) for m in self.models]))
        clouds = [{n: sum(float(xi[i, j]) * self.models[j][n].double()
                          for j in range(self.k_all)).float() for n in self.models[0]}
                  for i in range(self.k_all)]
        losses = np.zeros(self.k_all)
        coef = self.hp.lam / self.hp.alpha
        for k in range(self.k_all):
            net = self.net(clouds[k])
            losses[k] = self.sgd(net, self.batches(k, rnd),
                                 self.proximal(clouds[k], coef) if self.hp.lam > 0 else None)
            self.models[k] = self.params(net)
        return losses

    def predict(self, k: int, x: torch.Tensor, rnd: int) -> torch.Tensor:
        return self.probs(self.models[k], x)


@register
class HeurFedAMP(FedAMP):
    """FedAMP with ξ_ii fixed and a softmax of σ·cosine over the others (eq. 8)."""

    name = "heurfedamp"

    def attention(self, flat: torch.Tensor) -> torch.Tensor:
        unit = flat / flat.norm(dim=1, keepdim=True).clamp_min(1e-8)
        logits = self.hp.sigma * (unit @ unit.T)
        logits.fill_diagonal_(-math.inf)
        a = self.hp.self_attention
        return (1 - a) * torch.softmax(logits, dim=1) + a * torch.eye(len(flat),
                                                                      dtype=flat.dtype)


@register
class FedFomo(Reference):
    """Validation-scored first-order mixing from φ_i, then local steps on the rest."""

    name = "fedfomo"

    def init(self) -> None:
        from pflrepro.seeding import SETUP_ROUND, torch_generator

        if self.hp.downloads not in (-1, self.k_all - 1):
            raise ValueError("the FedFomo reference downloads every other model")
        self.val, self.fit = [], []
        for k in range(self.k_all):
            idx = self.e.data.train[k]
            n_val = int(self.hp.val_fraction * len(idx) + 0.5)
            order = torch.randperm(len(idx), generator=torch_generator(
                self.e.seed, SETUP_ROUND, k, "fedfomo_val"))
            self.val.append(idx[order[:n_val]].sort().values)
            self.fit.append(idx[order[n_val:]].sort().values)
        if self.hp.init == "shared":
            start = self.e.init_params()
            self.models = [{n: v.clone() for n, v in start.items()} for _ in range(self.k_all)]
        else:
            self.models = [self.e.init_params(k) for k in range(self.k_all)]
        self.previous = [{n: v.clone() for n, v in m.items()} for m in self.models]

    def distance(self, a: Params, b: Params) -> float:
        """‖a − b‖: l1 or l2 over all parameters."""
        d = _flat(a) - _flat(b)
        return float(d.abs().sum()) if self.hp.distance == "l1" else float(d.norm())

    def round(self, rnd: int) -> np.ndarray:
        old = self.models
        previous = self.hp.reference == "previous"
        mixed = []
        for i in range(self.k_all):
            ref = self.previous[i] if previous else old[i]
            cands = {j: old[j] for j in range(self.k_all) if j != i or previous}
            ref_loss = self.mean_loss(ref, self.val[i])
            scores = {}
            for j, m in cands.items():
                dist = self.distance(m, ref)
                scores[j] = (ref_loss - self.mean_loss(m, self.val[i])) / dist if dist > 0 else 0.0
            pos = {j: max(0.0, s) for j, s in scores.items()}
            total = sum(pos.values())
            new = {n: v.clone() for n, v in ref.items()}
            for j, s in pos.items():
                w = s / total if total > 0 else 0.0
                if w != 0.0:
                    for n in new:
                        new[n] += w * (cands[j][n] - ref[n])
            if previous:
                self.previous[i] = new
            mixed.append(new)
        losses = np.zeros(self.k_all)
        self.models = []
        for k in range(self.k_all):
            net = self.net(mixed[k])
            losses[k] = self.sgd(net, self.batches(k, rnd, pool=self.fit[k]))
            self.models.append(self.params(net))
        return losses

    def predict(self, k: int, x: torch.Tensor, rnd: int) -> torch.Tensor:
        return self.probs(self.models[k], x)


@register
class FedeRiCo(Reference):
    """Owner-only warm-up rounds, then ε-greedy neighbours, EMA loss table and a
    w_ik-weighted M-step over the users' batches."""

    name = "federico"

    def init(self) -> None:
        hp = self.hp
        if hp.mstep != "epoch" or hp.table_start != "all_to_all" or hp.neighbors == 0:
            raise ValueError("the FedeRiCo reference writes mstep epoch, an all-to-all "
                             "start and M > 0")
        self.models = [self.e.init_params(k) for k in range(self.k_all)]
        self.start_table(solo=hp.warmup_rounds > 0)

    def start_table(self, solo: bool) -> None:
        """All-to-all losses; with ``solo`` (the warm-up) the own ones, +inf elsewhere."""
        inf = float("inf")
        self.table = torch.tensor([[self.loss(j, i) if not solo or i == j else inf
                                    for j in range(self.k_all)]
                                   for i in range(self.k_all)], dtype=torch.float64)
        self.last = self.table.clone()
        self.weights = torch.softmax(-self.table, dim=1)

    def loss(self, j: int, i: int) -> float:
        """ℓ_ij: model j on client i's training data (mean, or summed)."""
        mean = self.mean_loss(self.models[j], self.e.data.train[i])
        return mean * self.sizes[i] if self.hp.estep_loss == "sum" else mean

    def neighbours(self, rnd: int) -> list[list[int]]:
        from pflrepro.seeding import numpy_generator

        m = min(self.hp.neighbors, self.k_all - 1)
        out = []
        for i in range(self.k_all):
            rng = numpy_generator(self.e.seed, rnd, i, "federico_neighbours")
            others = np.array([j for j in range(self.k_all) if j != i])
            if rng.random() < self.hp.epsilon:
                out.append(sorted(rng.choice(others, size=m, replace=False).tolist()))
            else:
                shuffled = rng.permutation(others)
                top = shuffled[np.argsort(-self.weights[i, shuffled].numpy(), kind="stable")[:m]]
                out.append(sorted(top.tolist()))
        return out

    def round(self, rnd: int) -> np.ndarray:
        warm = rnd <= self.hp.warmup_rounds  # owner-only rounds, then the table starts
        nbrs = [[] for _ in range(self.k_all)] if warm else self.neighbours(rnd)
        used = [sorted([i, *nbrs[i]]) for i in range(self.k_all)]
        for i in range(self.k_all):
            for j in used[i]:
                fresh = self.loss(j, i)
                if self.hp.loss_tracking == "ema":
                    b = self.hp.beta
                    self.table[i, j] = (1 - b) * self.table[i, j] + b * fresh
                self.last[i, j] = fresh
        if self.hp.loss_tracking != "ema":
            self.table = self.table + self.last
        self.weights = torch.softmax(-self.table, dim=1)
        w = self.weights.float()
        losses = np.zeros(self.k_all)
        new = []
        for k in range(self.k_all):
            users = [i for i in range(self.k_all) if k in used[i]]
            steps = self.steps(k)
            loaders = [self.loader(self.batches(i, rnd, "local" if i == k
                                                else f"federico_mstep_{k}", steps))
                       for i in users]
            net = self.net(self.models[k])
            opt = torch.optim.SGD(net.parameters(), lr=self.lr)
            total = 0.0
            for per_user in zip(*loaders, strict=True):
                opt.zero_grad()
                loss = sum(float(w[i, k]) * F.cross_entropy(net(xb), yb)
                           for i, (xb, yb) in zip(users, per_user, strict=True))
                loss.backward()
                opt.step()
                total += loss.item()
            losses[k] = total / steps
            new.append(self.params(net))
        self.models = new
        if rnd == self.hp.warmup_rounds:
            self.start_table(solo=False)
        return losses

    def predict(self, k: int, x: torch.Tensor, rnd: int) -> torch.Tensor:
        w = self.weights[k].float()
        return sum(float(w[j]) * self.probs(m, x) for j, m in enumerate(self.models))


# ---------------------------------------------------------------------- distillation
@register
class FedDF(FedAvg):
    """FedAvg, then Adam distillation of the average towards the clients' ensemble."""

    name = "feddf"

    def round(self, rnd: int) -> np.ndarray:
        from pflrepro.seeding import NO_CLIENT, SETUP_ROUND, torch_generator

        public = self.e.data.public
        assert public is not None
        hp = self.hp
        losses = np.zeros(self.k_all)
        trained, logits = [], []
        for k in range(self.k_all):
            net = self.net(self.glob)
            losses[k] = self.sgd(net, self.batches(k, rnd))
            trained.append(self.params(net))
            with torch.no_grad():
                logits.append(net(public))
        teacher = torch.stack(logits).mean(0).softmax(-1)
        student = self.net(self.average(trained, self.sizes))
        if hp.server_steps == 0:
            self.glob = self.params(student)
            return losses
        n = len(public)
        if hp.early_stopping == "none":
            rows, held = torch.arange(n), torch.arange(0)
        else:
            n_val = min(n - 1, max(1, round(hp.val_fraction * n)))
            perm = torch.randperm(n, generator=torch_generator(self.e.seed, SETUP_ROUND,
                                                               NO_CLIENT, "distill-val"))
            rows, held = perm[n_val:].sort().values, perm[:n_val].sort().values
        batches = self.e.minibatches(NO_CLIENT, rnd, "distill-0", hp.server_steps, pool=rows,
                                     batch_size=hp.public_batch or None)
        opt = torch.optim.Adam(student.parameters(), lr=hp.server_lr)
        sched = (torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=hp.server_steps)
                 if hp.lr_schedule == "cosine" else None)
        best, best_score, best_step = None, -math.inf, 0
        data = TensorDataset(public, teacher)
        for s, (xb, tb) in enumerate(self.loader([b.tolist() for b in batches], data)):
            opt.zero_grad()
            (-(tb * student(xb).log_softmax(-1)).sum(-1).mean()).backward()
            if hp.clip_norm > 0:
                nn.utils.clip_grad_norm_(student.parameters(), hp.clip_norm)
            opt.step()
            if sched is not None:
                sched.step()
            done = s + 1
            if hp.early_stopping == "none" or done % hp.eval_every:
                continue
            with torch.no_grad():
                out = student(public[held])
                t = teacher[held]
                if hp.early_stopping == "agreement":
                    score = float((out.argmax(-1) == t.argmax(-1)).double().mean())
                else:
                    score = -float((t * (t.clamp_min(1e-12).log()
                                         - out.log_softmax(-1))).sum(-1).mean())
            if score > best_score:
                best, best_score, best_step = self.params(student), score, done
            if done - best_step >= hp.patience:
                break
        self.glob = self.params(student) if best is None else best
        return losses


@register
class FedMix(Reference):
    """K experts weighted by q(z | y), a gate MLP per client on soft targets q(· | y)."""

    name = "fedmix"

    def init(self) -> None:
        from pflrepro.seeding import SETUP_ROUND, torch_generator

        hp = self.hp
        if hp.objective != "bound" or hp.posterior != "label" or hp.gate != "learned" \
                or hp.experts < 2:
            raise ValueError("the FedMix reference writes the bound, the global q(z | y) "
                             "and learned gates, K >= 2")
        self.kk = hp.experts
        self.experts = [self.e.init_params(client=k) for k in range(self.kk)]
        classes = self.e.data.num_classes
        self.q = torch.full((classes, self.kk), 1.0 / self.kk, dtype=torch.float64)
        features = int(np.prod(self.x.shape[1:]))
        self.gates = []
        for s in range(self.k_all):
            gen = torch_generator(self.e.seed, SETUP_ROUND, s, "fedmix_gate")
            layers: list[nn.Module] = [nn.Flatten()]
            fan_in = features
            if hp.gate_hidden > 0:
                layers += [nn.Linear(features, hp.gate_hidden), nn.ReLU()]
                fan_in = hp.gate_hidden
            layers.append(nn.Linear(fan_in, self.kk))
            gate = nn.Sequential(*layers)
            with torch.no_grad():  # nn.Linear's uniform ±1/√fan_in, drawn from the stream
                for lin in (m for m in gate if isinstance(m, nn.Linear)):
                    bound = 1.0 / math.sqrt(lin.in_features)
                    lin.weight.copy_((torch.rand(lin.weight.shape, generator=gen) * 2 - 1)
                                     * bound)
                    lin.bias.copy_((torch.rand(lin.bias.shape, generator=gen) * 2 - 1) * bound)
            self.gates.append(gate.to(self.e.device))

    def round(self, rnd: int) -> np.ndarray:
        classes = self.e.data.num_classes
        q32 = self.q.float()
        mass = torch.stack([q32[self.y[self.e.data.train[s]]].double().sum(0)
                            for s in range(self.k_all)])  # (S, K)
        sums = torch.zeros(classes, self.kk, dtype=torch.float64)
        counts = torch.zeros(classes, dtype=torch.float64)
        losses = np.zeros(self.k_all)
        trained = []
        for s in range(self.k_all):
            nets = [self.net(w) for w in self.experts]
            opts = [torch.optim.SGD(n.parameters(), lr=self.lr) for n in nets]
            gate = self.gates[s]
            gate_opt = torch.optim.SGD(gate.parameters(), lr=self.lr)
            batches = self.batches(s, rnd)
            running = [0.0] * self.kk
            for xb, yb in self.loader(batches):
                r = q32[yb]
                for k in range(self.kk):
                    w = r[:, k]
                    if mass[s, k] <= 0 or not bool((w != 0).any()):
                        continue
                    opts[k].zero_grad()
                    if bool((w == 1).all()):
                        loss = F.cross_entropy(nets[k](xb), yb)
                    else:
                        loss = (F.cross_entropy(nets[k](xb), yb, reduction="none")
                                * w).sum() / len(yb)
                    loss.backward()
                    opts[k].step()
                    running[k] += loss.item()
                gate_opt.zero_grad()
                (-(r * gate(xb).log_softmax(-1)).sum(1).mean()).backward()
                gate_opt.step()
            losses[s] = sum(v / max(len(batches), 1) for v in running)
            idx = self.e.data.train[s]
            x, y = self.x[idx], self.y[idx]
            with torch.no_grad():
                joint = torch.stack([n(x).log_softmax(-1).gather(1, y[:, None])[:, 0]
                                     for n in nets], 1) + gate(x).log_softmax(-1)
            sums.index_add_(0, y, joint.double())
            counts += torch.bincount(y, minlength=classes).double()
            trained.append([self.params(n) for n in nets])
        for k in range(self.kk):
            givers = [s for s in range(self.k_all) if mass[s, k] > 0]
            if givers:
                self.experts[k] = self.average([trained[s][k] for s in givers],
                                               [float(mass[s, k]) for s in givers])
        seen = counts > 0
        self.q[seen] = torch.softmax(sums[seen] / counts[seen, None] / self.hp.beta, dim=1)
        return losses

    def predict(self, k: int, x: torch.Tensor, rnd: int) -> torch.Tensor:
        with torch.no_grad():
            gate = self.gates[k](x).softmax(-1)
        return sum(gate[:, j:j + 1] * self.probs(w, x) for j, w in enumerate(self.experts))
