"""The engine: the round loop of one run, and the client mechanics methods share.

It builds the run's :class:`~pflrepro.training.context.StepContext` (the model, built
once by :func:`pflrepro.models.surgery.speed_up`, the client threads, the seeded
mini-batch streams (seed, round, client, purpose), the loss/gradient pass), which it
hands to local training and exposes to the methods; it draws fresh parameters, runs
the evaluation passes and the rounds with checkpoints. It knows no algorithm by name: a method's
local training goes through :meth:`Engine.train` (any set of clients, on the path the
config chooses, :mod:`pflrepro.training.local_training`) with the gradient terms the method adds
(:mod:`pflrepro.training.terms`). The data live in :class:`~pflrepro.data.federated.FederatedData`;
stacked parameter helpers in :mod:`pflrepro.training.params`; the per-client architectures
(their models, assignment and lookup) in :mod:`pflrepro.training.architectures`, which the
engine exposes to the methods (``arch_of``, :meth:`Engine.arch_index`,
:meth:`Engine.net_for`); the distillation pass on public rows in
:mod:`pflrepro.training.distillation`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from pflrepro.data.federated import FederatedData
from pflrepro.models import build_model
from pflrepro.seeding import NO_CLIENT, SETUP_ROUND, derive_seed
from pflrepro.store import results as R
from pflrepro.store.checkpoint import Checkpointer, Interrupted
from pflrepro.store.progress import RoundProgress
from pflrepro.training import local_training as LT
from pflrepro.training import selection
from pflrepro.training.architectures import Architectures, assign_architectures
from pflrepro.training.communication import Traffic
from pflrepro.training.context import StepContext
from pflrepro.training.method import Method, State
from pflrepro.training.objective import Objective
from pflrepro.training.optim import Optimizer, OptState, Params
from pflrepro.training.params import stack
from pflrepro.training.settings import TrainingConfig
from pflrepro.training.terms import GradTerm
from pflrepro.training.threads import ClientThreads

log = logging.getLogger(__name__)



class Engine:
    """Shared mechanics for one run: model, client threads, seeding, training, evaluation."""

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
        self.cfg = training
        self.seed = int(seed)
        self.device = device
        self.in_shape = in_shape
        #: The run's architectures (:mod:`pflrepro.training.architectures`): one unless
        #: ``training.architectures`` lists several (model heterogeneity).
        self.architectures = Architectures(training.models, in_shape, data.num_classes,
                                           device)
        #: (model, model_options) of each architecture, smallest first.
        self.archs = self.architectures.specs
        #: One model instance per architecture, built once (``functional_call`` runs them
        #: with any parameters of their shape); :attr:`model` is the first.
        self.models: list[nn.Module] = self.architectures.models
        self.model: nn.Module = self.models[0]
        #: Client threads on the CPU; always one on a GPU.
        self.threads = ClientThreads(self.models, workers if device.type == "cpu" else 1)
        chunk = training.eval_batch_size
        self.eval_chunk = chunk if device.type != "cpu" else min(chunk, self.cpu_eval_chunk)
        self.optimizer = Optimizer(training.optimizer, training.lr, momentum=training.momentum)
        #: What each client sends and receives this round; methods add to it, the round
        #: loop logs and resets it (:mod:`pflrepro.training.communication`).
        self.traffic = Traffic(data.num_clients)
        #: Scalars in one model of each architecture (what sending it costs).
        self.model_sizes = self.architectures.sizes
        #: Scalars in one model (of the first architecture: the only one when homogeneous).
        self.model_size = self.model_sizes[0]
        #: Every client's test rows, sorted (built on first use: ``eval_test: global``).
        self._global_test: torch.Tensor | None = None
        #: What a local step needs (:mod:`pflrepro.training.context`): local training
        #: runs on it; the engine's data, batches, losses and model lookups are its.
        self.context = StepContext(data, training, self.seed, device, self.architectures,
                                   self.threads, self.optimizer, in_shape)
        #: Each client's architecture (an index into :attr:`archs`).
        self.arch_of = assign_architectures(
            len(self.models), [self.n_train(k) for k in range(self.num_clients)], self.seed,
            training.architecture_assignment)

    @property
    def data(self) -> FederatedData:
        """The run's data: the step context's, so that replacing it reaches local training."""
        return self.context.data

    @data.setter
    def data(self, value: FederatedData) -> None:
        self.context.data = value

    @property
    def net(self) -> nn.Module:
        """The calling thread's model instance (:attr:`ClientThreads.net`)."""
        return self.threads.net

    # ------------------------------------------------------------------ architectures
    @property
    def heterogeneous(self) -> bool:
        """Whether clients run different architectures (``training.architectures``)."""
        return len(self.models) > 1

    def arch_index(self, params: Params, stacked: bool = False) -> int:
        """The architecture ``params`` belong to (:meth:`StepContext.arch_index`)."""
        return self.context.arch_index(params, stacked)

    def net_for(self, params: Params) -> nn.Module:
        """The calling thread's instance of the model ``params`` belong to."""
        return self.context.net_for(params)

    def model_size_of(self, client: int) -> int:
        """Scalars in client ``client``'s model (what sending it costs)."""
        return self.model_sizes[self.arch_of[client]]

    def close(self) -> None:
        """Stop the client threads (if any ran); the engine stays usable."""
        self.threads.close()

    # ------------------------------------------------------------------ clients
    @property
    def num_clients(self) -> int:
        """Number of clients K."""
        return self.data.num_clients

    def n_train(self, client: int) -> int:
        """Training-set size of ``client``."""
        return self.context.n_train(client)

    def train_sizes(self) -> torch.Tensor:
        """Training-set sizes of all clients as a float tensor on the device."""
        return torch.tensor([self.n_train(k) for k in range(self.num_clients)],
                            dtype=torch.float32, device=self.device)

    def steps_per_round(self, client: int, epochs: int | None = None,
                        samples: int | None = None) -> int:
        """Local steps of ``client`` in one round (:meth:`StepContext.steps_per_round`)."""
        return self.context.steps_per_round(client, epochs, samples)

    def participants(self, rnd: int) -> list[int]:
        """The clients taking part in round ``rnd``, sorted.

        All of them when ``training.client_fraction`` is 1; else m = max(1, round(C·K))
        drawn without replacement from (seed, round, 'participants') as
        ``training.client_selection`` says (:mod:`pflrepro.training.selection`).
        """
        sizes = [self.n_train(k) for k in range(self.num_clients)]
        return selection.participants(self.cfg.client_selection, self.cfg.client_fraction,
                                      sizes, self.seed, rnd)

    def test_rows(self, client: int) -> torch.Tensor:
        """The rows client ``client`` is scored on (``training.eval_test``).

        'own': its test share of the partition; 'global': every client's test rows.
        """
        if self.cfg.eval_test == "own":
            return self.data.test[client]
        if self._global_test is None:
            self._global_test = torch.sort(torch.cat(self.data.test)).values
        return self._global_test

    def minibatches(self, client: int, rnd: int, purpose: str, steps: int,
                    pool: torch.Tensor | None = None,
                    batch_size: int | None = None) -> list[torch.Tensor]:
        """``steps`` seeded mini-batches of ``client`` (:meth:`StepContext.minibatches`)."""
        return self.context.minibatches(client, rnd, purpose, steps, pool, batch_size)

    # ------------------------------------------------------------------ params
    def init_params(self, client: int = NO_CLIENT, arch: int | None = None) -> Params:
        """Fresh model parameters drawn from (seed, setup round, client, 'init').

        The model is client ``client``'s architecture, or ``arch`` when given (the first
        architecture for no client).
        """
        if arch is None:
            arch = self.arch_of[client] if client != NO_CLIENT else 0
        name, options = self.archs[arch]
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(derive_seed(self.seed, SETUP_ROUND, client, "init"))
            fresh = build_model(name, self.in_shape, self.data.num_classes, **dict(options))
        return {k: v.detach().to(self.device) for k, v in fresh.named_parameters()}

    def client_init(self, shared: bool = False) -> dict[str, Params]:
        """Per-client models, each from its own seed, and per-client optimiser states.

        Returns ``{"params": stacked, "opt": stacked}``; client ``k``'s model is drawn
        from ``(seed, setup round, k, 'init')``. With ``shared`` every client starts
        from one copy of the model :meth:`init_params` draws without a client (FedAvg's
        global start). Stacking needs one architecture (see :meth:`client_models`).
        """
        if self.heterogeneous:
            raise ValueError("client_init stacks one architecture; with "
                             "training.architectures use client_models")
        if shared:
            start = self.init_params()
            return {"params": stack(start, self.num_clients),
                    "opt": stack(self.init_opt(start), self.num_clients)}
        per_client = [self.init_params(k) for k in range(self.num_clients)]
        params = {name: torch.stack([p[name] for p in per_client]) for name in per_client[0]}
        opt = stack(self.init_opt(per_client[0]), self.num_clients)
        return {"params": params, "opt": opt}

    def client_models(self) -> tuple[list[Params], list[OptState]]:
        """Per-client models (each its own architecture and seed slot) and optimiser states.

        Client ``k``'s model is drawn like :meth:`client_init`'s row ``k``, as a list
        entry rather than a stacked row, so clients may differ in architecture.
        """
        params = [self.init_params(k) for k in range(self.num_clients)]
        return params, [self.init_opt(p) for p in params]

    def init_opt(self, params: Params) -> OptState:
        """Fresh optimiser state for ``params``."""
        return self.optimizer.init(params)

    # ------------------------------------------------------------------ compute
    def logits(self, params: Params, x: torch.Tensor) -> torch.Tensor:
        """Logits of the model with ``params`` on ``x`` (no grad, chunked)."""
        outs = []
        net = self.net_for(params)
        with torch.inference_mode():
            for chunk in x.split(self.eval_chunk):
                outs.append(functional_call(net, params, (chunk,)))
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
        """Loss of ``params`` on samples ``idx``, and its gradient (the context's)."""
        return self.context.loss_and_grad(params, idx, sample_weight)

    # ------------------------------------------------------------------ training
    @property
    def client_training(self) -> str:
        """The run's local-training path, ``loop`` or ``vmap`` (a run column).

        ``training.client_training: auto`` means vmap on CUDA, the loop on the CPU.
        """
        mode = self.cfg.client_training
        if mode == "auto":
            return LT.VMAP if self.device.type == "cuda" else LT.LOOP
        return mode

    def train(self, params: Params, opt_state: OptState, clients: Sequence[int], rnd: int,
              purpose: str = "local", steps: Sequence[int] | int | None = None,
              terms: Sequence[GradTerm] = (), pools: Sequence[torch.Tensor] | None = None,
              objective: Objective | None = None) -> tuple[Params, OptState, np.ndarray]:
        """Local training of ``clients`` on this run's path; see :func:`local_training.train`.

        ``params`` and ``opt_state`` are stacked, row ``i`` for ``clients[i]``; returns
        new stacked params and states and each client's mean data loss.
        """
        return LT.train(self.context, params, opt_state, clients, rnd, purpose, steps, terms,
                        path=self.client_training, chunk=self.cfg.client_chunk or None,
                        pools=pools, objective=objective)

    def train_client(self, params: Params, opt_state: OptState, client: int, rnd: int,
                     purpose: str = "local", steps: int | None = None,
                     terms: Sequence[GradTerm] = (), pool: torch.Tensor | None = None,
                     objective: Objective | None = None) -> tuple[Params, OptState, float]:
        """One client's local steps on one unstacked model (``train_client``)."""
        return LT.train_client(self.context, params, opt_state, client, rnd, purpose, steps,
                               terms, pool, objective)

    # ------------------------------------------------------------------ loop
    def evaluate(self, algorithm: Method, state: State, rnd: int, log_: R.MetricLog) -> bool:
        """Log every client's test accuracy and loss of its personalised prediction.

        Returns whether every test loss is finite (a NaN or infinite one means the
        model's parameters or outputs are no longer finite: the run diverged).
        """
        def one(k: int) -> tuple[float, float]:
            idx = self.test_rows(k)
            p = algorithm.predict(state, k, self.data.x[idx], rnd)
            y = self.data.y[idx]
            acc = float((p.argmax(dim=-1) == y).float().mean())
            return acc, float(F.nll_loss(p.clamp_min(1e-12).log(), y))

        clients = range(self.num_clients)
        finite = True
        for k, (acc, nll) in zip(clients, self.threads.map_clients(one, clients), strict=True):
            log_.add(rnd, k, R.TEST_ACCURACY, acc)
            log_.add(rnd, k, R.TEST_LOSS, nll)
            finite = finite and math.isfinite(nll)
        return finite

    def run(self, algorithm: Method, progress: RoundProgress | None = None,
            checkpoint: Checkpointer | None = None) -> R.MetricLog:
        """Run every round of ``algorithm``; return the run's metric log.

        ``progress`` reports each round (a log line per evaluated round, a progress
        table now and then; :class:`pflrepro.store.progress.RoundProgress`); None: one that
        logs the lines only. Anything else raises :class:`TypeError`.

        With ``checkpoint``, the run resumes after the last checkpointed round when a
        checkpoint of the same spec exists, saves one every ``checkpoint.every``
        rounds, and saves one and raises :class:`Interrupted` when :attr:`stop` is set
        (by a SIGTERM handler, say) at the end of a round.

        Divergence ends the run: when an evaluated test loss or a client's training
        loss is infinite or NaN (a NaN training loss otherwise means "did not train"
        and is not logged), the round is evaluated, a :data:`results.DIVERGED` row
        (client -1, value = the round) is logged, a warning names the round, and no
        further round runs. The run's file is complete; tables and figures mark it.
        """
        if progress is not None and not isinstance(progress, RoundProgress):
            raise TypeError(f"progress must be a RoundProgress or None, got {progress!r}")
        state = algorithm.init()  # also sets up whatever the algorithm derives once
        resumed = checkpoint.load(self.device) if checkpoint is not None else None
        if resumed is not None:
            first, state, out = resumed
            first += 1
            self.traffic = Traffic(self.num_clients)  # drop what init counted: not re-sent
        else:
            first = 1
            out = R.MetricLog()
            for k in range(self.num_clients):
                out.add(0, k, R.N_TRAIN, self.n_train(k))
                out.add(0, k, R.N_TEST, len(self.test_rows(k)))
                out.add(0, k, R.GROUP, self.data.groups[k])
                if self.heterogeneous:
                    out.add(0, k, R.ARCHITECTURE, self.arch_of[k])
                    out.add(0, k, R.MODEL_SIZE, self.model_size_of(k))
            algorithm.record(state, 0, out)
            self.traffic.flush(0, out)  # what init exchanged (e.g. FedeRiCo's first table)
            self.evaluate(algorithm, state, 0, out)
        reporter = RoundProgress(self.cfg.rounds, algorithm.name) if progress is None \
            else progress
        for rnd in reporter.rounds(first):
            state, train_loss = algorithm.round(state, rnd)
            losses = np.asarray(train_loss, dtype=np.float64)
            for k, value in enumerate(losses):
                if not np.isnan(value):  # NaN: the client did not train this round
                    out.add(rnd, k, R.TRAIN_LOSS, value)
            algorithm.record(state, rnd, out)
            self.traffic.flush(rnd, out)
            finite = not np.isinf(losses).any()
            if not finite or rnd % self.cfg.eval_every == 0 or rnd == self.cfg.rounds:
                finite = self.evaluate(algorithm, state, rnd, out) and finite
            reporter.round_done(rnd, out)
            if not finite:
                out.add(rnd, -1, R.DIVERGED, float(rnd))
                log.warning("%s diverged in round %d (a non-finite loss); the run stops "
                            "there and is marked 'diverged' in tables and figures "
                            "(lower training.lr?)", algorithm.name, rnd)
                break
            if checkpoint is not None and rnd < self.cfg.rounds and (
                    checkpoint.due(rnd) or self.stop):
                checkpoint.save(rnd, state, out)
            if self.stop and rnd < self.cfg.rounds:
                saved = "checkpoint saved" if checkpoint is not None else "no checkpoint"
                raise Interrupted(f"stopped after round {rnd} ({saved})")
        return out
