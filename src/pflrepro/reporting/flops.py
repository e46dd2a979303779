"""A projection of the paper-scale grid's GPU cost from counted work (FLOPs), not timing.

Each model's forward and forward+backward FLOPs per sample are counted with
:class:`torch.utils.flop_counter.FlopCounterMode` (matrix products and convolutions; the
element-wise operations it leaves out are a few percent of a CNN's or VGG's work) on the
experiment's input shape and class count. A run's FLOPs are then

* **training**: ``rounds x local passes x training rows x client_fraction x
  (fwd+bwd) x models trained per sample`` (:func:`algorithm_work`);
* **evaluation**: ``evaluations x all rows x fwd x models evaluated per sample``, with
  ``evaluations = ceil(rounds / eval_every) + 1`` (round 0 and the last round always);
  methods that fine-tune before evaluating (``finetune_epochs``) add that training;
* **extra**: what an algorithm computes besides its clients' own passes (peers' models
  scored on local rows, soft decisions on the public set, server distillation);
* **tuning**: each ``tune:`` grid point (x its seeds) as a run of ``tune.rounds`` rounds
  on the training rows less the validation share, evaluated on that share.

GPU-hours = FLOPs / (peak x utilisation) / 3600 at a stated device peak and a stated
fraction of it (:data:`DEVICE`, :data:`UTILISATION`): a PROJECTION, not a measurement.
Small models with per-client batches use a GPU far below its peak, so the fraction is
the weakest assumption; once a paper-scale run has been timed on a GPU its measured
rate (``results/tables/<experiment>-cost.md``) replaces it.

Data sets' rows are their real sizes (``max_samples`` where a partition sets one);
FEMNIST's ``natural`` partition counts ``clients x`` LEAF's mean writer size (805,263
samples over 3,550 writers), Office-Home its 15,588 images. Rows a scheme leaves unused
are counted; FedAMP's pairwise model distances and other server-side vector operations
are not (they scale with parameters x clients², not with samples, and are small beside
the training).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from pflrepro.config import ExperimentConfig, WorkflowConfig

#: The device the projection prices at and its dense FP32 peak (the runs train in FP32).
DEVICE = {"name": "NVIDIA H200 SXM", "peak_tflops": 67.0, "precision": "FP32 (dense)"}
#: Fraction of the peak assumed sustained (small per-client models and batches).
UTILISATION = 0.10
#: Input shape (C, H, W), classes and rows of each paper data set (rows: None = by clients).
DATA: Mapping[str, tuple[tuple[int, int, int], int, int | None]] = {
    "mnist": ((1, 28, 28), 10, 70_000),
    "fashion_mnist": ((1, 28, 28), 10, 70_000),
    "emnist": ((1, 28, 28), 47, 131_600),
    "femnist": ((1, 28, 28), 62, None),
    "cifar10": ((3, 32, 32), 10, 60_000),
    "cifar100": ((3, 32, 32), 100, 60_000),
    "officehome": ((3, 32, 32), 65, 15_588),
    "digits": ((1, 8, 8), 10, 1_797),
}
#: LEAF FEMNIST's mean samples per writer (805,263 / 3,550).
FEMNIST_PER_WRITER = 805_263 / 3_550
#: The workflow's outputs (rule ``grid_projection``) and log.
GRID_PROJECTION = "results/tables/paper-grid-projection.{ext}"
GRID_PROJECTION_LOG = "logs/cost/paper-grid-projection.log"
#: Columns of the CSV (and, less the FLOPs split, of the Markdown table).
COLUMNS = ("paper", "experiment", "method", "algorithm", "model", "runs", "tuning_runs",
           "train_flops", "eval_flops", "extra_flops", "tuning_flops", "flops", "gpu_hours")


@cache
def model_flops(model: str, options: tuple[tuple[str, Any], ...], shape: tuple[int, int, int],
                classes: int) -> tuple[float, float]:
    """(forward, forward + backward) FLOPs per sample of a model, counted on a batch of 2."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from pflrepro.models import build_model

    net = build_model(model, shape, classes, **{k: _thaw(v) for k, v in options})
    x = torch.zeros(2, *shape)
    y = torch.zeros(2, dtype=torch.long)
    with FlopCounterMode(display=False) as forward:
        with torch.no_grad():
            net(x)
    with FlopCounterMode(display=False) as both:
        torch.nn.functional.cross_entropy(net(x), y).backward()
    return forward.get_total_flops() / 2.0, both.get_total_flops() / 2.0


