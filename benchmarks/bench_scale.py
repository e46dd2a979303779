"""Scaling in the number of clients K: time per FedAvg round and peak memory.

For each K (default 10, 20, 100, 400) a fresh subprocess builds K clients of
synthetic CIFAR-shaped data (``--train``/``--test`` samples each) through
``FederatedData.build``, runs FedAvg rounds with the engine (``local_steps`` fixed
steps per client, so a round's compute is proportional to K) and reports

* time per round (training, ``Algorithm.round``) and per evaluation
  (``Engine.evaluate``), median over the timed rounds after one warm-up round;
* memory from ``/proc/self/status``: resident set after imports (base), peak while
  building the data (VmHWM, reset before each phase through ``/proc/self/clear_refs``
  where the kernel allows it, else ``ru_maxrss``), resident after the build, and
  peak during the rounds. (``ru_maxrss`` is only a fallback: on Linux a child
  inherits its parent's high-water mark through fork + exec.)

The parent fits peak memory = a + b·K and compares the slope b with what K clients
must cost if the data set is resident once: each client's own samples as float32
(``FedAvg.round`` keeps a running weighted sum, so no model is held per client; with
plain SGD the per-client optimiser state is a step counter). A per-client copy of
the data set would show as a slope far above that, or as curvature (the check: the
fit on the smaller K predicts the largest K's peak within 25%).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _common import PYTHON, Report, median, proc_status, reset_peak, table

HERE = Path(__file__).resolve()


# --------------------------------------------------------------------------- child
def child(k: int, n_train: int, n_test: int, steps: int, rounds: int, model: str,
          threads: int | None) -> dict[str, Any]:
    import numpy as np
    import torch
    from _common import federated_data, model_name, synthetic_cifar

    from pflrepro.algorithms import get_algorithm
    from pflrepro.algorithms.base import parse_hyper
    from pflrepro.store import results as R
    from pflrepro.training.engine import Engine
    from pflrepro.training.settings import TrainingConfig

    if threads:
        torch.set_num_threads(threads)
    arch = model_name(model)
    x, y, train, test = synthetic_cifar(k, n_train, n_test)
    raw = x.nbytes + y.nbytes
    base = proc_status("VmRSS")
    resettable = reset_peak()
    t = time.perf_counter()
    data = federated_data(x, y, train, test)
    build_s = time.perf_counter() - t
    build_peak = proc_status("VmHWM")
    del x, y  # the uint8 source is no longer needed (a job holds it memory-mapped)
    after_build = proc_status("VmRSS")
    cfg = TrainingConfig(rounds=rounds, batch_size=32, local_steps=steps, optimizer="sgd",
                         lr=0.05, model=arch, device="cpu")
    engine = Engine(data, cfg, 0, (3, 32, 32), torch.device("cpu"))
    cls = get_algorithm("fedavg")
    alg = cls(engine, parse_hyper(cls, {}))
    state = alg.init()
    reset_peak()
    train_s, eval_s = [], []
    for rnd in range(1, rounds + 1):
        t = time.perf_counter()
        state, _ = alg.round(state, rnd)
        t1 = time.perf_counter()
        engine.evaluate(alg, state, rnd, R.MetricLog())
        train_s.append(t1 - t)
        eval_s.append(time.perf_counter() - t1)
    n_params = sum(v.numel() for v in state["global"].values())
    return {
        "K": k, "base": base, "build_peak": build_peak, "after_build": after_build,
        "round_peak": proc_status("VmHWM"), "maxrss": resource.getrusage(
            resource.RUSAGE_SELF).ru_maxrss * 1024, "resettable": resettable,
        "data_bytes": data.x.element_size() * data.x.numel() + data.y.element_size()
        * data.y.numel(), "raw_bytes": raw, "param_bytes": 4 * n_params,
        "build_s": build_s, "train_s": train_s, "eval_s": eval_s,
        "threads": torch.get_num_threads(), "numpy": np.__version__,
    }


# --------------------------------------------------------------------------- parent
def measure(k: int, n_train: int, n_test: int, steps: int, rounds: int, model: str,
            threads: int | None) -> dict[str, Any]:
    cmd = [PYTHON, str(HERE), "--child", str(k), "--train", str(n_train), "--test",
           str(n_test), "--steps", str(steps), "--rounds", str(rounds), "--model", model]
    if threads:
        cmd += ["--threads", str(threads)]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE.parent), env.get("PYTHONPATH", "")])
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"scale child K={k} failed:\n{proc.stdout}\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def fit(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least-squares a + b·x."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx if sxx else 0.0
    return my - b * mx, b


def run(quick: bool = False, ks: list[int] | None = None, n_train: int | None = None,
        n_test: int | None = None, steps: int = 1, rounds: int | None = None,
        model: str = "issue", threads: int | None = None) -> Report:
    """Run the benchmark; return its report."""
    ks = ks or ([2, 6] if quick else [10, 20, 100, 400])
    n_train = n_train or (32 if quick else 100)
    n_test = n_test or (8 if quick else 25)
    rounds = rounds or (1 if quick else 3)
    rep = Report("scale")
    rep.say(f"== scale: FedAvg, K clients x ({n_train} train + {n_test} test), {steps} local "
            f"step(s) of batch 32 per client per round, {rounds} round(s) (first = warm-up "
            f"when > 1), one subprocess per K ==")
    res = [measure(k, n_train, n_test, steps, rounds, model, threads) for k in ks]
    mb = 1 / 2**20
    rows = []
    for r in res:
        timed_t = r["train_s"][1:] or r["train_s"]
        timed_e = r["eval_s"][1:] or r["eval_s"]
        rows.append([r["K"], median(timed_t), 1e3 * median(timed_t) / r["K"], median(timed_e),
                     r["build_s"], r["base"] * mb, r["data_bytes"] * mb, r["build_peak"] * mb,
                     r["after_build"] * mb, r["round_peak"] * mb])
    for line in table(rows, ["K", "train s/round", "ms/client", "eval s", "build s",
                             "base MB", "data MB", "build peak MB", "after build MB",
                             "round peak MB"]):
        rep.say(line)
    kk = [float(r["K"]) for r in res]
    # peaks after the synthetic data exists (the generator's temporaries are not the
    # engine's); the process peak where the kernel does not let us reset it
    peak = [float(max(r["build_peak"], r["round_peak"]) if r["resettable"] else r["maxrss"])
            for r in res]
    a, b = fit(kk, peak)
    per_client_data = res[-1]["data_bytes"] / res[-1]["K"]
    expected = per_client_data
    rep.say(f"  peak memory fit: {a * mb:.0f} MB + {b * mb:.2f} MB x K; resident-once "
            f"estimate {expected * mb:.2f} MB per client (its float32 data; one model "
            f"is {res[-1]['param_bytes'] * mb:.2f} MB, none is kept per client)")
    big = res[-1]  # the largest K: fixed costs (imports, pandas) matter least
    rep.say(f"  data build at K={big['K']}: peak {(big['build_peak'] - big['base']) * mb:.0f} MB "
            f"above base = {(big['build_peak'] - big['base']) / big['data_bytes']:.1f}x the "
            f"resident float32 data (transient copies in FederatedData.build); resident "
            f"after the build {(big['after_build'] - big['base']) * mb:.0f} MB")
    t_per_client = [median(r["train_s"][1:] or r["train_s"]) / r["K"] for r in res]
    rep.say("  training time per client per round: "
            + ", ".join(f"K={r['K']}: {1e3 * t:.0f} ms" for r, t in zip(res, t_per_client,
                                                                       strict=True)))
    if not res[0]["resettable"]:
        rep.say("  (peak reset via /proc/self/clear_refs not allowed: build and round peaks "
                "are process peaks)")
    # linearity: fit on all but the largest K, predict the largest
    if len(res) >= 3:
        a2, b2 = fit(kk[:-1], peak[:-1])
        pred = a2 + b2 * kk[-1]
        err = abs(pred - peak[-1]) / peak[-1]
        rep.say(f"  linearity: fit on K <= {int(kk[-2])} predicts {pred * mb:.0f} MB at "
                f"K={int(kk[-1])}, measured {peak[-1] * mb:.0f} MB ({err:.0%} off)")
    else:
        err = 0.0
    slope_ok = b <= 2.0 * expected
    linear = err <= 0.25
    rep.values.update(slope=b, expected=expected, err=err)
    rep.target("scale: memory linear in K with a small slope (no per-client data copy)",
               f"slope {b * mb:.2f} MB/client vs {expected * mb:.2f} resident-once; "
               f"largest K off the linear fit by {err:.0%}", slope_ok and linear)
    rep.check("every K ran and the data tensor holds each sample once (data MB = K x "
              "per-client samples x 3x32x32 x 4 B)",
              all(r["data_bytes"] == r["K"] * (n_train + n_test) * (3 * 32 * 32 * 4 + 8)
                  for r in res))
    return rep


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--ks", type=lambda s: [int(v) for v in s.split(",")])
    p.add_argument("--train", type=int, dest="n_train")
    p.add_argument("--test", type=int, dest="n_test")
    p.add_argument("--steps", type=int, default=1)
    p.add_argument("--rounds", type=int)
    p.add_argument("--model", choices=("issue", "project"), default="issue")
    p.add_argument("--threads", type=int)
    p.add_argument("--child", type=int, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child is not None:
        print(json.dumps(child(a.child, a.n_train, a.n_test, a.steps, a.rounds, a.model,
                               a.threads)))
        return 0
    rep = run(quick=a.quick, ks=a.ks, n_train=a.n_train, n_test=a.n_test, steps=a.steps,
              rounds=a.rounds, model=a.model, threads=a.threads)
    return 0 if all(ok for _, ok in rep.checks) else 1


if __name__ == "__main__":
    sys.exit(main())
