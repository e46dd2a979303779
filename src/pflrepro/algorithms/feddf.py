"""FedDF: FedAvg per architecture, then ensemble distillation on unlabeled public data.

Lin, Kong, Stich, Jaggi, "Ensemble Distillation for Robust Model Fusion in Federated
Learning", NeurIPS 2020 (Algorithms 1 and 3), and its reference implementation
(epfml/federated-learning-public-code, ``codes/FedDF-code``: the ``noise_knowledge_transfer``
aggregation, ``pcode/aggregation/noise_knowledge_transfer.py``, with the settings of that
folder's README commands). Clients of one architecture form a prototype group with one
global model. Each round t:

1. m = C·K clients are sampled (``training.client_fraction``; ``engine.participants``);
   each downloads its group's global model and runs its local steps (FedAvg's);
2. the server averages each group's returned models, weighted by training-set size
   (FedAvg within the group); the average is the student's starting point;
3. the teacher is the ensemble of *all* returned models, of every architecture: on a
   public input d, σ(mean over the m models of their logits f(x̂_k, d)) (the reference's
   ``update_student_scheme=avg_logits``, temperature 1); each group's averaged model is
   trained on public mini-batches to minimise KL(teacher ‖ σ(f(x, d))) (batch mean) with
   a fresh Adam (lr ``server_lr`` = 1e-3), the gradient's global L2 norm clipped at
   ``clip_norm`` = 5, the learning rate cosine-annealed to 0 over the step budget
   ``server_steps`` = 10⁴ (``CosineAnnealingLR(T_max=10⁴)``, stepped after every batch,
   so an early stop leaves it barely decayed);
4. early stopping: every ``eval_every`` = 100 steps the student is scored; a strictly
   better score is remembered with a copy of the student; distillation stops once
   ``patience`` = 1000 steps have passed since the last improvement, and the group's new
   global model is the best-scoring copy (not the last iterate; the averaged start is
   not a candidate, as the reference's default).

Client k predicts with its group's global model (FedDF trains global models, not
personalised ones). The public data are unlabeled (labels are never read).

Choices where the paper or the reference is silent, or where this project deviates:

* the early-stopping score. The reference scores the student's top-1 accuracy on a
  *labeled* validation set held by the server (10 % of the training data,
  ``--val_data_ratio 0.1``), disjoint from the distillation data. There is none here
  (the server holds only the unlabeled public set), so a fraction ``val_fraction``
  (0.2, not from the reference) of the public rows is held out of distillation, drawn
  once per run from (seed, setup round, no client, 'distill-val'), and the score is
  ``early_stopping``: 'agreement' (default: top-1 agreement of the student with the
  ensemble's argmax on the held-out rows, the label-free look-alike of the reference's
  top-1 accuracy, with its granularity: a score in steps of 1/rows, capped at 1, so a
  student that agrees on every held-out row stops after ``patience`` steps as the
  reference's does at full validation accuracy), 'kl' (minus the mean
  KL(teacher ‖ student) on the held-out rows: a continuous score that keeps improving by
  tiny amounts, so distillation mostly runs far longer than the reference's; measured
  at CPU scale, PerFed-CKT Table 1, C = 0.1, 30 rounds: 108,900 server steps against
  43,300 with 'agreement' and 30,000 with a fixed 1,000 per round) or 'none'
  (no hold-out, all ``server_steps`` steps, the last iterate returned);
* if ``server_steps`` < ``eval_every`` no score is ever taken and the last iterate is
  returned (the reference would fail there);
* server mini-batches of ``public_batch`` rows (0 = ``training.batch_size``; the
  reference's unlabeled loader uses the clients' ``--batch_size`` too), consecutive
  slices of seeded permutations of the distillation rows, a stream seeded by
  (seed, round, 'distill-<group>'); the reference reshuffles per epoch with a short
  last batch;
* ``lr_schedule: constant`` and ``clip_norm: 0`` switch the schedule and the clipping
  off;
* a group with no participant in a round keeps its model (nothing to average, and its
  members get no new model that round); every group that had one is distilled;
* clients keep their own optimiser state across rounds, as in :mod:`.fedavg`.

With one architecture and ``server_steps: 0`` this is FedAvg exactly (same bits).

Training path: the clients' local training goes through
:meth:`pflrepro.training.engine.Engine.train` (one call per architecture group). The server's
distillation does not, by design: it trains one student per architecture (different
parameter shapes, so no client dimension to stack or vectorise), for up to
``server_steps`` steps of its own Adam at ``server_lr`` with a per-step cosine schedule,
gradient clipping and early stopping that keeps the best model. That is a server-side
optimisation of at most a few models per round, not the local training of many
clients, so it stays this file's loop.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from typing import TypedDict

import numpy as np
import torch

from pflrepro.algorithms.base import Algorithm, register_algorithm
from pflrepro.algorithms.registry import hyper
from pflrepro.seeding import NO_CLIENT, SETUP_ROUND, torch_generator
from pflrepro.training.distillation import distill_loss_and_grad
from pflrepro.training.optim import Optimizer, OptState, Params
from pflrepro.training.params import broadcast, take, weighted_mean

log = logging.getLogger(__name__)

#: ``clip_grad_norm_``'s guard against a zero norm (torch adds it to the norm).
CLIP_EPS = 1e-6


class FedDFState(TypedDict):
    """FedDF's state (lists: architectures may differ)."""

    globals: list[Params]  #: one global model per architecture
    opt: list[OptState]  #: each client's optimiser state


