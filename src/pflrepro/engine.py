"""The engine: owns the round loop and every mechanic methods share.

It keeps the whole data set resident as one normalised tensor on the device (no
per-round disk reads; clients are index tensors into it), builds and initialises
the model, draws every mini-batch from generators seeded by (seed, round, client,
purpose), runs local optimisation functionally over parameter dicts, and evaluates
each client's personalised prediction.
"""

from __future__ import annotations

import copy
import logging
import math
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from pflrepro import results as R
from pflrepro.algorithms.base import Algorithm, State
from pflrepro.checkpoint import Checkpointer, Interrupted
from pflrepro.data.store import ArrayDataset
from pflrepro.models import build_model
from pflrepro.optim import Optimizer, OptState, Params
from pflrepro.seeding import NO_CLIENT, SETUP_ROUND, derive_seed, torch_generator
from pflrepro.training import TrainingConfig

log = logging.getLogger(__name__)

T = TypeVar("T")

#: ``(params, grads) -> grads``: a term added to each local step's gradient.
GradHook = Callable[[Params, Params], Params]


def proximal_hook(anchor: Params, coef: float) -> GradHook:
    """Add ``coef · (params − anchor)``, the gradient of ``(coef/2) ‖params − anchor‖²``.

    FedProx's pull to the global model (coef = μ) and FedAMP's to the cloud model
    (coef = λ/α). The term is computed from the live parameters of every step, so
    it is never detached from the update.
    """
    frozen = {k: v.detach() for k, v in anchor.items()}

    def hook(params: Params, grads: Params) -> Params:
        return {k: g + coef * (params[k] - frozen[k]) for k, g in grads.items()}

    return hook


def to_channels_last(x: torch.Tensor) -> torch.Tensor:
    """Images (N, C, H, W) in channels-last memory order; other tensors unchanged.

    Same shape and values; convolutions (oneDNN on CPU, cuDNN on GPU) run about twice
    as fast on NHWC-ordered inputs, and mini-batches gathered from the resident tensor
    keep its order.
    """
    return x.contiguous(memory_format=torch.channels_last) if x.dim() == 4 else x


def pool_before_relu(model: nn.Module) -> None:
    """Swap every ``ReLU, MaxPool2d`` pair of an ``nn.Sequential`` into ``MaxPool2d, ReLU``.

    ReLU is monotone, so ``relu(maxpool(x)) == maxpool(relu(x))`` exactly, and the
    gradients agree too (where a window's maximum is positive both route it to the same
    element; otherwise both give zero). The ReLU then runs on a quarter of the
    elements. Parameter-free modules trade places; parameter names do not change.
    """
    for seq in model.modules():
        if not isinstance(seq, nn.Sequential):
            continue
        names = list(seq._modules)
        i = 0
        while i + 1 < len(names):
            a, b = names[i], names[i + 1]
            if isinstance(seq._modules[a], nn.ReLU) and isinstance(seq._modules[b], nn.MaxPool2d):
                seq._modules[a], seq._modules[b] = seq._modules[b], seq._modules[a]
                i += 2
            else:
                i += 1


