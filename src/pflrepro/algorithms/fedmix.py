"""FedMix: a federated mixture of K shared experts with a local gate per client.

Reisser, Louizos, Gavves, Welling, "Federated Mixture of Experts", 2021 (arXiv
2107.06724). Client (shard) s models

    p(y | x, s) = Σ_k p(y | x, w_k) · p(z = k | x, θ_s)                      (eq. 4)

with K experts w_1..w_K shared by every shard (averaged by the server) and a gate
θ_s that stays on the shard (never sent). Rather than eq. 4, FedMix maximises the
lower bound (eq. 5)

    Σ_s Σ_{(x,y)∈D_s} E_{q(z|y)} [log p(y | x, w_z) + log p(z | x, θ_s)] + β H(q(z | y))

with one global q(z | y) per class c, φ_c = q(z | y = c), set in closed form (eq. 6):

    q(z = k | y = c) = softmax_k( (1/β) · mean_{y=c} [log p(y | x, w_k) + log p(z = k | x, θ_s)] )

the mean over the samples of class c of every shard: each shard sends its per-class
sums (C × K) and counts (C), never samples, and the server forms the softmax.

One round, for every client s (all take part):

1. it receives the K experts and q;
2. its local steps (``training.local_epochs`` / ``local_steps``, one batch stream,
   purpose ``local``) follow the gradient of the bound, which separates: expert k
   takes the cross-entropy weighted per sample by r_k = q(k | y) (a weighted *mean*,
   Σ_i r_ik ℓ_ik / |batch|), and the gate the cross-entropy against the soft target
   q(· | y) (the gate's part of the bound); the gate and every expert step with the
   run's optimiser, each with its own state, which must be plain SGD (below);
3. with its trained experts and gate it sums log p(y | x, w_k) + log p(z = k | x, θ_s)
   per class over its training set and sends sums and counts with its experts;
4. the server sets expert k to the average of the clients' trained copies weighted by
   m_sk = Σ_{i∈D_s} r_ik (the data mass the client gave expert k; with K = 1 that is
   n_s, FedAvg's weight) and q by eq. 6.

A client predicts with Σ_k p(y | x, w_k) p(z = k | x, θ_s) (no q). A shard unseen in
training has no gate: :meth:`FedMix.predict_unseen` uses p(y | x) ∝ Σ_k q(z = k | y)
p(y | x, w_k), the global q for the gate (the text announces it; the formula is ours).

``posterior`` says what q is conditioned on: ``label`` (default), the paper's global
q(z | y) above; ``label_shard`` q(z | y, s) and ``shard`` q(z | s), which the text allows
("localized approximations ... that do not need to be communicated"), each by eq. 6
over shard s's own samples and kept on the client (docs/methods/fedmix.md).

``objective: marginal`` optimises eq. 4 itself (the paper: possible, but it tends to
collapse onto one expert): r_ik is then the posterior p(z = k | x_i, y_i, s) ∝
p(y_i | x_i, w_k) p(z = k | x_i, θ_s) under the current parameters, recomputed every
step (the exact gradient of log p(y | x, s)), and q is neither learned nor sent. The
two special cases of the paper hold by construction: K = 1 is FedAvg (q = 1, the gate
is constant, the weights are n_s: the same arithmetic, so the same bits on the CPU),
and K = S with ``gate: one_hot`` (p(z = s | x, s) = 1, fixed; ``objective: marginal``)
is Local: expert s sees only shard s, with weight 1.

Choices where the paper's text is silent (ours, configurable where marked):

* the gate (``gate_hidden``): an MLP on the flattened input with one hidden layer of
  ``gate_hidden`` ReLU units (0: a linear gate), K outputs, softmax; its weights are
  drawn like ``torch.nn.Linear``'s (uniform ±1/√fan_in) from the stream
  (seed, setup round, client, ``fedmix_gate``);
* β (``beta``) defaults to 1 (the plain evidence lower bound); q starts uniform;
* expert k starts from ``engine.init_params(client=k)`` (distinct starts, as FedEM's
  components; Local's client k starts from the same draw); a single expert starts from
  ``engine.init_params()``, FedAvg's global start, so K = 1 runs are FedAvg's runs;
* the q statistics are taken after local training, with the client's trained experts
  and gate (no second round trip); a class that no client holds keeps its q row;
* the server weights expert k by the clients' data mass on it (above); an expert no
  client gives mass keeps its parameters; a client uploads only the experts it gave
  mass (with a fixed one-hot gate, its own);
* in a batch where an expert's weights are all exactly 0 it takes no step; where they
  are all exactly 1 its loss is the plain batch mean (the engine's local training);
* the optimiser (not stated in the text) must be plain SGD (``requires_plain_sgd``:
  the config check rejects Adam or momentum): the bound scales expert k's loss by
  q(k | y), which SGD's step follows and Adam's per-coordinate normalisation cancels,
  leaving the experts alike and q near uniform (docs/methods/fedmix.md); the lr is not
  stated either (the config says how it is set);
* the gate is trained with the experts in the same steps, on the same batches; with
  K = 1 there is no gate (p(z = 1 | x) = 1) and q (= 1) is not sent;
* with ``objective: marginal`` the averaging mass m_sk is the posterior mass at the
  start of the round (the client sends these K numbers too);
* optimiser states persist per client across rounds, one for its experts and gate
  together (plain SGD keeps only a step count);
* the reported training loss of client s is Σ_k of the mean weighted batch loss of
  expert k (the expert part of the bound it minimises);
* recorded every round: each client's mean gate p(z = k | x, θ_s) over its test inputs
  (``gate_mass``: client s, peer = expert k) and q (``expert_posterior``: the *client*
  column holds the class c, peer = expert k; with a local ``posterior``, the pooled q).

Local steps: :class:`pflrepro.algorithms.fedmix_experts.GatedExperts` (experts and gate
in one parameter dict) through :meth:`pflrepro.training.engine.Engine.train` (any path), a chunk
of clients at a time (:data:`CHUNK_BYTES`). Measurements: docs/methods/fedmix.md.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TypedDict

import numpy as np
import torch

from pflrepro.algorithms.base import Algorithm, register_algorithm
from pflrepro.algorithms.fedmix_experts import (
    EXPERT_LOSS_KEY,
    GatedExperts,
    gate_logits,
    init_gate,
    join_experts,
    split_experts,
)
from pflrepro.algorithms.registry import hyper
from pflrepro.seeding import SETUP_ROUND, torch_generator
from pflrepro.store.results import EXPERT_POSTERIOR, GATE_MASS, MetricLog
from pflrepro.training.optim import OptState, Params
from pflrepro.training.params import RunningMean, broadcast, put, stack, take

OBJECTIVES = ("bound", "marginal")
#: What q(z | ...) is conditioned on (``posterior``; see the module docstring).
POSTERIORS = ("label", "label_shard", "shard")
GATES = ("learned", "one_hot")
#: Bytes of one chunk's stacked experts (float32): the clients whose local steps run
#: together, so a round holds a few clients' K experts at a time, not every client's.
CHUNK_BYTES = 1 << 30


class FedMixLocalQ(TypedDict, total=False):
    """The key with a local q only (a class of its own: optional keys)."""

    q_local: torch.Tensor  #: each client's own q (S, C', K), float64


class FedMixState(FedMixLocalQ):
    """FedMix's state."""

    experts: Params  #: the K experts, stacked by expert
    q: torch.Tensor  #: the pooled posterior q(z | y) (C, K), float64
    gates: Params  #: each client's gate, stacked by client ({} without a learned gate)
    opt: OptState  #: each client's optimiser state of its experts and gate, stacked


