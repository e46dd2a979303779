"""One experiment cell: FedAvg, pflrepro's engine vs a reference in the usual pFL-library style.

Setting (the issue's): the 2-conv CIFAR CNN (878,538 parameters), 20 clients x 400
training + 100 test samples of synthetic CIFAR-shaped uint8 data (3x32x32, 10
classes, built here, no download), batch 32, plain SGD, R rounds (default 5), every
client trains one local epoch per round, and every round is evaluated.

* **engine**: ``pflrepro.training.engine.Engine`` + the registered ``fedavg`` algorithm, fed
  through ``FederatedData.build`` (as a training job does), ``Engine.run`` with
  ``eval_every = 1`` (each client's test set, on CPU in chunks of at most
  ``Engine.cpu_eval_chunk`` samples); with T threads it runs as ``pflrepro train
  --threads T`` does: T client threads of one torch thread each.
* **reference**, written here in the style of popular pFL libraries: a deep-copied
  model per client, ``torch.optim.SGD`` per client, a fresh ``DataLoader`` per client
  per round over a list of per-sample tensors read from the client's compressed
  ``.npz`` file (re-read and decompressed from disk every time a loader is made,
  normalised float32 as those libraries store it), every round an evaluation over
  each client's test set plus a full forward pass over its training set for
  logging (batches of 32), parameters copied with ``param.data = new.data.clone()``
  and averaged into a deep copy of the first client's model; it runs with torch's
  T threads, as a library run does.

Both start from the same initial model (the engine's seeded draw) and see the same
data, so their final accuracies must be close (the correctness check). A "round" is
local training plus that round's evaluation; the evaluation before round 1 and the
one-off setup (data build, model init) are reported separately as "setup".
Repeats alternate the order (engine first, then reference first, ...).
"""

from __future__ import annotations

import argparse
import copy
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from _common import (
    Report,
    best,
    federated_data,
    forward_flops,
    median,
    mm_rate,
    model_name,
    normalise,
    param_count,
    repeat_interleaved,
    synthetic_cifar,
    table,
    torch_threads,
)
from torch import nn
from torch.utils.data import DataLoader

IN_SHAPE = (3, 32, 32)


# --------------------------------------------------------------------------- reference
def write_client_files(root: Path, x: np.ndarray, y: np.ndarray, train: list[np.ndarray],
                       test: list[np.ndarray]) -> None:
    """One compressed .npz per client and split, a pickled dict as the libraries store it."""
    for split, parts in (("train", train), ("test", test)):
        (root / split).mkdir(parents=True, exist_ok=True)
        for k, idx in enumerate(parts):
            np.savez_compressed(root / split / f"{k}.npz",
                                data={"x": normalise(x[idx]), "y": y[idx]})


def read_client_data(root: Path, k: int, split: str) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Re-read and decompress the client's file, then one (x, y) tuple per sample."""
    with open(root / split / f"{k}.npz", "rb") as fh:
        data = np.load(fh, allow_pickle=True)["data"].tolist()
    xs = torch.Tensor(data["x"]).type(torch.float32)
    ys = torch.Tensor(data["y"]).type(torch.int64)
    return [(a, b) for a, b in zip(xs, ys, strict=True)]


