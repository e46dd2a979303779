"""The vectorised path at the paper's shapes: one round of vmap vs the loop, and H200 memory.

Cases come from config.yaml: every paper-scale experiment (no ``scale: cpu``), parsed
with ``pflrepro.config.parse``, grouped by its models (``training.model`` or the
``architectures`` of PerFed-CKT Table 2), its data set's image shape and its class
count. Each method's algorithm runs once per group, with the training settings
(batch size, optimiser, learning rate, local epochs, model options) and the
hyperparameters as configured in the first experiment of the group that runs it (the
method named like its algorithm when an experiment lists variants). Cuts, each
printed with the table:

* clients: the experiment's client count, at most :data:`MAX_CLIENTS` per model
  (``--max-clients``); the table says "run / paper";
* data: synthetic images of the data set's shape and class count
  (``_common.synthetic_cifar``), every client one batch of the configured size
  (a local step) and every third one and a half (two steps, the second padded), 4
  test samples each; the public set, where the experiment has one, two batches;
* every client takes part in the round (``client_fraction`` 1: PerFed-CKT's 0.1 of
  a few clients would sample fewer than its clusters);
* FedDF's server distillation cut to :data:`FEDDF_SERVER_STEPS` steps (10,000 as
  configured; the clients' training is what is compared).

Each case runs twice, each in its own subprocess on the CPU: one round
(``Algorithm.round``) with ``training.client_training: loop`` and one with ``vmap``
(the CUDA code path: every client in one ``torch.func.vmap`` pass per step), from the
same seeded start. The parent compares every floating tensor of the two states after
the round relative to the round's change of it (``‖vmap − loop‖ / ‖loop − start‖``;
the tensor's own norm where it did not change), non-floating ones exactly, and the
reported losses; a case agrees when the largest gap is at most :data:`TOL`. Models
and data are float64: in float32 a ReLU or max-pool near-tie may break differently in
the grouped convolution (``tests/unit/test_local_training.py``), and Adam's first step,
``g / (|g| + eps)``, turns the rounding of a tiny gradient into a full step, so a
float32 gap measures rounding, not the computation. Peak resident memory (VmHWM, reset before
the round) is recorded per side. The calls of the vectorised path
(``local_training.train_vmap``) are counted: a method whose local training runs its
own loop makes none and is named.

Then, per paper experiment, what the CUDA path would need on an H200
(:mod:`pflrepro.training.memory`): per client its parameters x (parameters, working
copy, gradients + the optimiser's slots) plus activations measured by a forward pass
at the batch size (one per FedMix expert, one more for a public-set distillation
batch; the largest architecture for a heterogeneous experiment), times all its
clients; whether that fits 139 GiB and, if not, the clients per pass that the
vectorised path's automatic chunking would take.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from _common import PYTHON, REPO, Report, proc_status, reset_peak, table

HERE = Path(__file__).resolve()
#: Largest client count run per model (a stated fraction of the paper's).
MAX_CLIENTS = {"mlp": 20, "cnn": 8, "vgg11": 6, "vgg13": 6}
#: FedDF's server distillation steps in the benchmark (a server-side cut).
FEDDF_SERVER_STEPS = 20
#: Largest relative gap of agreeing states and losses (float64).
TOL = 1e-8
H200_BYTES = 139 * 2**30
N_TEST = 4


@dataclass(frozen=True)
class Case:
    """One method at one paper shape."""

    group: str
    experiment: str
    dtype: str  # "float32" or "float64"
    method: str
    algorithm: str
    params: dict[str, Any]
    training: dict[str, Any]
    shape: tuple[int, int, int]
    classes: int
    paper_clients: int
    clients: int
    public: int


def _models(training: Any) -> str:
    return "+".join(m if not o else f"{m}{json.dumps(dict(o), separators=(',', ':'))}"
                    for m, o in training.models)


def paper_config(path: Path = REPO / "config.yaml") -> Any:
    """config.yaml parsed (``pflrepro.config.parse``)."""
    import yaml

    from pflrepro.config import parse

    return parse(yaml.safe_load(path.read_text()))


def paper_experiments(cfg: Any) -> Iterator[Any]:
    """The paper-scale experiments of ``cfg``, in config order."""
    return (e for e in cfg.experiments.values() if e.scale != "cpu")


def paper_clients(exp: Any) -> int:
    """The experiment's client count (its largest partition's)."""
    return max(p.clients for p in exp.partitions)


def cases(cfg: Any, max_clients: int | None = None, batch: int | None = None,
          dtype: str = "float64") -> list[Case]:
    """Every (paper shape, algorithm) once; see the module docstring.

    ``max_clients`` replaces :data:`MAX_CLIENTS`; ``batch`` replaces the configured
    batch size (and the per-client sample counts with it); ``dtype`` of the models and
    data.
    """
    from pflrepro.data.datasets import DATASETS

    found: dict[tuple[str, str], list[tuple[Any, str]]] = {}
    for exp in paper_experiments(cfg):
        src = DATASETS[exp.dataset]
        group = (f"{_models(exp.training)} {'x'.join(map(str, src.image_shape))}/"
                 f"{src.num_classes}")
        for name in exp.methods:
            found.setdefault((group, cfg.methods[name].algorithm), []).append((exp, name))
    chosen: dict[tuple[str, str], Case] = {}
    for (group, algorithm), runs in found.items():
        exp, name = next(((e, n) for e, n in runs if n == algorithm), runs[0])
        src = DATASETS[exp.dataset]
        training = exp.training.to_dict()
        if batch:
            training["batch_size"] = batch
        cap = max_clients or min(MAX_CLIENTS.get(m, 8) for m, _ in exp.training.models)
        params = dict(cfg.methods[name].params)
        if algorithm == "feddf":
            params["server_steps"] = FEDDF_SERVER_STEPS
        chosen[(group, algorithm)] = Case(
            group=group, experiment=exp.name, dtype=dtype, method=name, algorithm=algorithm,
            params=params,
            training=training, shape=tuple(src.image_shape), classes=src.num_classes,
            paper_clients=paper_clients(exp), clients=min(paper_clients(exp), cap),
            public=0 if exp.public is None else 2 * int(training["batch_size"]))
    groups = list(dict.fromkeys(g for g, _ in chosen))
    return sorted(chosen.values(), key=lambda c: groups.index(c.group))


def shapes(all_cases: list[Case]) -> list[Case]:
    """A subset: each paper shape's first method."""
    first: dict[str, Case] = {}
    for c in all_cases:
        first.setdefault(c.group, c)
    return list(first.values())


