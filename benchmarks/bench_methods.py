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
* **reference**: the method's plain per-client PyTorch loop of :mod:`reference` (every
  registered method: ``nn.Module`` copies, ``torch.optim.SGD``, ``DataLoader``,
  ``loss.backward()``, the method's regulariser in the loss and its server step), with
  torch's T threads, on the same batches. ``tests/unit/test_benchmarks.py`` checks
  that each reference reaches the engine's predictions to float tolerance, which is
  what makes the comparison one of the same computation.

Both sides start from the same models and train the same rounds (a warm-up round,
then ``--repeats`` rounds, alternating the order A/B, B/A); the ratio reference /
engine is the median round time of each, measured in one run, per method.
Correctness check: every engine round's losses are finite.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import numpy as np
import torch
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
from reference import REFERENCES, Reference

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


def build(name: str, clients: int, n_train: int, public: int, arch: str, workers: int,
          device: str = "cpu", path: str = "auto", seed: int = 0, batch: int = BATCH,
          model_options: dict[str, Any] | None = None,
          params: dict[str, Any] | None = None) -> dict[str, Any]:
    """Engine, algorithm and initial state of method ``name`` on synthetic data.

    ``params`` replaces :data:`PARAMS`' hyperparameters of the method.
    """
    import dataclasses

    from pflrepro.algorithms import get_algorithm
    from pflrepro.algorithms.base import parse_hyper
    from pflrepro.training.engine import Engine
    from pflrepro.training.settings import TrainingConfig

    x, y, train, test = synthetic_cifar(clients + 1, n_train, max(2, n_train // 4), seed=seed)
    data = federated_data(x, y, train[:clients], test[:clients], device=device)
    pub = torch.from_numpy(normalise(x[train[clients][:public]])).to(device)
    data = dataclasses.replace(data, public=pub)
    cfg = TrainingConfig(rounds=3, batch_size=batch, optimizer="sgd", lr=LR, model=arch,
                         model_options=model_options or {}, device=device,
                         client_training=path)
    engine = Engine(data, cfg, seed, IN_SHAPE, torch.device(device), workers=workers)
    cls = get_algorithm(name)
    given = PARAMS.get(name, {}) if params is None else params
    hp = {k: v for k, v in given.items() if k in {f.name for f in dataclasses.fields(cls.Hyper)}}
    alg = cls(engine, parse_hyper(cls, hp))
    return {"engine": engine, "alg": alg, "state": alg.init()}


def reference_for(built: dict[str, Any]) -> Reference:
    """The plain reference loop of the built method, initialised (same starts)."""
    alg = built["alg"]
    ref = REFERENCES[alg.name](built["engine"], alg.hp)
    ref.init()
    return ref


# ------------------------------------------------------------------ the run
def run(quick: bool = False, clients: int | None = None, n_train: int | None = None,
        repeats: int | None = None, threads: int | None = None, model: str = "issue",
        methods: list[str] | None = None, device: str = "cpu", path: str = "auto",
        reference: bool = True, clock: str = "wall") -> Report:
    """Time every method's round on the engine and on its reference loop.

    ``clock``: ``wall`` (``time.perf_counter``) or ``cpu`` (``time.process_time``, the
    process's CPU time: steadier than wall time on a machine other jobs load, and a
    fair measure at ``--threads 1``, where each side computes on one thread).
    """
    now = time.perf_counter if clock == "wall" else time.process_time
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
            f"{repeats} repeat(s) after a warm-up, {clock} clock ==")
    rows = []
    ratios: dict[str, float] = {}
    for name in names:
        built = build(name, clients, n_train, public, arch, threads, device, path)
        e, alg = built["engine"], built["alg"]
        state = {"s": built["state"], "rnd": 1}

        def engine_round(_: int, alg: Any = alg, state: dict = state) -> float:
            t = now()
            state["s"], losses = alg.round(state["s"], state["rnd"])
            if device == "cuda":
                torch.cuda.synchronize()
            took = now() - t
            state["rnd"] += 1
            state["finite"] = bool(np.isfinite(losses[~np.isnan(losses)]).all())
            return took

        fns = {"engine": engine_round}
        if reference and device == "cpu":
            ref = reference_for(built)
            ref_state = {"rnd": 1}

            def ref_round(_: int, ref: Reference = ref, ref_state: dict = ref_state) -> float:
                t = now()
                with torch_threads(threads):
                    ref.round(ref_state["rnd"])
                ref_state["rnd"] += 1
                return now() - t

            fns["reference"] = ref_round
        repeat_interleaved(1, fns)  # warm-up (round 1)
        times = repeat_interleaved(repeats, fns)
        eng = median(times["engine"])
        rep.check(f"{name}: engine rounds give finite losses", state.get("finite", False))
        if "reference" in times:
            ref_t = median(times["reference"])
            ratios[name] = ref_t / eng
            rows.append([name, e.client_training, eng, ref_t, f"{ref_t / eng:.2f}x"])
        else:
            rows.append([name, e.client_training, eng, "-", "-"])
        e.close()
    for line in table(rows, ["method", "path", "engine s/round", "reference s/round",
                             "reference / engine"]):
        rep.say(line)
    if ratios:
        rep.say(f"  median ratio over {len(ratios)} methods: "
                f"{median(list(ratios.values())):.2f}x")
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
    p.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                   help="wall time, or the process's CPU time (steadier under load)")
    a = p.parse_args(argv)
    rep = run(quick=a.quick, clients=a.clients, n_train=a.n_train, repeats=a.repeats,
              threads=a.threads, model=a.model, methods=a.methods, device=a.device,
              path=a.path, clock=a.clock)
    return 0 if all(ok for _, ok in rep.checks) else 1


if __name__ == "__main__":
    sys.exit(main())