@dataclasses.dataclass(frozen=True)
class FedDFHyper:
    """Hyperparameters of FedDF."""

    server_steps: int = hyper(10000, "Step budget of server-side ensemble distillation per "
                                     "round and group; the cosine schedule spans it (the "
                                     "reference: 10^4; 0: FedAvg per group).", minimum=0)
    server_lr: float = hyper(1e-3, "Initial learning rate of the server's Adam (the paper and "
                                   "the reference: 1e-3).", minimum=1e-12)
    lr_schedule: str = hyper("cosine", "'cosine': lr_s = server_lr·(1 + cos(π s / server_steps))"
                                       "/2 at step s = 0, 1, ... (the reference's "
                                       "CosineAnnealingLR); 'constant': server_lr throughout.",
                             choices=("cosine", "constant"))
    clip_norm: float = hyper(5.0, "Clip the distillation gradient's global L2 norm at this "
                                  "value (the reference: 5; 0: no clipping).", minimum=0.0)
    early_stopping: str = hyper("agreement", "Score of the early stopping on the held-out public "
                                "rows (the reference: top-1 accuracy on a labeled "
                                "validation set we do not have): 'agreement' (top-1 "
                                "agreement with the ensemble, the look-alike of top-1 "
                                "accuracy), 'kl' (minus the mean KL(teacher || student)), "
                                "'none' (no hold-out, all "
                                "server_steps, last iterate).",
                                choices=("kl", "agreement", "none"))
    eval_every: int = hyper(100, "Steps between two early-stopping scores (the reference: 100).",
                            minimum=1)
    patience: int = hyper(1000, "Stop once this many steps passed since the last strict "
                                "improvement of the score (the reference: 1000).", minimum=1)
    val_fraction: float = hyper(0.2, "Fraction of the public rows held out of distillation to "
                                     "score the student (not in the reference, which holds a "
                                     "labeled validation set; unused with early_stopping "
                                     "'none').", minimum=0.0, maximum=1.0)
    public_batch: int = hyper(0, "Rows of a server mini-batch of the public set "
                                 "(0 = training.batch_size, as the reference).", minimum=0)

    def __post_init__(self) -> None:
        if self.early_stopping != "none" and not 0.0 < self.val_fraction < 1.0:
            raise ValueError("algorithm 'feddf': val_fraction must lie strictly between 0 and "
                             f"1 when early_stopping is {self.early_stopping!r}, "
                             f"got {self.val_fraction}")


