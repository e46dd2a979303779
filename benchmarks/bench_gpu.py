"""All clients of a round at once on the GPU: vmapped local training vs the per-client loop.

Setting (the issue's): the 2-conv CIFAR CNN (878,538 parameters), K clients of
synthetic CIFAR-shaped data (``--train`` samples each, 400 by default), batch 32, plain
SGD, one local epoch per round, every client starting from the same global model as in
FedAvg. Per K (10 and 100) it times one round of local training of all K clients

* **loop**: ``Engine.train_client`` client after client (the CPU path of ``Engine.train``);
* **batched**: ``pflrepro.training.local_training.train`` on its vmap path over all K
  clients, parameters
  stacked along a client dimension (``torch.func`` vmap of grad of ``functional_call``;
  convolutions become grouped convolutions);

with ``torch.cuda.synchronize()`` around every timed round, one warm-up round each
(cuDNN planning, allocator), then ``--repeats`` interleaved repeats (A/B, B/A). It
reports the median and best time per round, the speed-up (loop / batched), the peak
GPU memory of each (``torch.cuda.max_memory_allocated``, reset before each), and the
difference of the two updates relative to the loop's, ``‖Δ_batched − Δ_loop‖ /
‖Δ_loop‖``, of the warm-up round (float32, for information: where a ReLU input or a
max-pool pair lies within rounding of a tie, the grouped and the single-client
convolution can break it differently, which changes that step's gradient by far more
than rounding; with TF32 convolutions on the GPU even more so). The correctness check
repeats one round in float64 (two local steps per client on the GPU, every step on
the CPU) where such near-ties do not occur: the gap must stay below 1e-8, and the
clients' losses and step counts must agree.

Every method (``--methods``, default all): one round of each registered method with
``client_training: loop`` and ``vmap`` on the device (``bench_methods``: synthetic
data, K = ``--method-clients``), the speed-up loop / vmap per method, and whether the
two paths' losses agree (1e-3 relative, float32 with TF32 off), and how many calls of
the vectorised path (``local_training.train_vmap``) a round makes: a method whose
local training does not go through ``Engine.train`` runs its own loop on both paths,
makes none and shows about 1x (the table and the line below it name them).

Without CUDA it runs a tiny CPU case (a few clients of uneven sizes) for correctness
only, the per-method section on the CPU at tiny sizes (that it runs, not its times),
prints its times for information, and says that the GPU cases were skipped.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import sys
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from _common import (
    Report,
    best,
    federated_data,
    median,
    model_name,
    param_count,
    repeat_interleaved,
    synthetic_cifar,
    table,
)

from pflrepro.training.params import put, stack, take

IN_SHAPE = (3, 32, 32)
TOL = 1e-8  # float64 agreement of batched and loop updates
GPU_DEVICE = "cuda"


def make_engine(clients: int, n_train: int | list[int], device: torch.device, arch: str,
                batch_size: int, lr: float, optimizer: str, seed: int = 0) -> Any:
    """An engine over K clients of synthetic CIFAR data on ``device``."""
    from pflrepro.training.engine import Engine
    from pflrepro.training.settings import TrainingConfig

    sizes = [n_train] * clients if isinstance(n_train, int) else list(n_train)
    x, y, train, test = synthetic_cifar(clients, max(sizes), 4, seed=seed)
    train = [t[:n] for t, n in zip(train, sizes, strict=True)]
    data = federated_data(x, y, train, test, device=str(device))
    cfg = TrainingConfig(rounds=1, batch_size=batch_size, local_epochs=1, optimizer=optimizer,
                         lr=lr, model=arch, device=device.type)
    return Engine(data, cfg, seed, IN_SHAPE, device)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def round_loop(engine: Any, start: dict, opt: dict, rnd: int,
               steps: int | None = None) -> tuple[dict, dict, list]:
    """FedAvg's local phase: ``Engine.train_client`` client after client."""
    k_all = engine.num_clients
    params = stack(start, k_all)
    opt = {k: v.clone() for k, v in opt.items()}
    losses = []
    for k in range(k_all):
        p, o, loss = engine.train_client(start, take(opt, k), k, rnd, steps=steps)
        put(params, k, p)
        put(opt, k, o)
        losses.append(loss)
    return params, opt, losses