def _freeze(value: Any) -> Any:
    if isinstance(value, Mapping):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return ("__list__", *(_freeze(v) for v in value))
    return value


def _thaw(value: Any) -> Any:
    if isinstance(value, tuple) and value[:1] == ("__list__",):
        return [_thaw(v) for v in value[1:]]
    return value


def experiment_flops(exp: ExperimentConfig) -> tuple[float, float]:
    """(forward, forward + backward) FLOPs per sample of the experiment's client model.

    With ``training.architectures`` (clients of several models) the mean over them: the
    share of clients per architecture depends on the partition's sizes.
    """
    shape, classes, _ = DATA[exp.dataset]
    t = exp.training
    archs = t.architectures or ({"model": t.model, "model_options": t.model_options},)
    counts = [model_flops(a["model"], _freeze(dict(a.get("model_options") or {})), shape,
                          classes) for a in archs]
    return (sum(c[0] for c in counts) / len(counts), sum(c[1] for c in counts) / len(counts))


def rows_of(exp: ExperimentConfig) -> float:
    """Rows of the experiment's data used by one partition (mean over its partitions)."""
    _, _, size = DATA[exp.dataset]
    rows = []
    for p in exp.partitions:
        n = size if size is not None else p.clients * FEMNIST_PER_WRITER
        rows.append(min(n, p.max_samples) if getattr(p, "max_samples", 0) else n)
    return sum(rows) / len(rows)


def hyperparameters(cfg: WorkflowConfig, method: str) -> dict[str, Any]:
    """A method's hyperparameters: its algorithm's defaults, then the config's values."""
    from pflrepro.algorithms.registry import algorithm_info

    entry = cfg.methods[method]
    hyper = algorithm_info(entry.algorithm).Hyper
    defaults = {f.name: f.default for f in dataclasses.fields(hyper)
                if f.default is not dataclasses.MISSING}
    return {**defaults, **entry.params}


@dataclasses.dataclass(frozen=True)
class Work:
    """Per-sample multipliers of one algorithm (see :func:`algorithm_work`)."""

    train: float = 1.0  # fwd+bwd passes per training sample
    eval: float = 1.0  # forward passes per evaluated sample
    finetune_epochs: float = 0.0  # fwd+bwd epochs over the training rows per evaluation
    peer_scoring: float = 0.0  # peers' forward passes per training row of a participant
    public_forward: float = 0.0  # forward passes over the public set per participant
    server_steps: float = 0.0  # server distillation steps per round


def algorithm_work(algorithm: str, hp: Mapping[str, Any], clients: int) -> Work:
    """How many model passes each algorithm spends per sample (the projection's model).

    One model trained and evaluated per sample, except: FedEM trains and evaluates its
    ``components``; FedMix its ``experts`` (the gate is left out: an MLP on the input,
    small beside them); Ditto and APFL train two models; Per-FedAvg (HF) three gradient
    evaluations per step; PerFed-CKT a public batch per local batch (the distillation
    term) and soft decisions on the public set; FedeRiCo scores ``neighbors`` peers and
    FedFomo its downloads (all others by default) on the training rows (FedFomo: its
    20 % validation share); HypCluster scores its ``hypotheses``; FedDF distils on the
    server for its step budget (an upper bound: it stops early); FedAvg+/FedProx-FT
    fine-tune ``finetune_epochs`` before each evaluation. The majority-class reference
    trains nothing (its evaluation, counted as one forward pass, is an upper bound).
    """
    if algorithm == "majority":
        return Work(train=0.0)
    if algorithm == "fedem":
        k = float(hp.get("components", 1))
        return Work(train=k, eval=k)
    if algorithm == "fedmix":
        k = float(hp.get("experts", 1))
        return Work(train=k, eval=k)
    if algorithm in ("ditto", "apfl"):
        return Work(train=2.0, eval=1.0 if algorithm == "ditto" else 2.0)
    if algorithm == "per_fedavg":
        return Work(train=3.0)
    if algorithm == "perfedckt":
        return Work(train=2.0, public_forward=1.0)
    if algorithm == "federico":
        return Work(peer_scoring=float(hp.get("neighbors", 0)))
    if algorithm == "fedfomo":
        downloads = int(hp.get("downloads", -1))
        share = float(hp.get("val_fraction", 0.2))
        return Work(peer_scoring=share * (clients - 1 if downloads < 0 else downloads))
    if algorithm == "hypcluster":
        return Work(peer_scoring=float(hp.get("hypotheses", 1)))
    if algorithm == "feddf":
        return Work(server_steps=float(hp.get("server_steps", 0)))
    if "finetune_epochs" in hp:
        return Work(finetune_epochs=float(hp["finetune_epochs"]))
    return Work()


