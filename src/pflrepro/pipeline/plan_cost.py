"""What a plan's runs cost: GPU-hours projected from counted FLOPs, per paper and experiment.

``pflrepro plan`` prices each planned run with the model of ``pflrepro grid-projection``
(``results/tables/paper-grid-projection.md``, :mod:`pflrepro.reporting.flops`): a run's
FLOPs (its model's counted FLOPs per sample times the experiment's samples, rounds,
local passes and evaluations), and a tuning run's, divided by a stated fraction
(``efficiency``) of a stated device peak. The config priced is the one Snakemake
merged for the dry run (its files, ``--config`` values, a profile's ``configfile``),
which the workflow writes where :data:`CONFIG_ENV` names (:func:`export_config`), so a
demo, the CPU scale and a user's ``--configfile ... --replace-workflow-config`` are
each priced as planned.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pflrepro.reporting.flops import DEVICE, UTILISATION, check_device, method_flops, paper_of

if TYPE_CHECKING:
    from pflrepro.config import WorkflowConfig
    from pflrepro.pipeline.planned_job import PlannedJob

#: The environment variable naming the file the workflow writes its merged config to.
CONFIG_ENV = "PFLREPRO_PLAN_CONFIG"
#: The experiment column of jobs that belong to none (data, partitions, combined tables).
NO_EXPERIMENT = "(no experiment: data, partitions, combined tables)"


def export_config(config: Mapping[str, Any]) -> None:
    """Write the workflow's merged ``config`` as JSON where :data:`CONFIG_ENV` says, if set.

    Called by ``common.smk`` while Snakemake reads the workflow; without the variable
    (every run but ``pflrepro plan``'s dry run) it does nothing.
    """
    path = os.environ.get(CONFIG_ENV)
    if path:
        Path(path).write_text(json.dumps(config, default=str), encoding="utf-8")


@dataclass(frozen=True)
class Device:
    """The device a plan is priced at: its name, dense peak and the fraction sustained."""

    name: str = f"an {DEVICE['name']}"
    peak_tflops: float = float(DEVICE["peak_tflops"])  # type: ignore[arg-type]
    efficiency: float = UTILISATION

    @property
    def rate(self) -> float:
        """FLOP/s assumed sustained (checked: peak > 0, efficiency in (0, 1])."""
        return check_device(self.peak_tflops, self.efficiency)

    def describe(self) -> str:
        """E.g. ``10% of the 67 TFLOP/s FP32 (dense) peak of an NVIDIA H200 SXM``."""
        return (f"{self.efficiency * 100:.3g}% of the {self.peak_tflops:g} TFLOP/s "
                f"{DEVICE['precision']} peak of {self.name}")


@dataclass
class Row:
    """One paper's or experiment's planned work."""

    jobs: int = 0
    training_runs: int = 0
    tuning_runs: int = 0
    gpu_hours: float = 0.0
    unpriced: int = 0


@dataclass
class PlanCost:
    """The plan's work per experiment and per paper, and the runs left unpriced (why)."""

    experiments: dict[str, Row] = field(default_factory=dict)
    papers: dict[str, Row] = field(default_factory=dict)
    unpriced: dict[str, int] = field(default_factory=dict)  # reason -> runs

    @property
    def total(self) -> Row:
        """The sums over every experiment (and the jobs of none)."""
        rows = list(self.experiments.values())
        return Row(sum(r.jobs for r in rows), sum(r.training_runs for r in rows),
                   sum(r.tuning_runs for r in rows), sum(r.gpu_hours for r in rows),
                   sum(r.unpriced for r in rows))


Key = tuple[str, str]


def run_flops_table(cfg: WorkflowConfig | None, keys: set[Key]
                    ) -> tuple[dict[Key, tuple[float, float]], dict[Key, str]]:
    """(training run FLOPs, tuning run FLOPs) per (experiment, method) of ``keys``.

    Also returned: why each key left out cannot be priced (no config, not in it, a
    data set without a FLOP model).
    """
    found: dict[Key, tuple[float, float]] = {}
    why: dict[Key, str] = {}
    for name, method in sorted(keys):
        if cfg is None:
            why[name, method] = "the workflow's config was not read"
        elif name not in cfg.experiments or method not in cfg.methods:
            why[name, method] = f"{name}/{method} is not in the config read"
        else:
            try:
                one, tune = method_flops(cfg, name, method)
            except KeyError as err:
                why[name, method] = f"no FLOP model for data set {err}"
                continue
            found[name, method] = (sum(one.values()), tune)
    return found, why


def plan_cost(jobs: Sequence[PlannedJob], cfg: WorkflowConfig | None,
              device: Device) -> PlanCost:
    """Jobs, training and tuning runs and projected GPU-hours per experiment and paper."""
    keys = {k for j in jobs for kind in ("train", "tune") for k in j.runs(kind)}
    flops, why = run_flops_table(cfg, keys)
    rate = device.rate
    out = PlanCost()
    for job in jobs:
        name = job.wildcards.get("experiment", NO_EXPERIMENT)
        row = out.experiments.setdefault(name, Row())
        row.jobs += 1
        for index, kind in enumerate(("train", "tune")):
            for key in job.runs(kind):
                if kind == "train":
                    row.training_runs += 1
                else:
                    row.tuning_runs += 1
                if key in flops:
                    row.gpu_hours += flops[key][index] / rate / 3600.0
                else:
                    row.unpriced += 1
                    out.unpriced[why[key]] = out.unpriced.get(why[key], 0) + 1
    for name, row in out.experiments.items():
        paper = out.papers.setdefault(NO_EXPERIMENT if name == NO_EXPERIMENT
                                      else paper_of(name), Row())
        for attr in ("jobs", "training_runs", "tuning_runs", "gpu_hours", "unpriced"):
            setattr(paper, attr, getattr(paper, attr) + getattr(row, attr))
    return out


def hours(value: float) -> str:
    """GPU-hours to three significant digits (``0`` for none)."""
    return f"{value:.3g}" if value else "0"


def cost_lines(cost: PlanCost, device: Device) -> list[str]:
    """The per-paper and per-experiment table, then the assumptions and how to change them."""
    names = [*cost.papers, *cost.experiments]
    width = max(len(n) for n in names) + 4
    head = f"  {'by paper, then its experiments:':<{width}}{'jobs':>6}{'training runs':>15}" \
           f"{'tuning runs':>13}{'GPU-hours':>11}"

    def line(label: str, row: Row) -> str:
        return (f"  {label:<{width}}{row.jobs:>6}{row.training_runs:>15}{row.tuning_runs:>13}"
                f"{hours(row.gpu_hours):>11}")

    lines = [head.replace("  by", "by", 1)]
    papers = sorted(cost.papers.items(), key=lambda item: item[0] == NO_EXPERIMENT)
    for paper, row in papers:
        lines.append(line(paper, row))
        if paper == NO_EXPERIMENT:
            continue
        lines += [line("  " + name, r) for name, r in cost.experiments.items()
                  if name != NO_EXPERIMENT and paper_of(name) == paper]
    total = cost.total
    lines.append(line("total", total))
    runs = total.training_runs + total.tuning_runs
    if runs:
        lines += ["", f"projected GPU-hours of the {total.training_runs} training and "
                      f"{total.tuning_runs} tuning run(s): {hours(total.gpu_hours)}",
                  "  from FLOPs counted per model (as `pflrepro grid-projection`, "
                  "results/tables/paper-grid-projection.md)",
                  f"  at {device.describe()}: assumed, not measured",
                  "  for your device: pflrepro plan --device-tflops PEAK --efficiency FRACTION "
                  "[--device-name NAME]"]
        lines += [f"  {n} run(s) not priced: {reason}" for reason, n in cost.unpriced.items()]
    return lines
