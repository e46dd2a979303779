"""FedDF: FedAvg per architecture, then ensemble distillation on unlabeled public data.

Lin, Kong, Stich, Jaggi, "Ensemble Distillation for Robust Model Fusion in Federated
Learning", NeurIPS 2020 (Algorithms 1 and 3). Clients of one architecture form a
prototype group with one global model. Each round t:

1. m = C·K clients are sampled (``training.client_fraction``; ``engine.participants``);
   each downloads its group's global model and runs its local steps (FedAvg's);
2. the server averages each group's returned models, weighted by training-set size
   (FedAvg within the group);
3. the teacher is the ensemble of *all* returned models, of every architecture: on a
   public input d, σ(mean over the m models of their logits f(x̂_k, d)); each group's
   averaged model is then trained for ``server_steps`` Adam steps on public
   mini-batches to minimise KL(teacher ‖ σ(f(x, d))); the result is the group's new
   global model.

Client k predicts with its group's global model (FedDF trains global models, not
personalised ones). The public data are unlabeled (labels are never read).

Choices where the paper is silent or where this project deviates:

* a fixed number of server steps (``server_steps``) instead of the paper's 10⁴ steps
  with early stopping on a validation set: there is no labeled validation set here;
* the distillation optimiser is Adam (the paper's) with a fresh state every round,
  learning rate ``server_lr`` (the paper: 1e-3), temperature 1;
* server mini-batches of ``public_batch`` rows (0 = ``training.batch_size``), from a
  stream seeded by (seed, round, 'distill', group);
* a group with no participant in a round keeps its model (nothing to average, and its
  members get no new model that round); every group that had one is distilled;
* clients keep their own optimiser state across rounds, as in :mod:`.fedavg`.

With one architecture and ``server_steps: 0`` this is FedAvg exactly (same bits).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from pflrepro.algorithms.base import Algorithm, State, register_algorithm
from pflrepro.algorithms.registry import hyper
from pflrepro.optim import Optimizer, OptState, Params
from pflrepro.params import stack, take, weighted_mean
from pflrepro.seeding import NO_CLIENT


@dataclasses.dataclass(frozen=True)
class FedDFHyper:
    """Hyperparameters of FedDF."""

    server_steps: int = hyper(1000, "Adam steps of server-side ensemble distillation per "
                                    "round and group (the paper: 1e4 with early stopping on "
                                    "a validation set; 0: FedAvg per group).", minimum=0)
    server_lr: float = hyper(1e-3, "Learning rate of the server's Adam (the paper: 1e-3).",
                             minimum=1e-12)
    public_batch: int = hyper(0, "Rows of a server mini-batch of the public set "
                                 "(0 = training.batch_size).", minimum=0)


def ensemble_teacher(logits: torch.Tensor) -> torch.Tensor:
    """The teacher's soft labels: σ(mean over models of their logits); (m, n, N) -> (n, N)."""
    return logits.mean(dim=0).softmax(dim=-1)


@register_algorithm
class FedDF(Algorithm):
    """A global model per architecture: FedAvg within it, distilled from every client."""

    name = "feddf"
    summary = ("FedDF (Lin et al. 2020): FedAvg per architecture, then ensemble distillation "
               "of each global model on the unlabeled public set.")
    Hyper = FedDFHyper
    partial_participation = True
    needs_public = True
    heterogeneous_models = True

    def init(self) -> State:
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

    def distill(self, student: Params, teacher: torch.Tensor, rnd: int, arch: int) -> Params:
        """``server_steps`` Adam steps of ``student`` towards ``teacher`` on the public set."""
        e = self.engine
        public = e.data.public
        assert public is not None
        if self.hp.server_steps == 0:
            return student
        rows = torch.arange(len(public), device=e.device)
        batches = e.minibatches(NO_CLIENT, rnd, f"distill-{arch}", self.hp.server_steps,
                                pool=rows, batch_size=self.hp.public_batch or None)
        adam = Optimizer("adam", self.hp.server_lr)
        work = {k: v.detach().clone() for k, v in student.items()}
        state = adam.init(work)
        for batch in batches:
            _, grads = e.distill_loss_and_grad(work, public[batch], teacher[batch])
            adam.step_(work, grads, state)
        return work

    def round(self, state: State, rnd: int) -> tuple[State, np.ndarray]:
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
            local, opt, trained = e.train(stack(state["globals"][arch], len(members)), opt,
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

    def predict(self, state: State, client: int, x: torch.Tensor, rnd: int) -> torch.Tensor:
        """The global model of the client's architecture."""
        e = self.engine
        return e.probs(state["globals"][e.arch_of[client]], x)