def run_flops(exp: ExperimentConfig, work: Work, *, rounds: int, train_share: float,
              eval_share: float, public_size: int) -> dict[str, float]:
    """Training, evaluation and extra FLOPs of one run (see the module docstring)."""
    from pflrepro.reporting.cost import local_passes

    fwd, step = experiment_flops(exp)
    t = exp.training
    rows = rows_of(exp)
    p = exp.partitions[0]
    train_rows = rows * (1.0 - p.test_fraction) * train_share
    participants = max(1, round(p.clients * t.client_fraction))
    passes = local_passes(t.to_dict(), train_rows / p.clients)
    evals = math.ceil(rounds / t.eval_every) + 1
    per_round = train_rows * t.client_fraction * passes
    train = rounds * per_round * step * work.train
    evaluation = evals * rows * eval_share * fwd * work.eval
    extra = (evals * work.finetune_epochs * train_rows * step
             + rounds * work.peer_scoring * train_rows * t.client_fraction * fwd
             + rounds * participants * work.public_forward * public_size * fwd
             + rounds * work.server_steps * t.batch_size * (participants * fwd + step))
    return {"train_flops": train, "eval_flops": evaluation, "extra_flops": extra}


def paper_of(experiment: str) -> str:
    """The paper an experiment reproduces: its name's first word (``fedamp_iid_mnist``)."""
    return experiment.split("_", 1)[0]


def method_flops(cfg: WorkflowConfig, name: str, method: str
                 ) -> tuple[dict[str, float], float]:
    """FLOPs of one run of ``method`` on experiment ``name``, and of one tuning run.

    The run's are split as :func:`run_flops` splits them; the tuning run's (0 without
    a ``tune:`` block) are one number.

    A tuning run trains ``tune.rounds`` rounds on the training rows less the validation
    share and is evaluated on that share. Raises ``KeyError`` for a data set
    :data:`DATA` does not describe.
    """
    exp = cfg.experiments[name]
    public = exp.public.size if exp.public is not None else 0
    hp = hyperparameters(cfg, method)
    work = algorithm_work(cfg.methods[method].algorithm, hp, exp.partitions[0].clients)
    one = run_flops(exp, work, rounds=exp.training.rounds, train_share=1.0, eval_share=1.0,
                    public_size=public)
    if exp.tune is None:
        return one, 0.0
    share = exp.tune.fraction
    tune_one = run_flops(exp, work, rounds=exp.tune.rounds, train_share=1 - share,
                         eval_share=(1 - exp.partitions[0].test_fraction) * share,
                         public_size=public)
    return one, sum(tune_one.values())


def tuning_runs_of(exp: ExperimentConfig, method: str) -> int:
    """The tuning runs of ``method`` on ``exp``: grid points x seeds x partitions x splits."""
    grids = exp.tune.methods.get(method) if exp.tune is not None else None
    if not grids:
        return 0
    points = math.prod(len(g.values) for g in grids) * len(exp.tune.seeds)
    return points * len(exp.partitions) * len(dict.fromkeys(s for s, _ in exp.seed_pairs()))


def check_device(peak_tflops: float, utilisation: float) -> float:
    """The sustained rate in FLOP/s of a device peak and a fraction of it (both checked)."""
    if not (0 < peak_tflops < math.inf and 0 < utilisation <= 1):
        raise ValueError(f"grid projection: peak must be > 0 and utilisation in (0, 1], got "
                         f"{peak_tflops} TFLOP/s and {utilisation}")
    return peak_tflops * 1e12 * utilisation


def grid_projection(cfg: WorkflowConfig, scale: str = "paper", *,
                    peak_tflops: float = DEVICE["peak_tflops"],  # type: ignore[assignment]
                    utilisation: float = UTILISATION) -> pd.DataFrame:
    """Per (experiment, method) of the ``scale`` grid: runs, FLOPs and projected GPU-hours."""
    import pandas as pd

    rate = check_device(peak_tflops, utilisation)
    rows = []
    for name, exp in cfg.experiments.items():
        if exp.scale != scale:
            continue
        runs = len(exp.seed_pairs()) * len(exp.partitions)
        for method in exp.methods:
            one, tune_one = method_flops(cfg, name, method)
            tuning_runs = tuning_runs_of(exp, method)
            tuning = tuning_runs * tune_one
            flops = runs * sum(one.values()) + tuning
            rows.append({"paper": paper_of(name), "experiment": name, "method": method,
                         "algorithm": cfg.methods[method].algorithm,
                         "model": "/".join(a["model"] for a in exp.training.architectures)
                         or exp.training.model,
                         "runs": runs, "tuning_runs": tuning_runs,
                         **{k: runs * v for k, v in one.items()}, "tuning_flops": tuning,
                         "flops": flops, "gpu_hours": flops / rate / 3600.0})
    return pd.DataFrame(rows, columns=list(COLUMNS))