class RefClient:
    """A client in the libraries' style: its own model copy, optimiser and loaders."""

    def __init__(self, k: int, model: nn.Module, root: Path, batch_size: int, lr: float,
                 n_train: int) -> None:
        self.k, self.root, self.batch_size, self.n_train = k, root, batch_size, n_train
        self.model = copy.deepcopy(model)
        self.loss = nn.CrossEntropyLoss()
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=lr)

    def load_train_data(self) -> DataLoader:
        return DataLoader(read_client_data(self.root, self.k, "train"), self.batch_size,
                          drop_last=False, shuffle=True)

    def load_test_data(self) -> DataLoader:
        return DataLoader(read_client_data(self.root, self.k, "test"), self.batch_size,
                          drop_last=False, shuffle=False)

    def set_parameters(self, model: nn.Module) -> None:
        for new, old in zip(model.parameters(), self.model.parameters(), strict=True):
            old.data = new.data.clone()

    def train(self) -> int:
        loader = self.load_train_data()
        self.model.train()
        seen = 0
        for xb, yb in loader:
            out = self.model(xb)
            loss = self.loss(out, yb)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            seen += len(yb)
        return seen

    def test_metrics(self) -> tuple[int, int, float]:
        loader = self.load_test_data()
        self.model.eval()
        correct = num = 0
        loss = 0.0
        with torch.no_grad():
            for xb, yb in loader:
                out = self.model(xb)
                correct += int((out.argmax(dim=1) == yb).sum().item())
                loss += self.loss(out, yb).item() * len(yb)
                num += len(yb)
        return correct, num, loss

    def train_metrics(self) -> tuple[float, int]:
        loader = self.load_train_data()
        self.model.eval()
        loss, num = 0.0, 0
        with torch.no_grad():
            for xb, yb in loader:
                loss += self.loss(self.model(xb), yb).item() * len(yb)
                num += len(yb)
        return loss, num


def run_reference(root: Path, init: dict[str, torch.Tensor], arch: str, clients: int,
                  n_train: int, rounds: int, batch_size: int, lr: float,
                  seed: int) -> dict[str, Any]:
    """FedAvg in the libraries' style; times setup, training and evaluation."""
    from pflrepro.models import build_model

    torch.manual_seed(seed)
    t0 = time.perf_counter()
    global_model = build_model(arch, IN_SHAPE, 10)
    global_model.load_state_dict(init)
    cl = [RefClient(k, global_model, root, batch_size, lr, n_train) for k in range(clients)]
    eval_time, train_time = 0.0, 0.0
    trained = evaluated = 0
    acc = float("nan")
    setup = 0.0
    for rnd in range(rounds + 1):
        for c in cl:  # send_models
            c.set_parameters(global_model)
        te = time.perf_counter()  # evaluate(): test metrics + train loss for logging
        correct = num = 0
        for c in cl:
            a, b, _ = c.test_metrics()
            correct, num = correct + a, num + b
        for c in cl:
            _, n = c.train_metrics()
            evaluated += n
        evaluated += num
        acc = correct / num
        if rnd == 0:
            setup = time.perf_counter() - t0
            evaluated = 0
        else:
            eval_time += time.perf_counter() - te
        if rnd == rounds:
            break
        tt = time.perf_counter()
        for c in cl:
            trained += c.train()
        total = sum(c.n_train for c in cl)  # receive_models + aggregate_parameters
        global_model = copy.deepcopy(cl[0].model)
        for p in global_model.parameters():
            p.data.zero_()
        for c in cl:
            w = c.n_train / total
            for gp, cp in zip(global_model.parameters(), c.model.parameters(), strict=True):
                gp.data += cp.data.clone() * w
        train_time += time.perf_counter() - tt
    return {"setup": setup, "train": train_time, "eval": eval_time,
            "rounds_time": train_time + eval_time, "trained": trained,
            "evaluated": evaluated, "accuracy": acc}


# --------------------------------------------------------------------------- engine
def run_engine(x: np.ndarray, y: np.ndarray, train: list[np.ndarray], test: list[np.ndarray],
               arch: str, rounds: int, batch_size: int, lr: float, seed: int, workers: int
               ) -> dict[str, Any]:
    """FedAvg through pflrepro's engine; times setup, training and evaluation."""
    from pflrepro.algorithms import get_algorithm
    from pflrepro.algorithms.base import parse_hyper
    from pflrepro.store import results as R
    from pflrepro.training.engine import Engine
    from pflrepro.training.settings import TrainingConfig

    t0 = time.perf_counter()
    data = federated_data(x, y, train, test)
    cfg = TrainingConfig(rounds=rounds, batch_size=batch_size, local_epochs=1,
                         optimizer="sgd", lr=lr, eval_every=1, model=arch, device="cpu")
    engine = Engine(data, cfg, seed, IN_SHAPE, torch.device("cpu"), workers=workers)
    cls = get_algorithm("fedavg")
    algorithm = cls(engine, parse_hyper(cls, {}))
    evals: list[tuple[int, float, float]] = []
    inner = engine.evaluate

    def timed_evaluate(alg: Any, state: Any, rnd: int, log: Any) -> bool:
        s = time.perf_counter()
        finite = inner(alg, state, rnd, log)
        evals.append((rnd, s, time.perf_counter()))
        return finite

    engine.evaluate = timed_evaluate  # type: ignore[method-assign]
    log = engine.run(algorithm)
    setup_end = evals[0][2]
    eval_time = sum(e - s for r, s, e in evals if r > 0)
    rounds_time = evals[-1][2] - setup_end
    final = [v for r, m, v in zip(log.rounds, log.metrics, log.values, strict=True)
             if r == rounds and m == R.TEST_ACCURACY]  # client order
    sizes = [len(t) for t in test]
    acc = float(np.average(final, weights=sizes))
    steps = sum(engine.steps_per_round(k) * min(batch_size, engine.n_train(k))
                for k in range(engine.num_clients))
    return {"setup": setup_end - t0, "train": rounds_time - eval_time, "eval": eval_time,
            "rounds_time": rounds_time, "trained": steps * rounds,
            "evaluated": sum(sizes) * rounds, "accuracy": acc}


