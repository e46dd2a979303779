"""Every method: one round on the engine vs a plain per-client reference loop of the method.

Setting: synthetic CIFAR-shaped data (``_common.synthetic_cifar``), K clients of
``--train`` samples, batch 32, plain SGD lr 0.05, one local epoch per round, the
``--model`` CNN; the two distillation methods get a public set of ``--public``
synthetic images (rows of one more client, outside the partition).

* **engine**: the registered algorithm's ``round`` (``Engine`` with T client threads of
  one torch thread each, as ``pflrepro train --threads T``), on the path
  ``training.client_training`` picks (the loop on a CPU, vmap on CUDA), or on the path
  ``--path`` forces. It includes the method's server side (averaging, k-means, E-steps;
  FedDF's server distillation cut to 20 steps, see ``PARAMS``).
* **reference**, written here in the style of pFL libraries, with torch's T threads: per
  client a deep-copied ``nn.Module``, ``torch.optim.SGD``, a ``DataLoader`` (batch 32,
  shuffled) over the client's samples, ``loss.backward()``, ``optimizer.step()``; the
  method's local update as its paper states it, then the plain (size-weighted)
  average. Written for the methods whose local step has a shared objective or term
  (:mod:`pflrepro.objectives`, :mod:`pflrepro.terms`) and for FedAvg: fedavg, local,
  fedprox, apfl, fedem, per_fedavg (``fo``: both sides), perfedckt (with targets from
  the first round). The others print the engine's time alone (no reference written).

Both sides start from the same models and run the same number of local steps; the
ratio reference / engine is measured in one run, per method, with repeats alternating
the order (A/B, B/A). Correctness check: every engine round's losses are finite.
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from _common import (
    Report,
    federated_data,
    median,
    model_name,
    normalise,
    repeat_interleaved,
    synthetic_cifar,
    table,
    torch_threads,
)
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

IN_SHAPE = (3, 32, 32)
BATCH, LR = 32, 0.05
#: Hyperparameters of the benchmarked methods where the default does not suit K clients.
PARAMS: dict[str, dict[str, Any]] = {
    "fedem": {"components": 2}, "perfedckt": {"clusters": 2}, "per_fedavg": {"variant": "fo"},
    "federico": {"neighbors": 2}, "fedmix": {"experts": 2},
    # FedDF's server distillation: 10,000 steps by default (the paper's budget), which
    # would time the server, not the clients; 20 steps keep both visible
    "feddf": {"server_steps": 20, "eval_every": 10, "patience": 20},
}
REFERENCED = ("fedavg", "local", "fedprox", "apfl", "fedem", "per_fedavg", "perfedckt")


def build(name: str, clients: int, n_train: int, public: int, arch: str, workers: int,
          device: str = "cpu", path: str = "auto", seed: int = 0) -> dict[str, Any]:
    """Engine, algorithm and initial state of method ``name`` on synthetic data."""
    import dataclasses

    from pflrepro.algorithms import get_algorithm
    from pflrepro.algorithms.base import parse_hyper
    from pflrepro.engine import Engine
    from pflrepro.training import TrainingConfig

    x, y, train, test = synthetic_cifar(clients + 1, n_train, max(2, n_train // 4), seed=seed)
    data = federated_data(x, y, train[:clients], test[:clients], device=device)
    pub = torch.from_numpy(normalise(x[train[clients][:public]])).to(device)
    data = dataclasses.replace(data, public=pub)
    cfg = TrainingConfig(rounds=3, batch_size=BATCH, optimizer="sgd", lr=LR, model=arch,
                         device=device, client_training=path)
    engine = Engine(data, cfg, seed, IN_SHAPE, torch.device(device), workers=workers)
    cls = get_algorithm(name)
    hp = {k: v for k, v in PARAMS.get(name, {}).items() if k in
          {f.name for f in dataclasses.fields(cls.Hyper)}}
    alg = cls(engine, parse_hyper(cls, hp))
    return {"engine": engine, "alg": alg, "state": alg.init()}


# ------------------------------------------------------------------ the reference
def _module(engine: Any, params: dict[str, torch.Tensor]) -> nn.Module:
    net = copy.deepcopy(engine.model)
    net.requires_grad_(True)
    with torch.no_grad():
        for n, p in net.named_parameters():
            p.copy_(params[n])
    return net


def _loader(engine: Any, k: int, seed: int) -> DataLoader:
    idx = engine.data.train[k]
    return DataLoader(TensorDataset(engine.data.x[idx], engine.data.y[idx]), batch_size=BATCH,
                      shuffle=True, generator=torch.Generator().manual_seed(seed))


def _average(nets: list[nn.Module], sizes: list[int]) -> dict[str, torch.Tensor]:
    total = float(sum(sizes))
    out = {n: torch.zeros_like(p) for n, p in nets[0].named_parameters()}
    for net, s in zip(nets, sizes, strict=True):
        for n, p in net.named_parameters():
            out[n] += p.detach() * (s / total)
    return out


def reference_round(name: str, engine: Any, start: dict[str, torch.Tensor], rnd: int,
                    public_targets: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
    """One round of method ``name``'s local updates, client after client, plain torch."""
    k_all = engine.num_clients
    nets, sizes = [], []
    for k in range(k_all):
        net = _module(engine, start)
        opt = torch.optim.SGD(net.parameters(), lr=LR)
        loader = _loader(engine, k, rnd * 1000 + k)
        if name in ("fedavg", "local", "fedprox"):
            anchor = [p.detach().clone() for p in net.parameters()]
            for xb, yb in loader:
                opt.zero_grad()
                loss = F.cross_entropy(net(xb), yb)
                if name == "fedprox":
                    loss = loss + 0.005 * sum(((p - a) ** 2).sum() for p, a in
                                              zip(net.parameters(), anchor, strict=True))
                loss.backward()
                opt.step()
        elif name == "apfl":  # w on its loss; v on the mixed model's; α by its gradient
            personal = _module(engine, start)
            opt_v = torch.optim.SGD(personal.parameters(), lr=LR)
            alpha = torch.tensor(0.5, requires_grad=True)
            for xb, yb in loader:
                opt.zero_grad()
                opt_v.zero_grad()
                F.cross_entropy(net(xb), yb).backward()
                mixed = {n: alpha * v + (1 - alpha) * w.detach() for (n, v), w in
                         zip(personal.named_parameters(), net.parameters(), strict=True)}
                F.cross_entropy(torch.func.functional_call(net, mixed, (xb,)), yb).backward()
                opt.step()
                opt_v.step()
                with torch.no_grad():
                    alpha -= 0.01 * alpha.grad
                    alpha.clamp_(0, 1)
                    alpha.grad = None
        elif name == "fedem":  # E-step, then each component on q-weighted losses
            comps = [net, _module(engine, start)]
            opts = [opt, torch.optim.SGD(comps[1].parameters(), lr=LR)]
            idx = engine.data.train[k]
            with torch.no_grad():
                losses = torch.stack([F.cross_entropy(c(engine.data.x[idx]), engine.data.y[idx],
                                                      reduction="none") for c in comps], 1)
                q = torch.softmax(-losses, dim=1)
            data = TensorDataset(engine.data.x[idx], engine.data.y[idx], q)
            for m, (c, o) in enumerate(zip(comps, opts, strict=True)):
                for xb, yb, qb in DataLoader(data, batch_size=BATCH, shuffle=True):
                    o.zero_grad()
                    (F.cross_entropy(c(xb), yb, reduction="none") * qb[:, m]).mean().backward()
                    o.step()
        elif name == "per_fedavg":  # FO: temp = w − α∇f(w; D); w ← w − β∇f(temp; D')
            inner = iter(_loader(engine, k, rnd * 1000 + k + 500))
            for xb, yb in loader:
                xi, yi = next(inner)
                temp = copy.deepcopy(net)
                grads = torch.autograd.grad(F.cross_entropy(temp(xi), yi),
                                            list(temp.parameters()))
                with torch.no_grad():
                    for p, g in zip(temp.parameters(), grads, strict=True):
                        p -= 0.01 * g
                outer = torch.autograd.grad(F.cross_entropy(temp(xb), yb),
                                            list(temp.parameters()))
                opt.zero_grad()
                for p, g in zip(net.parameters(), outer, strict=True):
                    p.grad = g
                opt.step()
        elif name == "perfedckt":  # private CE + λ KL(target ‖ s) on a public batch
            assert public_targets is not None and engine.data.public is not None
            pub = DataLoader(TensorDataset(engine.data.public, public_targets),
                             batch_size=BATCH, shuffle=True)
            pub_iter = iter(pub)
            for xb, yb in loader:
                try:
                    xp, tp = next(pub_iter)
                except StopIteration:
                    pub_iter = iter(pub)
                    xp, tp = next(pub_iter)
                opt.zero_grad()
                kl = -(tp * net(xp).log_softmax(-1)).sum(-1).mean()
                (F.cross_entropy(net(xb), yb) + kl).backward()
                opt.step()
        else:
            raise ValueError(f"no reference for {name!r}")
        nets.append(net)
        sizes.append(engine.n_train(k))
    return _average(nets, sizes)