def projection_targets(cfg: WorkflowConfig) -> list[str]:
    """The projection's files when the run builds the paper scale (``scale: paper``)."""
    if cfg.scale != "paper" or not any(e.scale == "paper" for e in cfg.experiments.values()):
        return []
    return [GRID_PROJECTION.format(ext=ext) for ext in ("md", "csv")]


def _num(value: float) -> str:
    return f"{value:.3g}" if value else "0"


def projection_markdown(table: pd.DataFrame, *, peak_tflops: float, utilisation: float
                        ) -> str:
    """The Markdown page: assumptions, per-paper totals, then every experiment x method."""
    head = ["# Paper-scale grid: PROJECTED GPU cost from counted FLOPs", "",
        f"A projection, not a measurement: FLOPs counted per sample "
        f"(torch.utils.flop_counter) times the grid's samples, rounds, local passes, "
        f"evaluations and tuning runs; GPU-hours = FLOPs / ({peak_tflops:g} TFLOP/s "
        f"{DEVICE['precision']} peak of an {DEVICE['name']} x {utilisation:g} utilisation) "
        f"/ 3600. The utilisation is assumed, not measured; a paper-scale run timed on a "
        f"GPU replaces it (pflrepro.reporting.flops lists what is and is not counted).", ""]
    papers = table.groupby("paper", sort=False)[["runs", "tuning_runs", "flops",
                                                  "gpu_hours"]].sum()
    lines = ["| paper | runs | tuning runs | FLOPs | projected GPU-hours |",
             "|:--|--:|--:|--:|--:|"]
    for paper, row in papers.iterrows():
        lines.append(f"| {paper} | {int(row['runs'])} | {int(row['tuning_runs'])} | "
                     f"{_num(row['flops'])} | {row['gpu_hours']:.1f} |")
    lines.append(f"| **grid total** | {int(table['runs'].sum())} | "
                 f"{int(table['tuning_runs'].sum())} | {_num(table['flops'].sum())} | "
                 f"{table['gpu_hours'].sum():.1f} |")
    detail = ["", "## Per experiment and method", "",
              "| experiment | method | model | runs | tuning runs | FLOPs | GPU-hours |",
              "|:--|:--|:--|--:|--:|--:|--:|"]
    for _, r in table.iterrows():
        detail.append(f"| {r['experiment']} | {r['method']} | {r['model']} | {r['runs']} | "
                      f"{r['tuning_runs']} | {_num(r['flops'])} | {r['gpu_hours']:.2f} |")
    return "\n".join(head + lines + detail) + "\n"


def write_grid_projection(config_paths: Sequence[str | Path], md: str | Path, csv: str | Path,
                          *, peak_tflops: float, utilisation: float) -> pd.DataFrame:
    """Project the paper grid of the config files (merged in order); write MD and CSV."""
    from pflrepro.config import check_config_paths
    from pflrepro.config.schema import build_schema
    from pflrepro.store.io import write_csv, write_text

    cfg = check_config_paths([str(p) for p in config_paths], build_schema())
    table = grid_projection(cfg, peak_tflops=peak_tflops, utilisation=utilisation)
    total = {c: "" for c in COLUMNS} | {
        "paper": "total", "runs": int(table["runs"].sum()),
        "tuning_runs": int(table["tuning_runs"].sum()),
        **{c: float(table[c].sum()) for c in ("train_flops", "eval_flops", "extra_flops",
                                               "tuning_flops", "flops", "gpu_hours")}}
    import pandas as pd

    out = pd.concat([table, pd.DataFrame([total])], ignore_index=True)
    out["device"] = DEVICE["name"]
    out["peak_tflops"] = peak_tflops
    out["utilisation"] = utilisation
    out["kind"] = "projection"
    write_text(md, projection_markdown(table, peak_tflops=peak_tflops, utilisation=utilisation))
    write_csv(out, csv)
    return table