# --------------------------------------------------------------------------- benchmark
def run(quick: bool = False, clients: int | None = None, n_train: int | None = None,
        n_test: int | None = None, rounds: int | None = None, repeats: int | None = None,
        batch_size: int = 32, lr: float = 0.05, model: str = "issue", seed: int = 0) -> Report:
    """Run the benchmark; return its report (tables, targets, checks)."""
    clients = clients or (4 if quick else 20)
    n_train = n_train or (64 if quick else 400)
    n_test = n_test or (32 if quick else 100)
    rounds = rounds or (3 if quick else 5)
    repeats = repeats or (1 if quick else 5)
    arch = model_name(model)
    cores = torch.get_num_threads()
    rep = Report("cell")
    rep.say(f"== cell: FedAvg, {clients} clients x {n_train} train + {n_test} test, "
            f"3x32x32, batch {batch_size}, SGD lr {lr}, {rounds} rounds, eval every round, "
            f"{repeats} repeat(s); {cores} core(s): the engine with {cores} client "
            f"thread(s) of 1 torch thread, the reference with {cores} torch thread(s) ==")

    from pflrepro.models import build_model

    net = build_model(arch, IN_SHAPE, 10)
    fwd = forward_flops(net, IN_SHAPE)
    n_params = param_count(net)
    rep.say(f"  model {arch!r}: {n_params:,} parameters, {fwd / 1e6:.1f} MFLOP forward, "
            f"{3 * fwd / 1e6:.1f} MFLOP per training sample (x3 fwd+bwd)")
    project = build_model("cnn", IN_SHAPE, 10)
    rep.say(f"  (pflrepro's own 'cnn' pads its convolutions: {param_count(project):,} "
            f"parameters, {3 * forward_flops(project, IN_SHAPE) / 1e6:.1f} MFLOP per "
            f"training sample on 32x32 inputs; the issue's CNN has 878,538)")
    x, y, train, test = synthetic_cifar(clients, n_train, n_test, seed=seed)

    mm_before = mm_rate(repeats=3)
    results: dict[str, list[dict[str, Any]]]
    with tempfile.TemporaryDirectory(prefix="bench_cell_") as tmp:
        root = Path(tmp)
        write_client_files(root, x, y, train, test)
        init = _engine_init(arch, seed)
        def engine(r: int) -> dict[str, Any]:
            with torch_threads(1):
                return run_engine(x, y, train, test, arch, rounds, batch_size, lr, seed,
                                  workers=cores)

        results = repeat_interleaved(repeats, {
            "engine": engine,
            "reference": lambda r: run_reference(root, init, arch, clients, n_train, rounds,
                                                 batch_size, lr, seed + r),
        })
    mm = mm_before + mm_rate(repeats=3)
    mm_med = median(mm)

    rows = []
    summary: dict[str, dict[str, float]] = {}
    for name, runs in results.items():
        per_round = [r["rounds_time"] / rounds for r in runs]
        sps = [r["trained"] / r["rounds_time"] for r in runs]
        train_rate = [3 * fwd * r["trained"] / r["train"] / 1e9 for r in runs]
        all_rate = [(3 * fwd * r["trained"] + fwd * r["evaluated"]) / r["rounds_time"] / 1e9
                    for r in runs]
        share = [r["eval"] / r["rounds_time"] for r in runs]
        setup = [r["setup"] for r in runs]
        summary[name] = {"round": median(per_round), "round_best": best(per_round),
                         "share": median(share), "train_rate": median(train_rate),
                         "train_rate_best": best(train_rate, higher=True),
                         "acc": runs[-1]["accuracy"]}
        rows.append([name, median(per_round), best(per_round), median(sps),
                     best(sps, higher=True), median(train_rate),
                     f"{median(train_rate) / mm_med:.0%}", median(all_rate),
                     f"{median(share):.0%}", median(setup),
                     f"{runs[-1]['accuracy']:.3f}"])
    for line in table(rows, ["impl", "s/round med", "best", "samples/s med", "best",
                             "train GFLOP/s", "of mm", "all GFLOP/s", "eval share",
                             "setup s", "final acc"]):
        rep.say(line)
    e, r = summary["engine"], summary["reference"]
    ratio_med = r["round"] / e["round"]
    ratio_best = r["round_best"] / e["round_best"]
    rep.say(f"  torch.mm 2048^2 with {cores} thread(s) (same run, before and after): median "
            f"{mm_med:.1f} GFLOP/s, best {best(mm, higher=True):.1f}")
    rep.say(f"  speed-up engine vs reference (s/round): median {ratio_med:.2f}x, "
            f"best {ratio_best:.2f}x")
    rep.values.update(ratio=ratio_med, ratio_best=ratio_best, engine=e, reference=r,
                      mm=mm_med, fwd_flops=fwd, params=n_params)
    rep.target("cell: engine >= 2x the reference (s/round)",
               f"{ratio_med:.2f}x (best {ratio_best:.2f}x)", ratio_med >= 2)
    rep.target("cell: evaluation <= 15% of a round", f"{e['share']:.0%}", e["share"] <= 0.15)
    frac = e["train_rate"] / mm_med
    rep.target("cell: summed training rate >= 55% of torch.mm",
               f"{frac:.0%} ({e['train_rate']:.1f} of {mm_med:.1f} GFLOP/s; best "
               f"{e['train_rate_best'] / mm_med:.0%})", frac >= 0.55)
    gap = abs(e["acc"] - r["acc"])
    rep.check(f"engine and reference reach similar accuracy (engine {e['acc']:.3f}, "
              f"reference {r['acc']:.3f}, |diff| {gap:.3f} <= 0.1, both > 0.3)",
              gap <= 0.1 and min(e["acc"], r["acc"]) > 0.3)
    return rep