def cover(all_cases: list[Case]) -> list[Case]:
    """A subset: every algorithm at its first shape, and every shape at least once."""
    out: list[Case] = []
    algorithms: set[str] = set()
    groups: set[str] = set()
    for c in all_cases:
        if c.algorithm not in algorithms or c.group not in groups:
            out.append(c)
            algorithms.add(c.algorithm)
            groups.add(c.group)
    return out


# --------------------------------------------------------------------------- child
def _sizes(case: Case) -> list[int]:
    b = int(case.training["batch_size"])
    return [b + b // 2 if k % 3 == 0 else b for k in range(case.clients)]


def _to_cpu(tree: Any) -> Any:
    import numpy as np
    import torch

    if isinstance(tree, torch.Tensor):
        return tree.detach().cpu().clone()
    if isinstance(tree, np.ndarray):
        return torch.from_numpy(np.array(tree))
    if isinstance(tree, dict):
        return {str(k): _to_cpu(v) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return [_to_cpu(v) for v in tree]
    return tree


def child(case: Case, path: str, out: Path, threads: int | None) -> dict[str, Any]:
    """One round of ``case`` on ``path``; saves start, end and losses to ``out``."""
    import numpy as np
    import torch
    from _common import federated_data, synthetic_cifar
    from bench_gpu import counting_vmap

    from pflrepro.algorithms import get_algorithm
    from pflrepro.algorithms.base import parse_hyper
    from pflrepro.training.engine import Engine
    from pflrepro.training.settings import TrainingConfig

    if threads:
        torch.set_num_threads(threads)
    sizes = _sizes(case)
    x, y, train, test = synthetic_cifar(case.clients + 1, max(sizes), N_TEST,
                                        classes=case.classes, shape=case.shape)
    public = x[train[-1][:case.public]] if case.public else None  # the extra client's rows
    train = [t[:n] for t, n in zip(train, sizes, strict=False)]
    data = federated_data(x, y, train, test[:case.clients], classes=case.classes,
                          public=public)
    cfg = TrainingConfig.from_mapping({**case.training, "rounds": 1, "device": "cpu",
                                       "client_training": path, "client_chunk": 0,
                                       "client_fraction": 1.0})
    if case.dtype == "float64":  # models built in float64, data cast to it
        torch.set_default_dtype(torch.float64)
        data = dataclasses.replace(data, x=data.x.double(),
                                   public=None if data.public is None else data.public.double())
    engine = Engine(data, cfg, 0, case.shape, torch.device("cpu"))
    cls = get_algorithm(case.algorithm)
    alg = cls(engine, parse_hyper(cls, case.params))
    state = alg.init()
    start = _to_cpu(state)
    reset_peak()
    t = time.perf_counter()
    with counting_vmap() as calls:
        state, losses = alg.round(state, 1)
    seconds = time.perf_counter() - t
    peak = proc_status("VmHWM")
    torch.save({"start": start, "end": _to_cpu(state),
                "losses": torch.from_numpy(np.asarray(losses, dtype=np.float64))}, out)
    archs = np.bincount(np.asarray(engine.arch_of), minlength=len(engine.archs)).tolist()
    return {"path": engine.client_training, "calls": calls[0], "peak": peak,
            "seconds": seconds, "archs": archs}


# --------------------------------------------------------------------------- parent
def _leaves(tree: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(tree, dict):
        for k, v in tree.items():
            yield from _leaves(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(tree, list):
        for i, v in enumerate(tree):
            yield from _leaves(v, f"{prefix}[{i}]")
    else:
        yield prefix, tree


def state_gap(start: Any, vmap: Any, loop: Any) -> tuple[float, str]:
    """Largest relative gap of ``vmap`` vs ``loop`` over their leaves, and where."""
    import torch

    before = dict(_leaves(start))
    ours = dict(_leaves(vmap))
    worst, where = 0.0, ""
    for name, ref in _leaves(loop):
        got = ours.get(name)
        if not isinstance(ref, torch.Tensor):
            gap = 0.0 if got == ref else float("inf")
        elif not isinstance(got, torch.Tensor) or got.shape != ref.shape:
            gap = float("inf")
        elif not ref.is_floating_point():
            gap = 0.0 if torch.equal(got, ref) else float("inf")
        else:
            ref64, got64 = ref.double(), got.double()
            num = float((got64 - ref64).nan_to_num().norm())
            was = before.get(name)
            den = 0.0
            if isinstance(was, torch.Tensor) and was.shape == ref.shape:
                den = float((ref64 - was.double()).nan_to_num().norm())
            den = den or float(ref64.nan_to_num().norm())
            gap = 0.0 if num == 0 else num / den if den else float("inf")
        if gap > worst or not where:
            worst, where = gap, name
    if set(ours) != {n for n, _ in _leaves(loop)}:
        return float("inf"), "different state keys"
    return worst, where


def loss_gap(vmap: Any, loop: Any) -> float:
    """Largest |vmap − loop| / max(|loop|, 1e-12) over clients (NaN where both are)."""
    import torch

    both = torch.isnan(vmap) & torch.isnan(loop)
    if not torch.equal(torch.isnan(vmap), torch.isnan(loop)):
        return float("inf")
    rel = (vmap - loop).abs() / loop.abs().clamp_min(1e-12)
    return float(rel[~both].max()) if bool((~both).any()) else 0.0


def run_case(case: Case, threads: int | None) -> dict[str, Any]:
    """Both sides of ``case`` in subprocesses; their comparison."""
    import torch

    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for path in ("loop", "vmap"):
            file = Path(tmp) / f"{path}.pt"
            cmd = [PYTHON, str(HERE), "--child", json.dumps(asdict(case)), "--path", path,
                   "--out", str(file)] + (["--threads", str(threads)] if threads else [])
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(
                [str(HERE.parent), os.environ.get("PYTHONPATH", "")])}
            proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
            if proc.returncode != 0:
                return {"error": proc.stderr.strip().splitlines()[-1:] or ["?"]}
            out[path] = json.loads(proc.stdout.strip().splitlines()[-1])
            out[path]["saved"] = torch.load(file, weights_only=True)
    lo, vm = out["loop"]["saved"], out["vmap"]["saved"]
    gap, where = state_gap(lo["start"], vm["end"], lo["end"])
    lgap = loss_gap(vm["losses"], lo["losses"])
    return {"gap": gap, "where": where, "loss_gap": lgap, "loop": out["loop"],
            "vmap": out["vmap"], "ok": gap <= TOL and lgap <= TOL
            and out["vmap"]["path"] == "vmap" and out["loop"]["calls"] == 0}


def h200_rows(cfg: Any) -> list[list[Any]]:
    """Per paper experiment: its vmapped pass's estimated need on an H200."""
    from pflrepro.data.datasets import DATASETS
    from pflrepro.models import build_model
    from pflrepro.training import memory

    rows = []
    for exp in paper_experiments(cfg):
        t = exp.training
        src = DATASETS[exp.dataset]
        experts = max([int(cfg.methods[m].params.get("experts", 4)) for m in exp.methods
                       if cfg.methods[m].algorithm == "fedmix"] or [1])
        forwards = experts + (exp.public is not None)
        need = max((memory.client_memory(
            build_model(m, tuple(src.image_shape), src.num_classes, **dict(o)),
            tuple(src.image_shape), t.batch_size, t.optimizer, t.momentum, forwards=forwards)
            for m, o in t.models), key=lambda n: n.per_client)
        if experts > 1:  # every client trains `experts` models
            need = memory.ClientMemory(need.param_bytes * experts, need.slots,
                                       need.activation_bytes)
        k = paper_clients(exp)
        total = need.total(k)
        fit = memory.clients_that_fit(need.per_client, H200_BYTES)
        rows.append([exp.name, _models(t), k, t.batch_size, t.optimizer,
                     f"{experts} expert(s)" if experts > 1 else "-",
                     need.state_bytes / 2**20, need.activation_bytes / 2**20,
                     need.per_client / 2**20, total / 2**30,
                     "yes" if total <= H200_BYTES else "NO",
                     "all" if fit >= k else f"{fit} per pass"])
    return rows


def run(quick: bool = False, subset: str | None = None, max_clients: int | None = None,
        threads: int | None = None, methods: list[str] | None = None,
        batch: int | None = None) -> Report:
    """Run the benchmark.

    ``subset``: ``all`` cases, ``cover`` (:func:`cover`) or ``shapes`` (:func:`shapes`);
    ``quick``: ``shapes``, 3 clients, batch 8. ``batch`` replaces the configured batch
    sizes (a stated cut).
    """
    batch = batch or (8 if quick else None)
    rep = Report("paper_shapes")
    cfg = paper_config()
    subset = subset or ("shapes" if quick else "all")
    todo = cases(cfg, max_clients or (3 if quick else None), batch)
    todo = {"all": list, "cover": cover, "shapes": shapes}[subset](todo)
    if methods:
        todo = [c for c in todo if c.algorithm in methods or c.method in methods]
    rep.say(f"== paper shapes: one round, client_training loop vs vmap on the CPU, "
            f"{len(todo)} cases ({subset}) of the paper-scale experiments of config.yaml; "
            f"float64, agreement within {TOL:g} ==")
    rep.say(f"  clients: the paper's, at most {max_clients or (3 if quick else MAX_CLIENTS)}; "
            f"{f'batch {batch} (cut), ' if batch else 'the configured batch, '}one batch per "
            f"client (every third 1.5: two steps); every client in the round; public set 2 "
            f"batches; FedDF's server distillation {FEDDF_SERVER_STEPS} steps")
    rows = []
    own: set[str] = set()
    for case in todo:
        res = run_case(case, threads)
        label = f"{case.algorithm}" + (f" ({case.method})" if case.method != case.algorithm
                                       else "")
        if "error" in res:
            rep.check(f"{case.group} {label}: ran ({res['error'][0]})", False)
            rows.append([case.group, label, f"{case.clients}/{case.paper_clients}",
                         "error", "-", "FAILED", "-", "-", "-"])
            continue
        calls = res["vmap"]["calls"]
        if calls == 0:
            own.add(case.algorithm)
        archs = res["vmap"]["archs"]
        rep.check(f"{case.group} {label} [{case.experiment}]: vmap = loop (state gap "
                  f"{res['gap']:.1e} at {res['where']}, loss gap {res['loss_gap']:.1e})",
                  res["ok"])
        rows.append([case.group + (f" {archs}" if len(archs) > 1 else ""), label,
                     f"{case.clients}/{case.paper_clients}",
                     f"{max(res['gap'], res['loss_gap']):.1e}", calls or "0 (own loop)",
                     "pass" if res["ok"] else "FAIL", res["loop"]["peak"] / 2**20,
                     res["vmap"]["peak"] / 2**20,
                     f"{res['loop']['seconds']:.1f} / {res['vmap']['seconds']:.1f}"])
    for line in table(rows, ["group (models shape/classes)", "method", "clients run/paper",
                             "max rel diff", "vmap calls", "", "peak RSS loop MiB",
                             "peak RSS vmap MiB", "s loop / vmap"]):
        rep.say(line)
    rep.say(f"  local training on their own loop (no vmapped call): "
            f"{', '.join(sorted(own)) or 'none'}")
    rep.say("== H200 estimate: every client of a paper experiment in one vmapped pass "
            "(float32; parameters x (3 + optimiser slots) + activations measured at the "
            "batch size; data set not counted) ==")
    h200 = h200_rows(cfg)
    for line in table(h200, ["experiment", "models", "clients", "batch", "optimiser",
                             "per client", "state MiB", "activations MiB",
                             "per client MiB", "all clients GiB", "fits 139 GiB",
                             "vmap passes"]):
        rep.say(line)
    rep.values["cases"] = len(rows)
    rep.values["h200_fit"] = {r[0]: r[10] for r in h200}
    return rep


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="shapes subset, 3 clients, batch 8")
    p.add_argument("--subset", choices=("all", "cover", "shapes"))
    p.add_argument("--max-clients", type=int, help="clients per case at most")
    p.add_argument("--threads", type=int, help="torch threads of each side")
    p.add_argument("--batch", type=int, help="batch size of every case (default: configured)")
    p.add_argument("--methods", type=lambda s: s.split(","), help="algorithms or methods")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--path", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        raw = json.loads(a.child)
        case = Case(**{**raw, "shape": tuple(raw["shape"])})
        print(json.dumps(child(case, a.path, Path(a.out), a.threads)))
        return 0
    rep = run(quick=a.quick, subset=a.subset, max_clients=a.max_clients, threads=a.threads,
              methods=a.methods, batch=a.batch)
    return 0 if all(ok for _, ok in rep.checks) else 1


if __name__ == "__main__":
    sys.exit(main())