def round_batched(engine: Any, start: dict, opt: dict, rnd: int, chunk: int | None,
                  steps: int | None = None) -> tuple[dict, dict, list]:
    """FedAvg's local phase: every client in one vmapped pass per step."""
    from pflrepro.training import local_training as LT

    k_all = engine.num_clients
    params, opt, losses = LT.train(engine.context, stack(start, k_all), opt, list(range(k_all)),
                                   rnd, steps=steps, path=LT.VMAP, chunk=chunk)
    return params, opt, losses.tolist()


def timed(fn: Any, device: torch.device) -> tuple[float, float, Any]:
    """(seconds, peak bytes or nan, result) of ``fn()`` with the device synchronised."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    _sync(device)
    t = time.perf_counter()
    out = fn()
    _sync(device)
    sec = time.perf_counter() - t
    peak = float(torch.cuda.max_memory_allocated(device)) if device.type == "cuda" else np.nan
    return sec, peak, out


def update_gap(start: dict, a: dict, b: dict) -> float:
    """‖(a − start) − (b − start)‖ / ‖b − start‖ over all parameters of all clients."""
    num = sum(float((a[k] - b[k]).double().pow(2).sum()) for k in a)
    den = sum(float((b[k] - start[k].unsqueeze(0)).double().pow(2).sum()) for k in b)
    return (num / den) ** 0.5 if den > 0 else float("inf")


def compare(engine: Any, repeats: int, chunk: int | None) -> dict[str, Any]:
    """Warm up, check agreement, then time ``repeats`` interleaved rounds of each."""
    device = engine.device
    start = engine.init_params()
    opt = stack(engine.init_opt(start), engine.num_clients)
    fns = {"loop": lambda r: timed(lambda: round_loop(engine, start, opt, r + 1), device),
           "batched": lambda r: timed(lambda: round_batched(engine, start, opt, r + 1, chunk),
                                      device)}
    warm = {name: fn(0) for name, fn in fns.items()}  # warm-up; float32 gap for information
    gap32 = update_gap(start, warm["batched"][2][0], warm["loop"][2][0])
    runs = repeat_interleaved(repeats, fns)
    return {"time": {n: [r[0] for r in v] for n, v in runs.items()},
            "peak": {n: max(r[1] for r in v) for n, v in runs.items()},
            "gap32": gap32,
            "steps": sum(engine.steps_per_round(k) for k in range(engine.num_clients))}


def agreement(engine: Any, chunk: int | None, steps: int | None) -> dict[str, Any]:
    """One round of both in float64 from the same start: update gap, loss gap, steps."""
    saved = engine.data
    engine.data = dataclasses.replace(saved, x=saved.x.to(torch.float64))
    try:
        start = {k: v.to(torch.float64) for k, v in engine.init_params().items()}
        opt = stack(engine.init_opt(start), engine.num_clients)
        bp, bo, bl = round_batched(engine, start, opt, 1, chunk, steps)
        lp, lo, ll = round_loop(engine, start, opt, 1, steps)
    finally:
        engine.data = saved
    gap = update_gap(start, bp, lp)
    loss_gap = float(np.max(np.abs(np.subtract(bl, ll))))
    steps_ok = bool(torch.equal(bo["step"].cpu(), lo["step"].cpu()))
    return {"gap": gap, "loss_gap": loss_gap, "steps_ok": steps_ok,
            "ok": gap <= TOL and loss_gap <= TOL and steps_ok}


def methods_section(rep: Report, device: torch.device, clients: int, n_train: int,
                    repeats: int, model: str, names: list[str] | None) -> None:
    """Every method's round with ``client_training`` loop and vmap on ``device``."""
    import bench_methods as BM

    from pflrepro.algorithms import ALGORITHMS

    names = names or sorted(ALGORITHMS)
    rep.say(f"== gpu methods: one round per method, loop vs vmap on {device.type}, "
            f"{clients} clients x {n_train} samples, {repeats} repeat(s) after a warm-up ==")
    arch = model_name(model)
    rows = []
    speedups: dict[str, float] = {}
    vmapped: dict[str, int] = {}
    for name in names:
        out = {}
        for path in ("loop", "vmap"):
            built = BM.build(name, clients, n_train, 2 * BM.BATCH, arch, 1, device.type, path)
            e, alg, state = built["engine"], built["alg"], built["state"]
            times, losses = [], None
            with counting_vmap() as calls:
                for r in range(1 + repeats):  # round 1 is the warm-up
                    _sync(device)
                    t = time.perf_counter()
                    state, loss = alg.round(state, r + 1)
                    _sync(device)
                    times.append(time.perf_counter() - t)
                    losses = loss if losses is None else losses
            out[path] = (median(times[1:]), np.asarray(losses), e.client_training, calls[0])
            e.close()
        (lt, ll, _, loop_calls), (vt, vl, vpath, vmap_calls) = out["loop"], out["vmap"]
        agree = bool(np.allclose(vl, ll, rtol=1e-3, atol=1e-4, equal_nan=True))
        rep.check(f"{name}: round-1 losses of vmap and loop agree ({vpath})", agree)
        rep.check(f"{name}: the loop run never vmaps", loop_calls == 0)
        speedups[name] = lt / vt
        vmapped[name] = vmap_calls
        rows.append([name, lt, vt, f"{lt / vt:.2f}x",
                     f"{vmap_calls / (1 + repeats):.0f}" if vmap_calls else "0 (own loop)"])
    for line in table(rows, ["method", "loop s/round", "vmap s/round", "loop / vmap",
                             "vmapped calls/round"]):
        rep.say(line)
    own = sorted(n for n, c in vmapped.items() if c == 0)
    rep.say(f"  on the vmap path: {len(vmapped) - len(own)} of {len(vmapped)} methods; "
            f"their own per-client loop (about 1x): {', '.join(own) or 'none'}")
    rep.values["method_speedups"] = speedups
    rep.values["vmapped_calls"] = vmapped


