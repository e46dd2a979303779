"""Pairwise evaluation: the engine's batched no-grad passes vs one pair at a time.

Three places evaluate many (model, data set) pairs every round:

* **FedeRiCo's loss table**: ℓ_ij, the mean loss of client j's model on client i's
  training set (``estep_loss: mean``; the default sum is n_i times it), for all
  pairs (the all-to-all pass before round 1; later rounds refresh M+1 entries per
  client) -- ``FedeRiCo._losses``;
* **FedFomo's validation losses**: every downloaded model on each client's
  validation split -- ``FedFomo.val_loss``;
* **FedEM's E-step**: every component's per-sample loss on each client's training
  set -- ``FedEM.posteriors``.

The engine side calls those methods of the registered algorithms, which evaluate
through ``Engine.logits`` / ``Engine.mean_loss`` (inference mode, channels-last
images, on CPU chunks of at most ``Engine.cpu_eval_chunk`` samples, ReLUs in place),
client by client through ``Engine.map_clients`` as the algorithms' rounds do: with T
cores, T client threads of one torch thread each. The reference runs with torch's T
threads.
The reference does what pFL libraries do: for each
client a ``DataLoader`` (batch 32) over a list of per-sample tensors, and for each
pair a forward pass of that model over the loader with autograd enabled (as e.g.
FedFomo's ``recalculate_loss`` does), accumulating ``loss.item()``. A third column
("reference, no grad") runs the reference under ``torch.no_grad()`` to split the
speed-up into what no-grad buys and what large batches buy. All three must give the
same numbers (the correctness check). Repeats alternate the order.
"""

from __future__ import annotations

import argparse
import copy
import time
from typing import Any

import torch
import torch.nn.functional as F
from _common import (
    Report,
    best,
    federated_data,
    forward_flops,
    median,
    model_name,
    repeat_interleaved,
    synthetic_cifar,
    table,
    torch_threads,
)
from torch.utils.data import DataLoader

from pflrepro.training.params import take

IN_SHAPE = (3, 32, 32)