class PairMaxPool2d(nn.MaxPool2d):
    """``nn.MaxPool2d(2)`` whose no-grad forward is two elementwise maxima.

    ``max(max(x[2i, 2j], x[2i+1, 2j]), max(x[2i, 2j+1], x[2i+1, 2j+1]))`` over strided
    views: the same values bit for bit (NaNs propagate as in max-pooling), ~2x faster
    than ATen's pooling kernel on channels-last CPU tensors, which also builds the
    indices a backward pass would need. With autograd on it is ``nn.MaxPool2d`` itself,
    so gradients (ties included) do not change.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Pool ``x`` (N, C, H, W); odd trailing rows and columns are dropped, as in 2x2 pooling."""
        if torch.is_grad_enabled() or x.dim() != 4:
            return super().forward(x)
        h, w = x.shape[-2] // 2 * 2, x.shape[-1] // 2 * 2
        rows = torch.maximum(x[:, :, 0:h:2, :w], x[:, :, 1:h:2, :w])
        return torch.maximum(rows[:, :, :, 0::2], rows[:, :, :, 1::2])

    @staticmethod
    def fits(module: nn.Module) -> bool:
        """Whether ``module`` is a plain 2x2, stride-2 max-pooling layer."""
        def pair(v: object) -> tuple[object, object]:
            return v if isinstance(v, tuple) else (v, v)

        return (type(module) is nn.MaxPool2d and pair(module.kernel_size) == (2, 2)
                and pair(module.stride) == (2, 2) and pair(module.padding) == (0, 0)
                and pair(module.dilation) == (1, 1) and not module.ceil_mode
                and not module.return_indices)


def pair_max_pools(model: nn.Module) -> None:
    """Replace every plain 2x2 ``nn.MaxPool2d`` of ``model`` by :class:`PairMaxPool2d`."""
    for parent in model.modules():
        for name, child in list(parent.named_children()):
            if PairMaxPool2d.fits(child):
                setattr(parent, name, PairMaxPool2d(2))


def choose_device(request: str) -> torch.device:
    """``auto`` -> CUDA when available, else CPU; ``cuda`` without a GPU raises."""
    if request == "cpu":
        return torch.device("cpu")
    if torch.cuda.is_available():
        return torch.device("cuda")
    if request == "cuda":
        raise RuntimeError("training.device is 'cuda' but no CUDA device is available")
    return torch.device("cpu")


@dataclass(frozen=True)
class FederatedData:
    """The data set on the device plus each client's train/test indices."""

    x: torch.Tensor  # (N, C, H, W) float32, normalised
    y: torch.Tensor  # (N,) int64
    train: tuple[torch.Tensor, ...]  # per client, indices into x
    test: tuple[torch.Tensor, ...]
    groups: tuple[int, ...]  # per client distribution id (-1: none)
    num_classes: int

    @property
    def num_clients(self) -> int:
        """Number of clients K."""
        return len(self.train)

    @classmethod
    def build(cls, dataset: ArrayDataset, partition: pd.DataFrame,
              device: torch.device) -> FederatedData:
        """Normalise the images and turn the partition table into index tensors.

        Optional per-row columns of the partition table transform their data-set row:
        ``rotation`` (degrees, a multiple of 90) turns the image counter-clockwise by
        ``rotation / 90`` quarter turns (``torch.rot90`` over H, W; square images only)
        and ``target`` replaces the row's label. A data-set row listed twice must carry
        the same values both times (partitioners use each row once).
        """
        meta = dataset.meta
        index = partition["index"].to_numpy()
        used, first, inverse = np.unique(index, return_index=True, return_inverse=True)
        # one float32 copy of the used rows, already channels-last for images, then
        # normalised in place (no transient float32 copies)
        raw = torch.from_numpy(np.asarray(dataset.x[used]))
        x = torch.empty(raw.shape, dtype=torch.float32,
                        memory_format=torch.channels_last if raw.dim() == 4
                        else torch.contiguous_format)
        x.copy_(raw)
        del raw
        x.div_(meta.max_value)
        if "rotation" in partition:
            x = _rotate(x, _per_used_row(partition, "rotation", first, inverse))
        mean = torch.tensor(meta.mean, dtype=torch.float32).view(1, -1, 1, 1)
        std = torch.tensor(meta.std, dtype=torch.float32).clamp_min(1e-6).view(1, -1, 1, 1)
        x.sub_(mean).div_(std)
        x = to_channels_last(x.to(device))
        if "target" in partition:
            labels = _per_used_row(partition, "target", first, inverse).astype(np.int64)
            if labels.size and not 0 <= labels.min() <= labels.max() < meta.num_classes:
                raise ValueError(f"partition column 'target' must lie in "
                                 f"0..{meta.num_classes - 1}")
        else:
            labels = np.asarray(dataset.y[used], dtype=np.int64)
        y = torch.from_numpy(labels).to(device)
        # remap data set rows to rows of the resident tensor
        position = pd.Series(np.arange(len(used)), index=used)
        clients = int(partition["client"].max()) + 1
        train, test, groups = [], [], []
        for k in range(clients):
            rows = partition[partition["client"] == k]
            if rows.empty:
                raise ValueError(f"partition has no samples for client {k}")
            for split, out in (("train", train), ("test", test)):
                idx = position[rows.loc[rows["split"] == split, "index"].to_numpy()].to_numpy()
                out.append(torch.as_tensor(np.sort(idx), dtype=torch.long, device=device))
            groups.append(int(rows["group"].iloc[0]))
        return cls(x=x, y=y, train=tuple(train), test=tuple(test), groups=tuple(groups),
                   num_classes=meta.num_classes)