@contextlib.contextmanager
def counting_vmap() -> Iterator[list[int]]:
    """Count the calls of the vectorised training path (``local_training.train_vmap``).

    Yields a one-element list holding the count; a method whose local training does
    not go through ``Engine.train`` (its own loop) makes no call on either path.
    """
    from pflrepro.training import local_training as LT

    calls = [0]
    original = LT.train_vmap

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return original(*args, **kwargs)

    LT.train_vmap = counted
    try:
        yield calls
    finally:
        LT.train_vmap = original


def run(quick: bool = False, ks: list[int] | None = None, n_train: int | None = None,
        repeats: int | None = None, batch_size: int = 32, lr: float = 0.05,
        optimizer: str = "sgd", chunk: int | None = None, model: str = "issue",
        method_names: list[str] | None = None, method_clients: int | None = None) -> Report:
    """Run the benchmark; return its report."""
    rep = Report("gpu")
    arch = model_name(model)
    repeats = repeats or (1 if quick else 5)
    cuda = torch.cuda.is_available()
    rep.say(f"== gpu: all clients of a round at once (vmap over a client dimension) vs the "
            f"per-client loop; {arch}, batch {batch_size}, {optimizer} lr {lr}, one local "
            f"epoch, {repeats} repeat(s) after a warm-up ==")
    from pflrepro.models import build_model

    rep.say(f"  model {arch!r}: {param_count(build_model(arch, IN_SHAPE, 10)):,} parameters")

    # the CPU case: correctness of the batched path with uneven client sizes
    cpu = torch.device("cpu")
    sizes = [40, 23, 33, 9] if quick else [70, 41, 64, 17, 50, 33]
    engine = make_engine(len(sizes), sizes, cpu, arch, batch_size, lr, optimizer)
    res = compare(engine, 1, chunk)
    agree = agreement(engine, chunk, None)
    rep.say(f"  CPU, {len(sizes)} clients of {sizes} samples ({res['steps']} steps in all): "
            f"loop {median(res['time']['loop']):.2f} s, batched "
            f"{median(res['time']['batched']):.2f} s per round (for information: the "
            f"engine keeps the loop on the CPU); float32 update gap {res['gap32']:.1e}")
    rep.check(f"CPU: batched and loop agree in float64 (relative update gap "
              f"{agree['gap']:.1e} <= {TOL:g}; losses within {agree['loss_gap']:.1e}; "
              f"same step counts)", agree["ok"])
    rep.values["cpu_gap"] = agree["gap"]
    if not cuda:
        methods_section(rep, torch.device("cpu"), clients=3, n_train=16, repeats=1,
                        model="project", names=method_names)
        rep.say("  GPU cases skipped: no CUDA device on this machine (the speed-up target "
                "needs one)")
        return rep

    device = torch.device(GPU_DEVICE)
    name = torch.cuda.get_device_name(device)
    ks = ks or [10, 100]
    n_train = n_train or (64 if quick else 400)
    rep.say(f"  GPU: {name}, torch {torch.__version__}, cuDNN "
            f"{torch.backends.cudnn.version()}, TF32 conv "
            f"{torch.backends.cudnn.allow_tf32} / matmul "
            f"{torch.backends.cuda.matmul.allow_tf32}; {n_train} train samples per client, "
            f"chunk {chunk or 'all'}")
    rows = []
    ratios: dict[int, float] = {}
    for k in ks:
        engine = make_engine(k, n_train, device, arch, batch_size, lr, optimizer)
        res = compare(engine, repeats, chunk)
        lt, bt = res["time"]["loop"], res["time"]["batched"]
        ratio = median(lt) / median(bt)
        ratios[k] = ratio
        rows.append([k, res["steps"], median(lt), best(lt), median(bt), best(bt),
                     f"{ratio:.1f}x", f"{best(lt) / best(bt):.1f}x",
                     res["peak"]["loop"] / 2**20, res["peak"]["batched"] / 2**20,
                     f"{res['gap32']:.1e}"])
        agree = agreement(engine, chunk, 2)
        rep.check(f"GPU K={k}: batched and loop agree in float64, 2 steps per client "
                  f"(relative update gap {agree['gap']:.1e} <= {TOL:g}; losses within "
                  f"{agree['loss_gap']:.1e}; same step counts)", agree["ok"])
        del engine
        torch.cuda.empty_cache()
    for line in table(rows, ["K", "steps", "loop s/round", "best", "batched s/round", "best",
                             "speed-up", "best", "loop peak MB", "batched peak MB",
                             "f32 update gap"]):
        rep.say(line)
    rep.values["ratios"] = ratios
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    methods_section(rep, device, clients=method_clients or (10 if quick else 50),
                    n_train=64 if quick else 200, repeats=repeats, model=model,
                    names=method_names)
    if 100 in ratios:
        rep.target("gpu: batched >= 10x the per-client loop at K=100 (H200)",
                   f"{ratios[100]:.1f}x on {name}", ratios[100] >= 10)
    faster = all(r > 1 for r in ratios.values())
    rep.say(f"  batched faster than the loop at every K: {'yes' if faster else 'no'} "
            f"(auto picks batched on CUDA)")
    return rep


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="small sizes, 1 repeat")
    p.add_argument("--ks", type=lambda s: [int(v) for v in s.split(",")])
    p.add_argument("--train", type=int, dest="n_train")
    p.add_argument("--repeats", type=int)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--optimizer", choices=("sgd", "adam"), default="sgd")
    p.add_argument("--chunk", type=int, help="clients per batched pass (default: all)")
    p.add_argument("--model", choices=("issue", "project"), default="issue")
    p.add_argument("--methods", type=lambda s: s.split(","), dest="method_names",
                   help="comma-separated methods of the per-method section (default: all)")
    p.add_argument("--method-clients", type=int, help="K of the per-method section")
    a = p.parse_args(argv)
    rep = run(quick=a.quick, ks=a.ks, n_train=a.n_train, repeats=a.repeats,
              batch_size=a.batch_size, lr=a.lr, optimizer=a.optimizer, chunk=a.chunk,
              model=a.model, method_names=a.method_names, method_clients=a.method_clients)
    return 0 if all(ok for _, ok in rep.checks) else 1


if __name__ == "__main__":
    sys.exit(main())