def build(clients: int, n_train: int, components: int, arch: str, workers: int,
          seed: int = 0) -> dict[str, Any]:
    """Engine, the three algorithms and their initial states on synthetic data."""
    from pflrepro.algorithms import get_algorithm
    from pflrepro.algorithms.base import parse_hyper
    from pflrepro.training.engine import Engine
    from pflrepro.training.settings import TrainingConfig

    x, y, train, test = synthetic_cifar(clients, n_train, max(2, n_train // 4), seed=seed)
    data = federated_data(x, y, train, test)
    cfg = TrainingConfig(rounds=1, batch_size=32, optimizer="sgd", lr=0.05, model=arch,
                         device="cpu")
    engine = Engine(data, cfg, seed, IN_SHAPE, torch.device("cpu"), workers=workers)
    algs = {}
    for name, params in (("federico", {"estep_loss": "mean"}), ("fedfomo", {}),
                         ("fedem", {"components": components})):
        cls = get_algorithm(name)
        algs[name] = cls(engine, parse_hyper(cls, params))
    # FedeRiCo and FedFomo hold one model per client; FedEM M shared components
    clients_state = engine.client_init()
    fedem_state = algs["fedem"].init()
    return {"engine": engine, "algs": algs, "params": clients_state["params"],
            "fedem": fedem_state}


# --------------------------------------------------------------------------- engine
def engine_federico(b: dict[str, Any]) -> torch.Tensor:
    k = b["engine"].num_clients
    state = {"params": b["params"]}
    return b["algs"]["federico"]._losses(state, [list(range(k))] * k)


def engine_fedfomo(b: dict[str, Any]) -> torch.Tensor:
    e, alg = b["engine"], b["algs"]["fedfomo"]
    k = e.num_clients
    out = torch.empty(k, k, dtype=torch.float64)

    def row(i: int) -> None:  # client i scores every model on its validation split
        for j in range(k):
            out[i, j] = alg.val_loss(take(b["params"], j), i)

    e.threads.run_clients(row, range(k))
    return out


def engine_fedem(b: dict[str, Any]) -> list[torch.Tensor]:
    e, alg = b["engine"], b["algs"]["fedem"]
    return list(e.threads.map_clients(lambda k: alg.posteriors(b["fedem"], k),
                              range(e.num_clients)))


# --------------------------------------------------------------------------- reference
class Reference:
    """One pair at a time: a DataLoader per client, a model copy per peer, batch 32."""

    def __init__(self, b: dict[str, Any], batch_size: int, grad: bool) -> None:
        self.b, self.bs, self.grad = b, batch_size, grad
        self.e = b["engine"]
        self.template = copy.deepcopy(self.e.model).requires_grad_(True)

    def _model(self, params: dict[str, torch.Tensor]) -> torch.nn.Module:
        m = copy.deepcopy(self.template)  # a received model, as the libraries do
        m.load_state_dict({k: v.clone() for k, v in params.items()})
        m.eval()
        return m

    def _loader(self, idx: torch.Tensor) -> DataLoader:
        d = self.e.data
        samples = [(d.x[i], d.y[i]) for i in idx.tolist()]
        return DataLoader(samples, self.bs, shuffle=False)

    def _losses(self, model: torch.nn.Module, loader: DataLoader,
                per_sample: bool = False) -> Any:
        ctx = torch.enable_grad() if self.grad else torch.no_grad()
        total, n, out = 0.0, 0, []
        with ctx:
            for xb, yb in loader:
                logits = model(xb)
                if per_sample:
                    out.append(F.cross_entropy(logits, yb, reduction="none").detach())
                else:
                    total += F.cross_entropy(logits, yb).item() * len(yb)
                    n += len(yb)
        return torch.cat(out) if per_sample else total / n

    def table(self, sets: list[torch.Tensor]) -> torch.Tensor:
        k = self.e.num_clients
        out = torch.empty(k, k, dtype=torch.float64)
        for i in range(k):
            loader = self._loader(sets[i])
            for j in range(k):
                out[i, j] = self._losses(self._model(take(self.b["params"], j)), loader)
        return out

    def federico(self) -> torch.Tensor:
        return self.table(list(self.e.data.train))

    def fedfomo(self) -> torch.Tensor:
        return self.table(self.b["algs"]["fedfomo"].val)

    def fedem(self) -> list[torch.Tensor]:
        state, m_all = self.b["fedem"], self.b["algs"]["fedem"].hp.components
        out = []
        for k in range(self.e.num_clients):
            loader = self._loader(self.e.data.train[k])
            losses = torch.stack([
                self._losses(self._model(take(state["components"], m)), loader,
                             per_sample=True) for m in range(m_all)], dim=1).double()
            out.append(torch.softmax(state["pi"][k].log() - losses, dim=1))
        return out


# --------------------------------------------------------------------------- benchmark
TASKS = ("federico", "fedfomo", "fedem")


def timed(fn: Any) -> tuple[float, Any]:
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def run(quick: bool = False, clients: int | None = None, n_train: int | None = None,
        components: int | None = None, repeats: int | None = None, model: str = "issue",
        batch_size: int = 32) -> Report:
    """Run the benchmark; return its report."""
    clients = clients or (3 if quick else 8)
    n_train = n_train or (40 if quick else 100)
    components = components or (2 if quick else 4)
    repeats = repeats or (1 if quick else 5)
    arch = model_name(model)
    cores = torch.get_num_threads()
    rep = Report("pairwise")
    b = build(clients, n_train, components, arch, workers=cores)
    e = b["engine"]
    n_val = sum(len(v) for v in b["algs"]["fedfomo"].val)
    fwd = forward_flops(e.model, IN_SHAPE)
    samples = {"federico": clients * clients * n_train, "fedfomo": clients * n_val,
               "fedem": components * clients * n_train}
    rep.say(f"== pairwise: {clients} clients x {n_train} train samples, FedFomo validation "
            f"{n_val // clients}/client, FedEM M={components}; model {arch!r}; reference "
            f"batch {batch_size}; {repeats} repeat(s); {cores} core(s): the engine with "
            f"{cores} client thread(s) of 1 torch thread, the reference with {cores} torch "
            f"thread(s) ==")
    refs = {"reference": Reference(b, batch_size, grad=True),
            "reference, no grad": Reference(b, batch_size, grad=False)}
    eng = {"federico": engine_federico, "fedfomo": engine_fedfomo, "fedem": engine_fedem}

    def one(impl: str) -> Any:
        def go(_: int) -> dict[str, tuple[float, Any]]:
            if impl == "engine":
                with torch_threads(1):
                    return {t: timed(lambda t=t: eng[t](b)) for t in TASKS}
            r = refs[impl]
            return {t: timed(getattr(r, t)) for t in TASKS}
        return go

    res = repeat_interleaved(repeats, {n: one(n) for n in ("engine", *refs)})
    times = {impl: {t: [r[t][0] for r in runs] for t in TASKS} for impl, runs in res.items()}
    rows = []
    for t in TASKS:
        et = times["engine"][t]
        row: list[Any] = [t, samples[t], median(et), best(et)]
        for impl in refs:
            rt = times[impl][t]
            row += [median(rt), f"{median(rt) / median(et):.2f}x"]
        row.append(fwd * samples[t] / median(et) / 1e9)
        rows.append(row)
    tot = {impl: [sum(times[impl][t][i] for t in TASKS) for i in range(repeats)]
           for impl in times}
    row = ["all three", sum(samples.values()), median(tot["engine"]), best(tot["engine"])]
    for impl in refs:
        row += [median(tot[impl]), f"{median(tot[impl]) / median(tot['engine']):.2f}x"]
    row.append(fwd * sum(samples.values()) / median(tot["engine"]) / 1e9)
    rows.append(row)
    for line in table(rows, ["task", "fwd samples", "engine s med", "best", "ref s med",
                             "ratio", "ref no-grad s", "ratio", "engine GFLOP/s"]):
        rep.say(line)
    ratio = median(tot["reference"]) / median(tot["engine"])
    ratio_best = best(tot["reference"]) / best(tot["engine"])
    rep.say(f"  speed-up engine vs reference (all three): median {ratio:.2f}x, best "
            f"{ratio_best:.2f}x")
    rep.values.update(ratio=ratio, ratio_best=ratio_best)
    rep.target("pairwise: engine >= 3x one pair at a time", f"{ratio:.2f}x (best "
               f"{ratio_best:.2f}x)", ratio >= 3)
    first = res["engine"][0]
    for impl in refs:
        other = res[impl][0]
        same = all(torch.allclose(first[t][1], other[t][1], rtol=1e-4, atol=1e-5)
                   for t in ("federico", "fedfomo"))
        same = same and all(torch.allclose(a, c, rtol=1e-4, atol=1e-5)
                            for a, c in zip(first["fedem"][1], other["fedem"][1], strict=True))
        rep.check(f"engine and {impl} compute the same losses and posteriors", same)
    return rep


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--clients", type=int)
    p.add_argument("--train", type=int, dest="n_train")
    p.add_argument("--components", type=int)
    p.add_argument("--repeats", type=int)
    p.add_argument("--model", choices=("issue", "project"), default="issue")
    p.add_argument("--threads", type=int)
    a = p.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    rep = run(quick=a.quick, clients=a.clients, n_train=a.n_train, components=a.components,
              repeats=a.repeats, model=a.model)
    return 0 if all(ok for _, ok in rep.checks) else 1


if __name__ == "__main__":
    raise SystemExit(main())