def _per_used_row(partition: pd.DataFrame, column: str, first: np.ndarray,
                  inverse: np.ndarray) -> np.ndarray:
    """``column``'s value for each distinct data-set row (``np.unique`` order)."""
    values = partition[column].to_numpy()
    per_row = values[first]
    if not np.array_equal(per_row[inverse.reshape(-1)], values):
        raise ValueError(f"partition gives a data-set row two different {column!r} values")
    return per_row


def _rotate(x: torch.Tensor, degrees: np.ndarray) -> torch.Tensor:
    """Turn each image ``x[i]`` counter-clockwise by ``degrees[i]`` (multiples of 90)."""
    degrees = degrees.astype(np.int64)
    if np.any(degrees % 90 != 0):
        raise ValueError("partition column 'rotation' must hold multiples of 90 degrees")
    quarters = torch.from_numpy((degrees // 90) % 4)
    if bool((quarters != 0).any()) and x.shape[-1] != x.shape[-2]:
        raise ValueError(f"rotation needs square images, got H x W = "
                         f"{x.shape[-2]} x {x.shape[-1]}")
    for q in (1, 2, 3):
        rows = (quarters == q).nonzero().flatten()
        if len(rows):
            x[rows] = torch.rot90(x[rows], q, dims=(2, 3))
    return x


class RunningMean:
    """Weighted mean of parameter dicts, accumulated as they arrive (Engine.running_mean)."""

    def __init__(self, like: Params, weights: torch.Tensor) -> None:
        self.names = list(like)
        self.weights = (weights / weights.sum()).tolist()
        self.total = [torch.zeros_like(like[k]) for k in self.names]

    def add(self, k: int, params: Params) -> None:
        """Add entry ``k``'s ``params`` with its weight."""
        torch._foreach_add_(self.total, [params[n] for n in self.names], alpha=self.weights[k])

    def result(self) -> Params:
        """The weighted mean (weights of entries never added count as zero)."""
        return dict(zip(self.names, self.total, strict=True))


class Engine:
    """Shared mechanics for one run: data, model, optimiser, seeding, evaluation."""

    #: Set (e.g. from a SIGTERM handler) to stop after the current round.
    stop: bool = False
    #: On CPU, evaluation passes run in chunks of at most this many samples (fewer
    #: when ``eval_batch_size`` is smaller): a chunk's activations then stay in the
    #: caches, which is ~1.5x faster than chunks of 1024 for the CNNs here. Per-sample
    #: outputs do not depend on the chunking. GPUs use ``eval_batch_size`` as given.
    cpu_eval_chunk: int = 128

    def __init__(self, data: FederatedData, training: TrainingConfig, seed: int,
                 in_shape: tuple[int, int, int], device: torch.device,
                 workers: int = 1) -> None:
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self.data = data
        self.cfg = training
        self.seed = int(seed)
        self.device = device
        self.in_shape = in_shape
        #: Client threads on the CPU (:meth:`map_clients`); always 1 on a GPU.
        self.workers = workers if device.type == "cpu" else 1
        self._pool: ThreadPoolExecutor | None = None
        self._nets = threading.local()
        self._owner = threading.get_ident()
        self.model: nn.Module = build_model(training.model, in_shape, data.num_classes,
                                            **dict(training.model_options)).to(device)
        self.model.requires_grad_(False)
        pool_before_relu(self.model)
        pair_max_pools(self.model)
        for module in self.model.modules():
            # ReLUs overwrite their input (the output of a conv, linear or pooling layer,
            # whose backward does not need it): one memory pass instead of an allocation
            # and two. Same values; autograd would raise if a model ever needed the input.
            if isinstance(module, nn.ReLU):
                module.inplace = True
        chunk = training.eval_batch_size
        self.eval_chunk = chunk if device.type != "cpu" else min(chunk, self.cpu_eval_chunk)
        self.optimizer = Optimizer(training.optimizer, training.lr, momentum=training.momentum)

    # ------------------------------------------------------------------ threads
    @property
    def net(self) -> nn.Module:
        """The model instance of the calling thread.

        ``functional_call`` swaps a module's tensors in and out, so each client thread
        (:meth:`map_clients`) has its own copy; all have the same structure.
        """
        if threading.get_ident() == self._owner:
            return self.model
        net = getattr(self._nets, "model", None)
        if net is None:
            net = self._nets.model = copy.deepcopy(self.model)
        return net

    def map_clients(self, fn: Callable[[int], T], clients: Iterable[int]) -> Iterator[T]:
        """``fn(k)`` for every client ``k``, yielded in the order of ``clients``.

        With :attr:`workers` > 1 (CPU) the calls run on that many threads, each with one
        torch thread and its own model instance (:attr:`net`); torch kernels release the
        GIL, so the clients train in parallel. Every client's computation is the same
        sequence of single-threaded kernels as in a plain loop, so the results are the
        same bits for any number of workers. ``fn`` may read shared state and write only
        client ``k``'s own rows; whatever combines clients belongs to the caller, which
        gets the results in order (at most ``2 × workers`` are computed ahead).
        """
        order = list(clients)
        if self.workers == 1 or len(order) < 2:
            for k in order:
                yield fn(k)
            return
        if self._pool is None:
            # one torch thread per client thread (torch's setting is per thread)
            self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="pflrepro-client",
                                            initializer=torch.set_num_threads, initargs=(1,))
        pending: deque[Future[T]] = deque()
        todo = iter(order)
        try:
            for k in todo:
                pending.append(self._pool.submit(fn, k))
                if len(pending) >= 2 * self.workers:
                    break
            while pending:
                result = pending.popleft().result()
                nxt = next(todo, None)
                if nxt is not None:
                    pending.append(self._pool.submit(fn, nxt))
                yield result
        finally:
            for fut in pending:  # an error (or an early stop): drop what has not started
                fut.cancel()
            for fut in pending:
                if not fut.cancelled():
                    fut.exception()  # wait, so nothing still writes after we return

    def close(self) -> None:
        """Stop the client threads (if any ran); the engine stays usable."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def run_clients(self, fn: Callable[[int], object], clients: Iterable[int]) -> None:
        """:meth:`map_clients` for its side effects: ``fn(k)`` writes client ``k``'s rows."""
        for _ in self.map_clients(fn, clients):
            pass

    # ------------------------------------------------------------------ clients
    @property
    def num_clients(self) -> int:
        """Number of clients K."""
        return self.data.num_clients

    def n_train(self, client: int) -> int:
        """Training-set size of ``client``."""
        return len(self.data.train[client])

    def train_sizes(self) -> torch.Tensor:
        """Training-set sizes of all clients as a float tensor on the device."""
        return torch.tensor([self.n_train(k) for k in range(self.num_clients)],
                            dtype=torch.float32, device=self.device)

    def steps_per_round(self, client: int, epochs: int | None = None) -> int:
        """Local steps of ``client`` in one round (``local_steps`` or epochs × batches)."""
        if epochs is None and self.cfg.local_steps > 0:
            return self.cfg.local_steps
        epochs = self.cfg.local_epochs if epochs is None else epochs
        return epochs * math.ceil(self.n_train(client) / self.cfg.batch_size)

    def batches(self, client: int, rnd: int, purpose: str, steps: int) -> list[torch.Tensor]:
        """``steps`` mini-batches of ``client``'s training indices.

        Batches are consecutive slices of a stream of seeded permutations (epoch after
        epoch), so every sample is seen once per epoch; the stream depends only on
        (seed, round, client, purpose).
        """
        if steps <= 0:
            return []
        idx = self.data.train[client]
        n = len(idx)
        bs = min(self.cfg.batch_size, n)
        gen = torch_generator(self.seed, rnd, client, purpose)
        need = steps * bs
        perms = [torch.randperm(n, generator=gen) for _ in range(math.ceil(need / n))]
        order = torch.cat(perms)[:need].to(self.device)
        return list(idx[order].split(bs))

    # ------------------------------------------------------------------ params
    def init_params(self, client: int = NO_CLIENT) -> Params:
        """Fresh model parameters drawn from (seed, setup round, client, 'init')."""
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(derive_seed(self.seed, SETUP_ROUND, client, "init"))
            fresh = build_model(self.cfg.model, self.in_shape, self.data.num_classes,
                                **dict(self.cfg.model_options))
        return {k: v.detach().to(self.device) for k, v in fresh.named_parameters()}

    def client_init(self, shared: bool = False) -> dict[str, Params]:
        """Per-client models, each from its own seed, and per-client optimiser states.

        Returns ``{"params": stacked, "opt": stacked}``; client ``k``'s model is drawn
        from ``(seed, setup round, k, 'init')``. With ``shared`` every client starts
        from one copy of the model :meth:`init_params` draws without a client (FedAvg's
        global start).
        """
        if shared:
            start = self.init_params()
            return {"params": self.stack(start, self.num_clients),
                    "opt": self.stack(self.init_opt(start), self.num_clients)}
        per_client = [self.init_params(k) for k in range(self.num_clients)]
        params = {name: torch.stack([p[name] for p in per_client]) for name in per_client[0]}
        opt = self.stack(self.init_opt(per_client[0]), self.num_clients)
        return {"params": params, "opt": opt}

    @staticmethod
    def stack(params: Params, copies: int) -> Params:
        """Stack ``copies`` copies of ``params`` along a new leading dimension."""
        return {k: v.unsqueeze(0).repeat(copies, *([1] * v.dim())) for k, v in params.items()}

    @staticmethod
    def take(stacked: dict[str, torch.Tensor], k: int) -> dict[str, torch.Tensor]:
        """Entry ``k`` of a stacked dict (views, no copy)."""
        return {name: v[k] for name, v in stacked.items()}

    @staticmethod
    def put(stacked: dict[str, torch.Tensor], k: int, values: dict[str, torch.Tensor]) -> None:
        """Write ``values`` into entry ``k`` of a stacked dict, in place."""
        for name, v in values.items():
            stacked[name][k].copy_(v)

    @staticmethod
    def weighted_mean(stacked: Params, weights: torch.Tensor) -> Params:
        """Average a stacked dict over its leading dimension with ``weights`` (normalised).

        Accumulates entry after entry like :meth:`running_mean`, so both give the same
        bits (FedAvg averages with a running mean, APFL's global model with this).
        """
        average = RunningMean(Engine.take(stacked, 0), weights)
        for k in range(len(weights)):
            average.add(k, Engine.take(stacked, k))
        return average.result()

    @staticmethod
    def running_mean(like: Params, weights: torch.Tensor) -> RunningMean:
        """Accumulator of ``Σ_k w_k · params_k`` (``weights`` normalised).

        Filled one client at a time, so no stacked copy of every client's model is needed.
        """
        return RunningMean(like, weights)

    def init_opt(self, params: Params) -> OptState:
        """Fresh optimiser state for ``params``."""
        return self.optimizer.init(params)

    # ------------------------------------------------------------------ compute
    def logits(self, params: Params, x: torch.Tensor) -> torch.Tensor:
        """Logits of the model with ``params`` on ``x`` (no grad, chunked)."""
        outs = []
        with torch.inference_mode():
            for chunk in x.split(self.eval_chunk):
                outs.append(functional_call(self.net, params, (chunk,)))
        return torch.cat(outs) if outs else torch.empty(0, self.data.num_classes,
                                                        device=self.device)

    def probs(self, params: Params, x: torch.Tensor) -> torch.Tensor:
        """Class probabilities of the model with ``params`` on ``x``."""
        return self.logits(params, x).softmax(dim=-1)

    def mean_loss(self, params: Params, client: int, split: str = "train") -> float:
        """Mean cross-entropy of ``params`` on ``client``'s ``split`` set."""
        idx = (self.data.train if split == "train" else self.data.test)[client]
        logits = self.logits(params, self.data.x[idx])
        return float(F.cross_entropy(logits, self.data.y[idx]))

    def loss_and_grad(self, params: Params, idx: torch.Tensor,
                      sample_weight: torch.Tensor | None = None) -> tuple[float, Params]:
        """Loss of ``params`` on samples ``idx`` and its gradient.

        With ``sample_weight`` the loss is ``Σ_s weight_s · ℓ_s`` (weights given per
        sample); without, the mean over the batch.
        """
        # A view (a client's row of a stacked state) is copied: its version counter is
        # the whole stack's, which other client threads bump by writing their own rows.
        p = {k: (v.detach().clone() if v._is_view() else v.detach()).requires_grad_(True)
             for k, v in params.items()}
        with torch.enable_grad():
            out = functional_call(self.net, p, (self.data.x[idx],))
            if sample_weight is None:
                loss = F.cross_entropy(out, self.data.y[idx])
            else:
                loss = (F.cross_entropy(out, self.data.y[idx], reduction="none")
                        * sample_weight).sum()
            grads = torch.autograd.grad(loss, list(p.values()))
        return float(loss.detach()), dict(zip(p.keys(), grads, strict=True))

    def local_train(self, params: Params, opt_state: OptState, client: int, rnd: int,
                    purpose: str = "local", steps: int | None = None,
                    grad_hook: GradHook | None = None) -> tuple[Params, OptState, float]:
        """Run ``steps`` optimiser steps on ``client``'s data; return params, state, mean loss.

        ``grad_hook(params, grads) -> grads`` may add a term to every step's gradient
        (FedProx's and FedAMP's proximal pull, SCAFFOLD's control variates); the
        reported loss is the data loss only.
        """
        steps = self.steps_per_round(client) if steps is None else steps
        batches = self.batches(client, rnd, purpose, steps)
        # working copies, updated in place step by step (the inputs stay untouched)
        work = {k: v.detach().clone() for k, v in params.items()}
        opt_state = {k: v.clone() for k, v in opt_state.items()}
        total = 0.0
        for idx in batches:
            loss, grads = self.loss_and_grad(work, idx)
            if grad_hook is not None:
                grads = grad_hook(work, grads)
            self.optimizer.step_(work, grads, opt_state)
            total += loss
        return work, opt_state, total / max(len(batches), 1)

    @property
    def batch_clients(self) -> bool:
        """Whether methods should train a round's clients in one vmapped pass."""
        mode = self.cfg.client_batching
        return mode == "vmap" or (mode == "auto" and self.device.type == "cuda")

    def train_clients(self, params: Params, opt_state: OptState, clients: list[int], rnd: int,
                      purpose: str = "local", anchor: Params | None = None, coef: float = 0.0,
                      offset: Params | None = None) -> tuple[Params, OptState, np.ndarray]:
        """:meth:`local_train` for ``clients`` at once (stacked params and states).

        ``anchor`` and ``coef`` add :func:`proximal_hook`'s term, ``offset`` a constant
        term (SCAFFOLD's ``c − c_i``); see :mod:`pflrepro.batched`. Returns stacked
        params, states and per-client losses.
        """
        from pflrepro.batched import local_train_batched

        p, o, losses = local_train_batched(self, params, opt_state, clients, rnd, purpose,
                                           anchor=anchor, coef=coef, offset=offset,
                                           chunk=self.cfg.client_chunk or None)
        return p, o, losses.cpu().numpy()

    # ------------------------------------------------------------------ loop
    def evaluate(self, algorithm: Algorithm, state: State, rnd: int, log_: R.MetricLog) -> None:
        """Log every client's test accuracy and loss of its personalised prediction."""
        def one(k: int) -> tuple[float, float]:
            idx = self.data.test[k]
            p = algorithm.predict(state, k, self.data.x[idx], rnd)
            y = self.data.y[idx]
            acc = float((p.argmax(dim=-1) == y).float().mean())
            return acc, float(F.nll_loss(p.clamp_min(1e-12).log(), y))

        clients = range(self.num_clients)
        for k, (acc, nll) in zip(clients, self.map_clients(one, clients), strict=True):
            log_.add(rnd, k, R.TEST_ACCURACY, acc)
            log_.add(rnd, k, R.TEST_LOSS, nll)

    def run(self, algorithm: Algorithm, progress: bool = False,
            checkpoint: Checkpointer | None = None) -> R.MetricLog:
        """Run every round of ``algorithm``; return the run's metric log.

        With ``checkpoint``, the run resumes after the last checkpointed round when a
        checkpoint of the same spec exists, saves one every ``checkpoint.every``
        rounds, and saves one and raises :class:`Interrupted` when :attr:`stop` is set
        (by a SIGTERM handler, say) at the end of a round.
        """
        state = algorithm.init()  # also sets up whatever the algorithm derives once
        resumed = checkpoint.load(self.device) if checkpoint is not None else None
        if resumed is not None:
            first, state, out = resumed
            first += 1
        else:
            first = 1
            out = R.MetricLog()
            for k in range(self.num_clients):
                out.add(0, k, R.N_TRAIN, self.n_train(k))
                out.add(0, k, R.N_TEST, len(self.data.test[k]))
                out.add(0, k, R.GROUP, self.data.groups[k])
            algorithm.record(state, 0, out)
            self.evaluate(algorithm, state, 0, out)
        rounds: Sequence[int] = range(first, self.cfg.rounds + 1)
        if progress:
            from tqdm import tqdm

            rounds = tqdm(rounds, desc=algorithm.name, mininterval=5.0)
        for rnd in rounds:
            state, train_loss = algorithm.round(state, rnd)
            for k, value in enumerate(np.asarray(train_loss, dtype=np.float64)):
                if not np.isnan(value):
                    out.add(rnd, k, R.TRAIN_LOSS, value)
            algorithm.record(state, rnd, out)
            if rnd % self.cfg.eval_every == 0 or rnd == self.cfg.rounds:
                self.evaluate(algorithm, state, rnd, out)
            if checkpoint is not None and rnd < self.cfg.rounds and (
                    checkpoint.due(rnd) or self.stop):
                checkpoint.save(rnd, state, out)
            if self.stop and rnd < self.cfg.rounds:
                saved = "checkpoint saved" if checkpoint is not None else "no checkpoint"
                raise Interrupted(f"stopped after round {rnd} ({saved})")
        return out