def ensemble_teacher(logits: torch.Tensor) -> torch.Tensor:
    """The teacher's soft labels: σ(mean over models of their logits); (m, n, N) -> (n, N)."""
    return logits.mean(dim=0).softmax(dim=-1)


def cosine_lr(base: float, step: int, total: int) -> float:
    """Learning rate of step ``step`` (0-based) of ``total`` under cosine annealing to 0."""
    return base * (1.0 + math.cos(math.pi * step / total)) / 2.0


def clip_global_norm_(grads: Params, max_norm: float) -> float:
    """Scale ``grads`` in place so that their joint L2 norm is at most ``max_norm``.

    The arithmetic of ``torch.nn.utils.clip_grad_norm_``: factor
    min(1, max_norm / (norm + 1e-6)). Returns the norm before clipping.
    """
    norm = float(torch.linalg.vector_norm(
        torch.stack([torch.linalg.vector_norm(g) for g in grads.values()])))
    factor = max_norm / (norm + CLIP_EPS)
    if factor < 1.0:
        for g in grads.values():
            g.mul_(factor)
    return norm


class EarlyStopping:
    """Best score so far (strictly larger wins), where it was taken, and when to stop."""

    def __init__(self, patience: int) -> None:
        self.patience = patience
        self.best = -math.inf
        self.best_step = 0

    def update(self, step: int, score: float) -> tuple[bool, bool]:
        """Record ``score`` taken after ``step`` steps; return (improved, stop now)."""
        improved = score > self.best
        if improved:
            self.best, self.best_step = score, step
        return improved, step - self.best_step >= self.patience