def _engine_init(arch: str, seed: int) -> dict[str, torch.Tensor]:
    """The engine's seeded initial global model (what FedAvg.init starts from)."""
    from pflrepro.models import build_model
    from pflrepro.seeding import NO_CLIENT, SETUP_ROUND, derive_seed

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(derive_seed(seed, SETUP_ROUND, NO_CLIENT, "init"))
        fresh = build_model(arch, IN_SHAPE, 10)
    return {k: v.detach().clone() for k, v in fresh.state_dict().items()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="tiny sizes, 1 repeat")
    p.add_argument("--clients", type=int)
    p.add_argument("--train", type=int, dest="n_train")
    p.add_argument("--test", type=int, dest="n_test")
    p.add_argument("--rounds", type=int)
    p.add_argument("--repeats", type=int)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--model", choices=("issue", "project"), default="issue",
                   help="issue: the 878,538-parameter CNN; project: pflrepro's padded cnn")
    p.add_argument("--threads", type=int, help="torch threads (default: torch's)")
    a = p.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    rep = run(quick=a.quick, clients=a.clients, n_train=a.n_train, n_test=a.n_test,
              rounds=a.rounds, repeats=a.repeats, lr=a.lr, model=a.model)
    return 0 if all(ok for _, ok in rep.checks) else 1


if __name__ == "__main__":
    raise SystemExit(main())
