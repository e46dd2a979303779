"""What a local step needs, below the engine: data, device, batches, models, threads.

:class:`StepContext` holds the run's data, training settings, seed and device, its
architectures and client threads and the optimiser, and it draws the seeded
mini-batch streams (seed, round, client, purpose). Local training
(:mod:`pflrepro.training.local_training`), the objectives
(:mod:`pflrepro.training.objective`) and the distillation pass
(:mod:`pflrepro.training.distillation`) take a context and never the engine: the
engine (:mod:`pflrepro.training.engine`) builds one per run, owns the round loop and
hands the context down, so no module below it imports it.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from pflrepro.data.federated import FederatedData
from pflrepro.seeding import torch_generator
from pflrepro.training.architectures import Architectures
from pflrepro.training.optim import Optimizer, Params
from pflrepro.training.params import grad_leaves
from pflrepro.training.settings import TrainingConfig
from pflrepro.training.threads import ClientThreads

__all__ = ["StepContext"]


class StepContext:
    """A run's data, settings, seed, device, models, threads and optimiser for local steps."""

    def __init__(self, data: FederatedData, cfg: TrainingConfig, seed: int,
                 device: torch.device, architectures: Architectures, threads: ClientThreads,
                 optimizer: Optimizer, in_shape: tuple[int, int, int]) -> None:
        self.data = data
        self.cfg = cfg
        self.seed = int(seed)
        self.device = device
        self.architectures = architectures
        #: One model instance per architecture (``functional_call`` runs any parameters
        #: of their shape); the calling thread's copies come from :meth:`net_for`.
        self.models: list[nn.Module] = architectures.models
        self.threads = threads
        self.optimizer = optimizer
        self.in_shape = in_shape

    def n_train(self, client: int) -> int:
        """Training-set size of ``client``."""
        return len(self.data.train[client])

    def steps_per_round(self, client: int, epochs: int | None = None,
                        samples: int | None = None) -> int:
        """Local steps of ``client`` in one round (``local_steps`` or epochs × batches).

        ``samples``: the size of the pool it trains on, if not its whole training set.
        """
        if epochs is None and self.cfg.local_steps > 0:
            return self.cfg.local_steps
        epochs = self.cfg.local_epochs if epochs is None else epochs
        n = self.n_train(client) if samples is None else samples
        return epochs * math.ceil(n / self.cfg.batch_size)

    def minibatches(self, client: int, rnd: int, purpose: str, steps: int,
                    pool: torch.Tensor | None = None,
                    batch_size: int | None = None) -> list[torch.Tensor]:
        """``steps`` mini-batches of ``client``'s training indices (or of ``pool``).

        Batches are consecutive slices of a stream of seeded permutations (epoch after
        epoch), so every sample is seen once per epoch; the stream depends only on
        (seed, round, client, purpose) and the pool's size. ``pool`` (indices) replaces
        the client's training set, e.g. all but a held-out part or the public set's
        rows; ``batch_size`` replaces ``training.batch_size`` (capped by the pool).
        """
        if steps <= 0:
            return []
        idx = self.data.train[client] if pool is None else pool
        n = len(idx)
        bs = min(batch_size or self.cfg.batch_size, n)
        gen = torch_generator(self.seed, rnd, client, purpose)
        need = steps * bs
        perms = [torch.randperm(n, generator=gen) for _ in range(math.ceil(need / n))]
        order = torch.cat(perms)[:need].to(self.device)
        return list(idx[order].split(bs))

    def arch_index(self, params: Params, stacked: bool = False) -> int:
        """The architecture ``params`` belong to (:meth:`Architectures.index`)."""
        return self.architectures.index(params, stacked)

    def net_for(self, params: Params) -> nn.Module:
        """The calling thread's instance of the model ``params`` belong to."""
        return self.threads.net_of(self.arch_index(params))

    def loss_and_grad(self, params: Params, idx: torch.Tensor,
                      sample_weight: torch.Tensor | None = None) -> tuple[float, Params]:
        """Loss of ``params`` on samples ``idx`` and its gradient.

        With ``sample_weight`` the loss is ``Σ_s weight_s · ℓ_s`` (weights given per
        sample); without, the mean over the batch.
        """
        p = grad_leaves(params)
        with torch.enable_grad():
            out = functional_call(self.net_for(p), p, (self.data.x[idx],))
            if sample_weight is None:
                loss = F.cross_entropy(out, self.data.y[idx])
            else:
                loss = (F.cross_entropy(out, self.data.y[idx], reduction="none")
                        * sample_weight).sum()
            grads = torch.autograd.grad(loss, list(p.values()))
        return float(loss.detach()), dict(zip(p.keys(), grads, strict=True))
