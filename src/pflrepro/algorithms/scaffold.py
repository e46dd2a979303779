"""SCAFFOLD: local SGD corrected by control variates for client drift.

Karimireddy, Kale, Mohri, Reddi, Stich, Suresh, "SCAFFOLD: Stochastic Controlled
Averaging for Federated Learning", ICML 2020 (Algorithm 1); a baseline of FedAMP
(Huang et al., AAAI 2021). The server holds the global model x and a control c, each
client i a control c_i (all controls start at zero). One round, for every client i:

1. y_i ← x, then K_i local SGD steps y_i ← y_i − η_l (g_i(y_i) + c − c_i);
2. option II: c_i⁺ = c_i − c + (x − y_i) / (K_i η_l);

then the server sets x ← x + η_g · mean_i(y_i − x) and c ← c + mean_i(c_i⁺ − c_i)
(the paper's (|S|/N) factor is 1: every client takes part every round). Every client
predicts with the global model x.

Choices where the paper is silent or that follow it deliberately: averaging is
*uniform* over clients, as in the paper (1/|S| Σ), not size-weighted like FedAvg here;
K_i is the engine's step count of client i (``local_epochs`` × batches, or
``local_steps``), so it may differ between clients; option II presumes plain SGD with
step η_l = ``training.lr``, so any other optimiser (Adam, or SGD with momentum) is
rejected rather than silently mis-scaling the controls; the local optimiser state is
fresh every round (plain SGD has none to keep).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, TypedDict

import numpy as np
import torch

from pflrepro.algorithms.base import Algorithm, register_algorithm
from pflrepro.algorithms.registry import hyper
from pflrepro.training.optim import Params
from pflrepro.training.params import broadcast, put, rows, stack, take, weighted_mean
from pflrepro.training.terms import Offset

if TYPE_CHECKING:  # engine imports algorithms.base: no runtime import
    from pflrepro.training.engine import Engine

#: SCAFFOLD's state: the global model x, the server control c and the client controls
#: c_i (stacked by client). ``global`` is a Python keyword, hence the call form.
ScaffoldState = TypedDict("ScaffoldState", {"global": Params, "control": Params,
                                            "client_control": Params})

@dataclasses.dataclass(frozen=True)
class ScaffoldHyper:
    """Hyperparameters of SCAFFOLD."""

    server_lr: float = hyper(1.0, "η_g: global step size, x ← x + η_g · mean_i(y_i − x) "
                                  "(1 = the plain average of the local models).", minimum=0.0)


@register_algorithm
class Scaffold(Algorithm[ScaffoldState]):
    """SCAFFOLD, option II control updates; with client sampling only the sampled update."""

    name = "scaffold"
    display_name = "SCAFFOLD"
    summary = "SCAFFOLD (Karimireddy et al. 2020): control variates against client drift."
    Hyper = ScaffoldHyper
    requires_plain_sgd = True
    client_sampling = True

    def __init__(self, engine: Engine, hyper: ScaffoldHyper) -> None:
        super().__init__(engine, hyper)
        cfg = engine.cfg
        if cfg.optimizer != "sgd" or cfg.momentum != 0:
            raise ValueError(
                f"scaffold: option II control variates assume plain SGD with step "
                f"training.lr; set training.optimizer: sgd and training.momentum: 0 "
                f"(got optimizer {cfg.optimizer!r}, momentum {cfg.momentum})")
        if hyper.server_lr <= 0:
            raise ValueError(f"scaffold: server_lr must be > 0, got {hyper.server_lr}")

    def init(self) -> ScaffoldState:
        """Global model x; server control c and client controls c_i, all zero."""
        e = self.engine
        x = e.init_params()
        zeros = {k: torch.zeros_like(v) for k, v in x.items()}
        return {"global": x, "control": zeros,
                "client_control": stack(zeros, e.num_clients)}

    def round(self, state: ScaffoldState, rnd: int) -> tuple[ScaffoldState, np.ndarray]:
        """Corrected local SGD per participant, option II controls, uniform server step."""
        e = self.engine
        x, c = state["global"], state["control"]
        chosen = e.participants(rnd)
        c_chosen = rows(state["client_control"], chosen)
        # y_i, client i's local model: from x, fresh SGD, gradients + c − c_i
        y, _, trained = e.train(broadcast(x, len(chosen)), broadcast(e.init_opt(x), len(chosen)),
                                chosen, rnd,
                                terms=[Offset({k: c[k] - c_chosen[k] for k in x},
                                              per_client=True)])
        # down: x and c; up: y_i − x and c_i⁺ − c_i (Algorithm 1)
        e.traffic.exchange(chosen, up=2 * e.model_size, down=2 * e.model_size)
        losses = np.full(e.num_clients, np.nan)
        losses[chosen] = trained
        return self._server(state, y, chosen), losses

    def _server(self, state: ScaffoldState, y: Params, chosen: list[int]) -> ScaffoldState:
        """Option II controls c_i⁺ from the participants' models ``y``, then the server step.

        ``y`` is stacked in the order of ``chosen`` (the set S). c_i⁺ = c_i − c +
        (x − y_i) / (K_i η_l); x ← x + η_g · mean_{i∈S}(y_i − x) and
        c ← c + (|S|/N) · mean_{i∈S}(c_i⁺ − c_i) = c + (1/N) Σ_{i∈S} (c_i⁺ − c_i),
        uniform over clients.
        """
        e = self.engine
        x, c = state["global"], state["control"]
        lr = e.optimizer.lr
        delta_c = stack({k: torch.zeros_like(v) for k, v in x.items()}, len(chosen))
        for row, i in enumerate(chosen):
            c_i = take(state["client_control"], i)
            c_new = {k: c_i[k] - c[k] + (x[k] - y[k][row]) / (e.steps_per_round(i) * lr)
                     for k in x}
            put(delta_c, row, {k: c_new[k] - c_i[k] for k in x})
            put(state["client_control"], i, c_new)
        uniform = torch.ones(len(chosen), device=e.device)
        mean_dy = weighted_mean({k: y[k] - x[k] for k in x}, uniform)
        mean_dc = weighted_mean(delta_c, uniform)
        share = len(chosen) / e.num_clients
        state["global"] = {k: x[k] + self.hp.server_lr * mean_dy[k] for k in x}
        state["control"] = {k: c[k] + share * mean_dc[k] for k in c}
        return state

    def predict(self, state: ScaffoldState, client: int, x: torch.Tensor, rnd: int
                ) -> torch.Tensor:
        """The global model's prediction."""
        return self.engine.probs(state["global"], x)
