"""Per-FedAvg: FedAvg on the MAML objective, so that one local step personalises.

Fallah, Mokhtari, Ozdaglar, "Personalized Federated Learning with Theoretical
Guarantees: A Model-Agnostic Meta-Learning Approach", NeurIPS 2020 (Algorithm 1). The
shared model w minimises F(w) = mean_i f_i(w − α ∇f_i(w)): the loss of each client
*after* one gradient step of size α on its own data. Each round every client starts
from the global model and runs τ local steps, each on three independent mini-batches
D, D', D'' of its training data:

* temp = w − α ∇f_i(w; D)                          (the inner, personalising step);
* variant ``fo`` (Per-FedAvg FO): w ← w − β ∇f_i(temp; D');
* variant ``hf``: w ← w − β (I − α ∇²f_i(w; D'')) ∇f_i(temp; D'), the stochastic
  gradient of F_i itself.

The paper's Per-FedAvg (HF) replaces the Hessian-vector product by a finite
difference of two gradients (step δ); here it is computed *exactly* by double
backward through autograd (the gradient of the :class:`MAML` loss), no finite
differences, so ``hf`` is the paper's Algorithm 1 with its stochastic MAML gradient
unapproximated. The server averages the round's participants' w uniformly into the
next global model, (1/|S|) Σ_{i∈S} w_i (Algorithm 1: w ← (1/(rn)) Σ_{i∈A_k} w_i, A_k
the rn clients sampled in round k; ``aggregation: weighted`` weights by training-set
size instead, as FedAvg here). Client i evaluates the model it personalises from the
current global model by one step of plain SGD with step α on a mini-batch of its own
training data.

With α = 0 and ``aggregation: weighted`` both variants are FedAvg exactly (the D'
stream is FedAvg's ``local`` stream; the tests compare bits); with the default uniform
mean they are FedAvg with uniform averaging (the same for equal client sizes).

Choices where the paper is silent, or where this project differs from it:

* the β step is the engine's optimiser step: β is ``training.lr`` and the optimiser
  the config's (the paper: plain SGD), with per-client optimiser state kept across
  rounds, as FedAvg does here; τ is the engine's ``steps_per_round`` (``local_steps``,
  or ``local_epochs`` × batches: each step then draws two or three batches, so an
  "epoch" passes over the data two or three times);
* D, D', D'' come from separate seeded streams (purposes ``maml_inner``, ``local``,
  ``maml_hessian``), independent as the paper's analysis assumes, with the
  experiment's batch size for all three (the paper, from memory: 40 each);
* participation: ``training.client_fraction`` (C) sets the fraction r of clients
  sampled uniformly without replacement each round (the paper's rn clients); C = 1,
  every client every round, is the config's default;
* the reported per-client training loss is the mean of f_i(temp; D') over the steps:
  the loss of the personalised model, the quantity F_i that training minimises;
* evaluation personalises with ``personal_steps`` α-steps of plain SGD (default one,
  the paper's objective and evaluation) on batches of the stream ``personalise``,
  seeded by the round: deterministic, recomputed at every prediction, never stored;
* default α = 0.01: the paper's text was not at hand; from memory its experiments use
  α ∈ {0.001, 0.01} with β = 0.001 (not checked). 0.01, the larger, is chosen because
  β = ``training.lr`` here is usually 0.01–0.1 and an inner step much smaller than the
  outer one would hardly personalise; tune it per data set beside the key;
* default variant ``hf``: it follows the gradient of the Per-FedAvg objective itself
  (``fo`` drops the second-order term), and HF was the more accurate of the two in the
  paper's experiments (again from memory); an ``hf`` step costs about twice an ``fo``
  step (one more batch and a double backward).

Training path: the local MAML steps are the objective :class:`MAML` (the inner and
Hessian batches as its extra seeded streams), trained by
:meth:`pflrepro.training.engine.Engine.train` for the round's participants at once: the
per-client loop on the CPU, vmapped on CUDA.
"""

from __future__ import annotations

import dataclasses
from typing import TypedDict

import numpy as np
import torch
from torch import nn
from torch.func import grad

from pflrepro.algorithms.base import Algorithm, register_algorithm
from pflrepro.algorithms.registry import hyper
from pflrepro.training.objective import Aux, Batch, Objective, Stream, masked_ce
from pflrepro.training.optim import OptState, Params
from pflrepro.training.params import broadcast, stack, weighted_mean

#: Mini-batch stream of the inner step's batch D (temp = w − α ∇f(w; D)).
INNER = "maml_inner"
#: Stream of the outer batch D': FedAvg's ``local`` stream, so α = 0 is FedAvg.
OUTER = "local"
#: Stream of the Hessian batch D'' (variant ``hf``).
HESSIAN = "maml_hessian"
#: Stream of the batches a client personalises on before predicting.
PERSONALISE = "personalise"

#: The variants: first-order, and exact Hessian-vector product.
FO, HF = "fo", "hf"
#: Server averaging: uniform over the participants (the paper), or by training-set size.
UNIFORM, WEIGHTED = "uniform", "weighted"
AGGREGATIONS = (UNIFORM, WEIGHTED)

#: Per-FedAvg's state: the global model and each client's optimiser state (stacked by
#: client). ``global`` is a Python keyword, hence the call form of TypedDict.
PerFedAvgState = TypedDict("PerFedAvgState", {"global": Params, "opt": OptState})