@dataclasses.dataclass(frozen=True)
class FedMixHyper:
    """Hyperparameters of FedMix."""

    experts: int = hyper(4, "K: number of shared experts (the paper's main setting: 4; "
                            "1 is FedAvg).", minimum=1)
    beta: float = hyper(1.0, "beta: entropy weight of q(z|y), the temperature of its "
                             "closed-form softmax (eq. 6; not stated: 1).", minimum=0.0)
    objective: str = hyper("bound", "bound: the paper's lower bound with the global "
                                    "q(z|y) (eq. 5-6); marginal: log p(y|x,s) of eq. 4 "
                                    "directly (posterior-weighted experts, no q).",
                           choices=OBJECTIVES)
    gate: str = hyper("learned", "learned: a local gate network per client; one_hot: "
                                 "p(z=s|x,s) = 1 fixed (needs experts = clients and "
                                 "objective marginal; K = S one-hot is Local).",
                      choices=GATES)
    posterior: str = hyper("label", "What q is conditioned on: label = the paper's global "
                                    "q(z|y) (eq. 6, per-class sums sent); label_shard = "
                                    "q(z|y,s) and shard = q(z|s), each kept on its client "
                                    "(never sent). Only with objective bound.",
                           choices=POSTERIORS)
    gate_hidden: int = hyper(128, "Hidden ReLU units of the gate MLP on the flattened "
                                  "input (0: linear gate); not stated in the paper.",
                             minimum=0)

    def __post_init__(self) -> None:
        """The checks the declared types, bounds and choices cannot state.

        ``parse_hyper`` checks those; here: β strictly positive and finite, and the rules
        between fields.
        """
        if not (math.isfinite(self.beta) and self.beta > 0):
            raise ValueError(f"fedmix: beta must be a finite number > 0, got {self.beta!r}")
        if self.posterior != "label" and self.objective != "bound":
            raise ValueError("fedmix: posterior label_shard or shard needs objective bound "
                             "(the marginal objective has no q)")
        if self.gate == "one_hot" and self.objective != "marginal":
            raise ValueError("fedmix: gate one_hot needs objective marginal (the bound's "
                             "q update takes log p(z|x), which a one-hot gate makes -inf)")