# ------------------------------------------------------------------ the run
def run(quick: bool = False, clients: int | None = None, n_train: int | None = None,
        repeats: int | None = None, threads: int | None = None, model: str = "issue",
        methods: list[str] | None = None, device: str = "cpu", path: str = "auto",
        reference: bool = True) -> Report:
    """Time every method's round on the engine and, where written, the reference."""
    from pflrepro.algorithms import ALGORITHMS

    rep = Report("methods")
    arch = model_name(model)
    clients = clients or (4 if quick else 8)
    n_train = n_train or (32 if quick else 96)
    public = 2 * BATCH
    repeats = repeats or (1 if quick else 3)
    threads = threads or torch.get_num_threads()
    names = methods or sorted(ALGORITHMS)
    rep.say(f"== methods: one round of every method, engine ({device}, path {path}) vs a "
            f"plain per-client reference loop; {arch}, {clients} clients x {n_train} "
            f"samples, batch {BATCH}, SGD lr {LR}, one local epoch, {threads} core(s), "
            f"{repeats} repeat(s) after a warm-up ==")
    rows = []
    ratios: dict[str, float] = {}
    for name in names:
        built = build(name, clients, n_train, public, arch, threads, device, path)
        e, alg = built["engine"], built["alg"]
        state = {"s": built["state"], "rnd": 1}
        start = e.init_params()
        targets = None
        if name == "perfedckt":  # round 1 trains without targets: start from round 2
            state["s"], _ = alg.round(state["s"], 1)
            state["rnd"] = 2
            assert e.data.public is not None
            targets = e.probs(start, e.data.public)

        def engine_round(_: int, e: Any = e, alg: Any = alg, state: dict = state) -> float:
            t = time.perf_counter()
            state["s"], losses = alg.round(state["s"], state["rnd"])
            if device == "cuda":
                torch.cuda.synchronize()
            took = time.perf_counter() - t
            state["finite"] = bool(np.isfinite(losses[~np.isnan(losses)]).all())
            return took

        def ref_round(rep_: int, e: Any = e, name: str = name, targets: Any = targets,
                      start: dict = start) -> float:
            t = time.perf_counter()
            with torch_threads(threads):
                reference_round(name, e, start, rep_ + 1, targets)
            return time.perf_counter() - t

        fns = {"engine": engine_round}
        if reference and name in REFERENCED and device == "cpu":
            fns["reference"] = ref_round
        repeat_interleaved(1, fns)  # warm-up
        times = repeat_interleaved(repeats, fns)
        eng = median(times["engine"])
        rep.check(f"{name}: engine rounds give finite losses", state.get("finite", False))
        if "reference" in times:
            ref = median(times["reference"])
            ratios[name] = ref / eng
            rows.append([name, e.client_training, eng, ref, f"{ref / eng:.2f}x"])
        else:
            rows.append([name, e.client_training, eng, "-", "-"])
        e.close()
    for line in table(rows, ["method", "path", "engine s/round", "reference s/round",
                             "reference / engine"]):
        rep.say(line)
    rep.values["ratios"] = ratios
    return rep


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="tiny sizes, 1 repeat")
    p.add_argument("--clients", type=int)
    p.add_argument("--train", type=int, dest="n_train")
    p.add_argument("--repeats", type=int)
    p.add_argument("--threads", type=int)
    p.add_argument("--model", choices=("issue", "project"), default="issue")
    p.add_argument("--methods", type=lambda s: s.split(","))
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--path", choices=("auto", "loop", "vmap"), default="auto")
    a = p.parse_args(argv)
    rep = run(quick=a.quick, clients=a.clients, n_train=a.n_train, repeats=a.repeats,
              threads=a.threads, model=a.model, methods=a.methods, device=a.device,
              path=a.path)
    return 0 if all(ok for _, ok in rep.checks) else 1


if __name__ == "__main__":
    sys.exit(main())