@dataclasses.dataclass(frozen=True)
class MAML(Objective):
    """The MAML loss f(w − α g̃(w); D'), whose gradient is Per-FedAvg's step direction.

    D' is the training call's own batch, D the batch of stream ``inner`` and, with
    ``hessian`` set, D'' that of stream ``hessian``. g̃ has the value ∇f(w; D) and,
    with ``hessian``, the derivative ∇²f(w; D'') (sg: no gradient): g̃ = sg(∇f(w; D)) +
    ∇f(w; D'') − sg(∇f(w; D'')). So the gradient is ∇f(temp; D'), temp = w − α ∇f(w; D)
    (first order), minus α ∇²f(w; D'') ∇f(temp; D') with ``hessian`` (an exact
    Hessian-vector product by double backward). The loss is f(temp; D'). Per-FedAvg's
    local step (Fallah et al. 2020, Algorithm 1: FO and HF variants).
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

    def loss(self, model: nn.Module, params: Params, batch: Batch, extra: list[Batch],
             state: object) -> tuple[torch.Tensor, Aux]:
        """f(w − α g̃(w); D'), the inner gradients by nested ``torch.func.grad``."""
        def f(p: Params, b: Batch) -> torch.Tensor:
            return masked_ce(model, p, b)

        g = {k: v.detach() for k, v in grad(f)(params, extra[0]).items()}
        if self.hessian is not None:
            g_h = grad(f)(params, extra[1])
            g = {k: g[k] + (g_h[k] - g_h[k].detach()) for k in g}
        return f({k: params[k] - self.alpha * g[k] for k in params}, batch), {}


@dataclasses.dataclass(frozen=True)
class PerFedAvgHyper:
    """Hyperparameters of Per-FedAvg."""

    alpha: float = hyper(0.01, "α: step size of the inner (personalising) SGD step, in "
                               "training and before evaluation (0 = FedAvg).", minimum=0.0)
    variant: str = hyper(HF, "'hf': the meta-gradient (I − α∇²f(w; D''))∇f(temp; D') with an "
                             "exact Hessian-vector product; 'fo': the first-order "
                             "∇f(temp; D').", choices=(FO, HF))
    personal_steps: int = hyper(1, "α-steps of plain SGD, from the global model on the "
                                   "client's own mini-batches, that personalise it before "
                                   "evaluation (the paper: one).", minimum=1)
    aggregation: str = hyper(UNIFORM, "How the server averages the participants' models: "
                                      "'uniform' (the paper's Algorithm 1, 1/(rn) each) "
                                      "or 'weighted' by training-set size (as FedAvg).",
                             choices=AGGREGATIONS)


@register_algorithm
class PerFedAvg(Algorithm[PerFedAvgState]):
    """Per-FedAvg: MAML local steps, uniform averaging, one-step personalisation."""

    name = "per_fedavg"
    display_name = "Per-FedAvg"
    summary = ("Per-FedAvg (Fallah et al. 2020): FedAvg on the MAML objective "
               "f_i(w − α∇f_i(w)); each client personalises by one α-step.")
    Hyper = PerFedAvgHyper
    records = ()
    client_sampling = True

    def init(self) -> PerFedAvgState:
        """One global model; one optimiser state per client."""
        e = self.engine
        start = e.init_params()
        return {"global": start, "opt": stack(e.init_opt(start), e.num_clients)}

    def objective(self) -> MAML:
        """The local step: the MAML gradient of the configured variant."""
        return MAML(float(self.hp.alpha), INNER, HESSIAN if self.hp.variant == HF else None)

    def round(self, state: PerFedAvgState, rnd: int) -> tuple[PerFedAvgState, np.ndarray]:
        """The round's participants take MAML steps from the global model; the server averages.

        Their models are averaged uniformly (``aggregation: uniform``, the paper) or by
        training-set size (``weighted``); all clients take part by default.
        """
        e = self.engine
        chosen = e.participants(rnd)
        losses = np.full(e.num_clients, np.nan)
        opt = {n: v[chosen] for n, v in state["opt"].items()}
        local, opt, losses[chosen] = e.train(broadcast(state["global"], len(chosen)), opt, chosen,
                                             rnd, OUTER, objective=self.objective())
        for n, v in opt.items():
            state["opt"][n][chosen] = v
        sizes = e.train_sizes()[chosen]
        weights = torch.ones_like(sizes) if self.hp.aggregation == UNIFORM else sizes
        state["global"] = weighted_mean(local, weights)
        # each participant downloads the global model and uploads its trained one
        e.traffic.exchange(chosen, up=e.model_size, down=e.model_size)
        return state, losses

    def personalised(self, state: PerFedAvgState, client: int, rnd: int) -> Params:
        """The global model after ``personal_steps`` α-steps of SGD on the client's data.

        Batches from the ``personalise`` stream of round ``rnd``: the same model every
        time it is asked for; the state is not touched.
        """
        e = self.engine
        alpha = float(self.hp.alpha)
        w: Params = state["global"]
        for idx in e.minibatches(client, rnd, PERSONALISE, self.hp.personal_steps):
            _, g = e.loss_and_grad(w, idx)
            w = {k: w[k] - alpha * g[k] for k in w}
        return w

    def predict(self, state: PerFedAvgState, client: int, x: torch.Tensor, rnd: int
                ) -> torch.Tensor:
        """Client ``client`` predicts with its one-step personalisation of the global model."""
        return self.engine.probs(self.personalised(state, client, rnd), x)