@register_algorithm
class FedMix(Algorithm[FedMixState]):
    """K shared experts, a local gate per client, a global q(z|y); see the module docstring."""

    name = "fedmix"
    display_name = "FedMix"
    summary = ("FedMix (Reisser et al. 2021): K shared experts, a local gate per client, "
               "a global q(z|y) in closed form.")
    Hyper = FedMixHyper
    records = (GATE_MASS, EXPERT_POSTERIOR)
    #: Plain SGD keeps the bound's weighting of the experts by q (Adam cancels it).
    requires_plain_sgd = True

    # ------------------------------------------------------------------ state
    @property
    def learned_gate(self) -> bool:
        """Whether clients train a gate network (K > 1 and ``gate: learned``)."""
        return self.hp.experts > 1 and self.hp.gate == "learned"

    @property
    def learns_q(self) -> bool:
        """Whether q(z|y) is learned and exchanged (``objective: bound`` and K > 1)."""
        return self.hp.objective == "bound" and self.hp.experts > 1

    @property
    def local_q(self) -> bool:
        """Whether each client keeps its own q (``posterior`` label_shard or shard)."""
        return self.learns_q and self.hp.posterior != "label"

    def init(self) -> FedMixState:
        """K experts from distinct seeds, a gate per client, uniform q, optimiser states."""
        e = self.engine
        k_all, s_all = self.hp.experts, e.num_clients
        if self.hp.gate == "one_hot" and k_all != s_all:
            raise ValueError(f"fedmix: gate one_hot needs experts = clients ({s_all}), "
                             f"got experts = {k_all}")
        # one expert: FedAvg's start (the server's draw); K > 1: distinct draws, expert k
        # from client slot k (Local's client k starts from the same draw)
        starts = ([e.init_params()] if k_all == 1
                  else [e.init_params(client=k) for k in range(k_all)])
        experts = {n: torch.stack([p[n] for p in starts]) for n in starts[0]}
        stacked_gates: Params = {}
        if self.learned_gate:
            features = int(np.prod(e.data.x.shape[1:]))
            gates = [init_gate(features, self.hp.gate_hidden, k_all,
                               torch_generator(e.seed, SETUP_ROUND, s, "fedmix_gate"))
                     for s in range(s_all)]
            stacked_gates = {n: torch.stack([g[n] for g in gates]).to(e.device)
                             for n in gates[0]}
        # one optimiser state per client for its experts and gate together (the
        # GatedExperts parameter dict; plain SGD keeps only a step count)
        joint = join_experts(starts,
                             take(stacked_gates, 0) if self.learned_gate else {})
        state: FedMixState = {
            "experts": experts,
            "q": torch.full((e.data.num_classes, k_all), 1.0 / k_all, dtype=torch.float64),
            "gates": stacked_gates,
            "opt": stack(e.init_opt(joint), s_all),
        }
        if self.local_q:  # (S, C', K): C' = C for q(z|y,s), 1 for q(z|s)
            rows = e.data.num_classes if self.hp.posterior == "label_shard" else 1
            state["q_local"] = torch.full((s_all, rows, k_all), 1.0 / k_all,
                                          dtype=torch.float64)
        return state

    # ------------------------------------------------------------------ pieces
    def client_q(self, state: FedMixState, client: int) -> torch.Tensor:
        """The q(z | y = c) client ``client`` weights its samples with: (C, K), float64.

        The global q (``posterior: label``), or the client's own q(z | y, s) or q(z | s)
        (the same row for every class).
        """
        if not self.local_q:
            return state["q"]
        return state["q_local"][client].expand(self.engine.data.num_classes, -1)

    def pooled_q(self, q_local: torch.Tensor) -> torch.Tensor:
        """The shards' q(z | c, s) pooled by class-c counts: Σ_s n_sc q / Σ_s n_sc, (C, K).

        A class no client trains on gets the unweighted mean over shards.
        """
        e = self.engine
        num_classes = e.data.num_classes
        counts = torch.stack([torch.bincount(e.data.y[e.data.train[s]].cpu(),
                                             minlength=num_classes).to(torch.float64)
                              for s in range(e.num_clients)])  # (S, C)
        tables = q_local.expand(-1, num_classes, -1)  # (S, C, K)
        total = counts.sum(0)  # (C,)
        mean = tables.mean(0)
        pooled = (counts[:, :, None] * tables).sum(0) / total.clamp_min(1.0)[:, None]
        return torch.where((total > 0)[:, None], pooled, mean)

    def gate_log_probs(self, state: FedMixState, client: int, x: torch.Tensor) -> torch.Tensor:
        """The gate's log p(z = k | x, θ_client): (n, K), float32 (−inf off a one-hot's expert)."""
        return self._gate_log_probs(take(state["gates"], client) if self.learned_gate else {},
                                    client, x)

    def _gate_log_probs(self, gate: Params, client: int, x: torch.Tensor) -> torch.Tensor:
        k_all = self.hp.experts
        if self.learned_gate:
            with torch.no_grad():
                chunks = [gate_logits(gate, c).log_softmax(dim=-1)
                          for c in x.split(self.engine.eval_chunk)]
            return torch.cat(chunks) if chunks else torch.empty(0, k_all, device=x.device)
        out = torch.zeros(len(x), k_all, device=x.device)
        if self.hp.gate == "one_hot":
            out.fill_(-math.inf)
            out[:, client] = 0.0
        return out

    def expert_log_likelihoods(self, experts: Params, x: torch.Tensor,
                               y: torch.Tensor) -> torch.Tensor:
        """The experts' log p(y_i | x_i, w_k) for every sample i and expert k: (n, K), float32."""
        e = self.engine
        cols = [e.logits(take(experts, k), x).log_softmax(dim=-1).gather(1, y[:, None])[:, 0]
                for k in range(self.hp.experts)]
        return torch.stack(cols, dim=1)

    def responsibilities(self, experts: Params, gate: Params, client: int,
                         idx: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        """r_ik of samples ``idx`` (n, K), float32: q(k | y_i), or the posterior (marginal)."""
        e = self.engine
        y = e.data.y[idx]
        if self.hp.objective == "bound" or self.hp.experts == 1:
            return q.to(device=e.device, dtype=torch.float32)[y]
        joint = (self.expert_log_likelihoods(experts, e.data.x[idx], y)
                 + self._gate_log_probs(gate, client, e.data.x[idx]))
        # a clone made outside inference mode: autograd may save it (sample weights)
        return torch.softmax(joint, dim=1).clone()

    # ------------------------------------------------------------------ round
    def round(self, state: FedMixState, rnd: int) -> tuple[FedMixState, np.ndarray]:
        """Local steps on the bound (or eq. 4); mass-weighted experts; q by eq. 6."""
        e = self.engine
        k_all, s_all = self.hp.experts, e.num_clients
        experts, q = state["experts"], state["q"]
        num_classes = e.data.num_classes
        # m[s, k]: the data mass client s gives expert k (the server's averaging weights)
        mass = torch.zeros(s_all, k_all, dtype=torch.float64)

        def client_mass(s: int) -> torch.Tensor:
            idx = e.data.train[s]
            gate = take(state["gates"], s) if self.learned_gate else {}
            return self.responsibilities(experts, gate, s, idx, self.client_q(state, s)).to(
                torch.float64).sum(0).cpu()

        for s, m in zip(range(s_all), e.threads.map_clients(client_mass, range(s_all)),
                        strict=True):
            mass[s] = m
        weights = mass.to(device=e.device, dtype=torch.float32)
        averages = [RunningMean(take(experts, k), weights[:, k].contiguous()) for k in range(k_all)]
        sums = torch.zeros(num_classes, k_all, dtype=torch.float64)
        counts = torch.zeros(num_classes, dtype=torch.float64)
        losses = np.full(s_all, np.nan)

        local: dict[int, tuple[Params, Params, float]] = {}  # the chunk's trained clients

        def client(s: int) -> tuple[Params, torch.Tensor | None, torch.Tensor | None, float]:
            trained, gate, loss = local.pop(s)
            if not self.learns_q:
                return trained, None, None, loss
            idx = e.data.train[s]
            x, y = e.data.x[idx], e.data.y[idx]
            joint = (self.expert_log_likelihoods(trained, x, y)
                     + self._gate_log_probs(gate, s, x)).to(torch.float64)
            s_sums = torch.zeros(num_classes, k_all, dtype=torch.float64, device=joint.device)
            s_sums.index_add_(0, y, joint)
            s_counts = torch.bincount(y, minlength=num_classes).to(torch.float64)
            return trained, s_sums.cpu(), s_counts.cpu(), loss

        model_size = e.model_size
        for part in self.client_chunks():  # one chunk's expert stacks in memory at a time
            local.update(zip(part, self.local_training(state, rnd, mass, part), strict=True))
            for s, (trained, s_sums, s_counts, loss) in zip(
                    part, e.threads.map_clients(client, part), strict=True):
                for k in range(k_all):
                    if mass[s, k] > 0:
                        averages[k].add(s, take(trained, k))
                if s_sums is not None and s_counts is not None:
                    if self.local_q:  # the client's own q (eq. 6 over its samples)
                        if self.hp.posterior == "shard":
                            s_sums = s_sums.sum(0, keepdim=True)
                            s_counts = s_counts.sum(0, keepdim=True)
                        state["q_local"][s] = self.q_update(s_sums, s_counts,
                                                            state["q_local"][s])
                    else:
                        sums += s_sums
                        counts += s_counts
                losses[s] = loss
                uploaded = int((mass[s] > 0).sum())
                up = uploaded * model_size
                down = k_all * model_size
                if self.learns_q and not self.local_q:
                    up += num_classes * k_all + num_classes  # per-class sums and counts
                    down += num_classes * k_all  # q
                elif self.hp.objective == "marginal" and k_all > 1:
                    up += k_all  # the masses m_sk the server weights with
                e.traffic.exchange(s, up=up, down=down)

        new = {n: v.clone() for n, v in experts.items()}
        for k in range(k_all):
            if mass[:, k].sum() > 0:
                put(new, k, averages[k].result())
        state["experts"] = new
        if self.local_q:
            state["q"] = self.pooled_q(state["q_local"])
        elif self.learns_q:
            state["q"] = self.q_update(sums, counts, q)
        return state, losses

    def q_update(self, sums: torch.Tensor, counts: torch.Tensor,
                 previous: torch.Tensor) -> torch.Tensor:
        """Eq. 6: q(z | y = c) = softmax_k(sums[c] / counts[c] / β); empty classes keep theirs.

        ``sums`` (C, K) are Σ over every shard's class-c samples of
        log p(y | x, w_k) + log p(z = k | x, θ_s); ``counts`` (C,) their numbers.
        """
        out = previous.clone()
        seen = counts > 0
        if bool(seen.any()):
            mean = sums[seen] / counts[seen, None]
            out[seen] = torch.softmax(mean / float(self.hp.beta), dim=1)
        return out

    def objective(self, state: FedMixState, mass: torch.Tensor) -> GatedExperts:
        """Every client's local step (per client: its q, the experts it trains, its gate).

        Client s trains expert k when it gives it data mass (``mass[s, k]`` > 0); with a
        one-hot gate its fixed log p(z | x) is 0 on expert s and −∞ elsewhere.
        """
        e = self.engine
        k_all, s_all = self.hp.experts, e.num_clients
        q = torch.stack([self.client_q(state, s).to(device=e.device, dtype=torch.float32)
                         for s in range(s_all)])
        prior = torch.zeros(s_all, k_all, device=e.device)
        if self.hp.gate == "one_hot":
            prior.fill_(-math.inf)
            prior[torch.arange(s_all), torch.arange(s_all)] = 0.0
        return GatedExperts(q, (mass > 0).to(e.device), prior, k_all,
                            marginal=self.hp.objective == "marginal" and k_all > 1,
                            learned_gate=self.learned_gate, per_client=True)

    def client_chunks(self) -> list[range]:
        """The clients trained together: a chunk's expert stacks stay within CHUNK_BYTES."""
        s_all = self.engine.num_clients
        per_client = 4 * self.hp.experts * self.engine.model_size  # float32 bytes
        size = max(1, min(s_all, CHUNK_BYTES // per_client))
        return [range(a, min(a + size, s_all)) for a in range(0, s_all, size)]

    def local_training(self, state: FedMixState, rnd: int, mass: torch.Tensor,
                       clients: range | None = None) -> list[tuple[Params, Params, float]]:
        """The local steps of ``clients`` (consecutive; all by default) in one train call.

        From the round's experts and each client's gate, on the client's ``local``
        stream, with :meth:`objective`. Returns per client its trained experts
        (stacked), its gate and its loss (Σ_k of expert k's mean batch loss over the
        round's steps); writes the clients' gates and optimiser states into ``state``.
        """
        e = self.engine
        clients = range(e.num_clients) if clients is None else clients
        k_all, a, b = self.hp.experts, clients.start, clients.stop
        params = join_experts([broadcast(take(state["experts"], k), b - a) for k in range(k_all)],
                              {n: v[a:b] for n, v in state["gates"].items()})
        opt = {**{n: v[a:b] for n, v in state["opt"].items()},
               EXPERT_LOSS_KEY: torch.zeros(b - a, k_all, dtype=torch.float64)}
        params, opt, _ = e.train(params, opt, list(clients), rnd,
                                 objective=self.objective(state, mass).rows(a, b))
        running = opt.pop(EXPERT_LOSS_KEY).cpu()
        for n, v in opt.items():
            state["opt"][n][a:b] = v
        out = []
        for i, s in enumerate(clients):
            experts, gate = split_experts(take(params, i), k_all)
            trained = {n: torch.stack([p[n] for p in experts]) for n in experts[0]}
            if self.learned_gate:
                put(state["gates"], s, gate)
            steps = max(e.steps_per_round(s), 1)
            out.append((trained, gate, float(sum(float(v) / steps for v in running[i]))))
        return out

    # ------------------------------------------------------------------ predict
    def predict(self, state: FedMixState, client: int, x: torch.Tensor, rnd: int
                ) -> torch.Tensor:
        """Σ_k p(y | x, w_k) p(z = k | x, θ_client) (eq. 4; no q)."""
        e = self.engine
        gate = self.gate_log_probs(state, client, x).exp()
        out = torch.zeros(len(x), e.data.num_classes, device=e.device)
        for k in range(self.hp.experts):
            out += gate[:, k:k + 1] * e.probs(take(state["experts"], k), x)
        return out

    def predict_unseen(self, state: FedMixState, x: torch.Tensor) -> torch.Tensor:
        """A shard never seen in training (no gate): p(y | x) ∝ Σ_k q(k | y) p(y | x, w_k)."""
        e = self.engine
        q = state["q"].to(device=e.device, dtype=torch.float32)  # (C, K)
        out = torch.zeros(len(x), e.data.num_classes, device=e.device)
        for k in range(self.hp.experts):
            out += q[:, k] * e.probs(take(state["experts"], k), x)
        return out / out.sum(dim=1, keepdim=True)

    # ------------------------------------------------------------------ record
    def gate_mass(self, state: FedMixState) -> np.ndarray:
        """(S, K): each client's mean p(z = k | x, θ_s) over its test inputs."""
        e = self.engine
        rows = []
        for s in range(e.num_clients):
            x = e.data.x[e.data.test[s]]
            rows.append(self.gate_log_probs(state, s, x).exp().to(torch.float64)
                        .mean(dim=0).cpu().numpy())
        return np.stack(rows)

    def record(self, state: FedMixState, rnd: int, log: MetricLog) -> None:
        """Log each client's mean gate (client, peer = expert) and q (class, peer = expert)."""
        log.add_matrix(rnd, GATE_MASS, self.gate_mass(state))
        log.add_matrix(rnd, EXPERT_POSTERIOR, state["q"].numpy())