@register_algorithm
class FedDF(Algorithm[FedDFState]):
    """A global model per architecture: FedAvg within it, distilled from every client."""

    name = "feddf"
    display_name = "FedDF"
    summary = ("FedDF (Lin et al. 2020): FedAvg per architecture, then ensemble distillation "
               "of each global model on the unlabeled public set.")
    Hyper = FedDFHyper
    client_sampling = True
    needs_public = True
    heterogeneous_models = True

    def init(self) -> FedDFState:
        """A global model per architecture (seed slot: no client); per-client optimisers."""
        e = self.engine
        if e.data.public is None:
            raise ValueError("feddf needs the experiment's public set (public: in the config)")
        models = [e.init_params(arch=a) for a in range(len(e.archs))]
        return {"globals": models,
                "opt": [e.init_opt(models[e.arch_of[k]]) for k in range(e.num_clients)]}

    def groups(self, clients: list[int]) -> list[tuple[int, list[int]]]:
        """The architectures present among ``clients`` with their members, in order."""
        arch_of = self.engine.arch_of
        present = sorted({arch_of[k] for k in clients})
        return [(a, [k for k in clients if arch_of[k] == a]) for a in present]

    def public_split(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(distillation rows, held-out scoring rows) of the public set, fixed for the run.

        Without early stopping every row distils and none is held out; else
        round(val_fraction · n) rows (at least 1, at most n - 1) drawn from
        (seed, setup round, no client, 'distill-val') are held out.
        """
        e = self.engine
        assert e.data.public is not None
        n = len(e.data.public)
        if self.hp.early_stopping == "none":
            return torch.arange(n, device=e.device), torch.arange(0, device=e.device)
        if n < 2:
            raise ValueError("feddf: early stopping needs at least 2 public rows "
                             "(one to distil on, one to score on)")
        n_val = min(n - 1, max(1, round(self.hp.val_fraction * n)))
        gen = torch_generator(e.seed, SETUP_ROUND, NO_CLIENT, "distill-val")
        perm = torch.randperm(n, generator=gen).to(e.device)
        return perm[n_val:].sort().values, perm[:n_val].sort().values

    def score(self, student: Params, x: torch.Tensor, teacher: torch.Tensor) -> float:
        """Early-stopping score of ``student`` on held-out rows ``x`` (larger is better)."""
        logits = self.engine.logits(student, x)
        if self.hp.early_stopping == "agreement":
            return float((logits.argmax(-1) == teacher.argmax(-1)).double().mean())
        log_q = logits.log_softmax(-1)
        log_t = teacher.clamp_min(1e-12).log()
        return -float((teacher * (log_t - log_q)).sum(-1).mean())

    def lr_at(self, step: int) -> float:
        """Server learning rate of step ``step`` (0-based)."""
        if self.hp.lr_schedule == "cosine":
            return cosine_lr(self.hp.server_lr, step, self.hp.server_steps)
        return self.hp.server_lr

    def distill(self, student: Params, teacher: torch.Tensor, rnd: int, arch: int) -> Params:
        """Distil ``student`` towards ``teacher`` on the public set (see the module doc)."""
        e = self.engine
        public = e.data.public
        assert public is not None
        hp = self.hp
        if hp.server_steps == 0:
            return student
        rows, held = self.public_split()
        batches = e.minibatches(NO_CLIENT, rnd, f"distill-{arch}", hp.server_steps,
                                pool=rows, batch_size=hp.public_batch or None)
        adam = Optimizer("adam", hp.server_lr)
        work = {k: v.detach().clone() for k, v in student.items()}
        state = adam.init(work)
        stopper = EarlyStopping(hp.patience) if hp.early_stopping != "none" else None
        best: Params | None = None
        for s, batch in enumerate(batches):
            _, grads = distill_loss_and_grad(e.context, work, public[batch], teacher[batch])
            if hp.clip_norm > 0:
                clip_global_norm_(grads, hp.clip_norm)
            lr = self.lr_at(s)
            step_opt = adam if lr == hp.server_lr else dataclasses.replace(adam, lr=lr)
            step_opt.step_(work, grads, state)
            done = s + 1
            if stopper is None or done % hp.eval_every:
                continue
            improved, stop = stopper.update(done, self.score(work, public[held], teacher[held]))
            if improved:
                best = {k: v.clone() for k, v in work.items()}
            if stop:
                break
        if stopper is not None:
            log.debug("feddf round %d group %d: %d server steps, best score %.4f after %d",
                      rnd, arch, done, stopper.best, stopper.best_step)
        return work if best is None else best

    def round(self, state: FedDFState, rnd: int) -> tuple[FedDFState, np.ndarray]:
        """Participants train from their group's model; average per group; distill."""
        e = self.engine
        public = e.data.public
        assert public is not None
        chosen = e.participants(rnd)
        losses = np.full(e.num_clients, np.nan)
        averaged: dict[int, Params] = {}
        logits = []
        for arch, members in self.groups(chosen):
            opt: OptState = {n: torch.stack([state["opt"][k][n] for k in members])
                             for n in state["opt"][members[0]]}
            local, opt, trained = e.train(broadcast(state["globals"][arch], len(members)), opt,
                                          members, rnd)
            for i, k in enumerate(members):
                state["opt"][k] = {n: v[i].clone() for n, v in opt.items()}
                logits.append(e.logits(take(local, i), public))
            losses[members] = trained
            averaged[arch] = weighted_mean(local, e.train_sizes()[members])
            # each participant downloads its group's model and uploads its trained one
            e.traffic.exchange(members, up=e.model_sizes[arch], down=e.model_sizes[arch])
        teacher = ensemble_teacher(torch.stack(logits))
        for arch, model in averaged.items():
            state["globals"][arch] = self.distill(model, teacher, rnd, arch)
        return state, losses

    def predict(self, state: FedDFState, client: int, x: torch.Tensor, rnd: int
                ) -> torch.Tensor:
        """The global model of the client's architecture."""
        e = self.engine
        return e.probs(state["globals"][e.arch_of[client]], x)
