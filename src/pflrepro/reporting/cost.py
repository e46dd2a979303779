"""Compute cost of an experiment's training jobs, and a projection of a paper grid from it.

**Measured** (:func:`job_costs`, :func:`cost_table`). For each training job: Snakemake's
benchmark record (``benchmark:`` of the train rule; wall seconds ``s``, ``max_rss`` in
MiB, ``cpu_time``), the device and the training time from the job's log (the lines
``device: ...``, ``leased cuda:N (name)``, ``resuming after round N`` and ``<method>: R
rounds in T s``), and the rounds, clients and training samples from its run table. The
table has one row per method: jobs, device(s), mean wall time, mean training time,
seconds per round, rounds per second, the largest max RSS, and CPU seconds.

Wall time includes what every job pays once (interpreter and torch import, reading the
data); training time is the round loop with the round-0 evaluation. A job resumed from a
checkpoint was timed for its last attempt only: its rounds are those it ran after the
checkpoint.

**Projected** (:func:`projection`). The paper-scale grid of a config (every experiment
with ``scale: paper``) priced at the measured rates, per method, as::

    hours = runs * (overhead + rounds * samples_per_round * seconds_per_sample) / 3600

where, for the method's algorithm, ``seconds_per_sample`` is measured training seconds
per client training sample per round (summed over the measured jobs: training seconds
/ (rounds run * local passes * training samples of all clients)), ``overhead`` the
measured mean wall minus training time, and for the paper experiment
``samples_per_round = local passes * client_fraction * (1 - test_fraction) * N`` with N
the data set's size (or the partition's ``max_samples``), summed over its partitions
(runs counted per partition). Local passes are ``local_epochs``, or ``local_steps *
batch_size / samples per client`` with fixed steps.

What that can and cannot say: it scales the measured cost by the paper grid's work
(runs, rounds, local passes over the training samples). It does not scale by model
size: a rate measured with the demo's MLP on 8x8 digits prices every sample at the
MLP's cost, and a paper CNN on 32x32 images costs many times more per sample. A rate
measured on a CPU is CPU time, not GPU time (a GPU trains all clients of a round in one
vmapped pass, at a very different rate). So a projection from CPU-measured jobs is a
count of the grid's work in measured-model CPU hours, not the GPU-hours the paper grid
takes; only rates measured on the paper's models on the GPU (the paper-scale
experiments run there) project GPU-hours. Schemes that leave samples unused
(``practical`` with ``samples_per_client``) are over-counted, and data sets of
unknown size (FEMNIST, Office-Home) are left unprojected.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pflrepro.store import results as R

if TYPE_CHECKING:
    import pandas as pd

    from pflrepro.config import WorkflowConfig


@dataclass(frozen=True)
class JobCost:
    """What one training job cost (see the module docstring)."""

    experiment: str
    partition: str
    method: str
    algorithm: str
    split_seed: int
    train_seed: int
    device: str
    device_name: str
    rounds: int  # last round of the run
    rounds_run: int  # rounds this (last) attempt ran
    clients: int
    train_samples: int  # training samples of all clients
    local_passes: float  # passes over a client's training samples per round
    wall_s: float
    train_s: float
    cpu_s: float
    max_rss_mb: float


@dataclass(frozen=True)
class LogFacts:
    """What a train job's log says about its device and timing."""

    device: str = "unknown"
    device_name: str = ""
    train_s: float = math.nan
    resumed_after: int = 0


_DEVICE = re.compile(r"\bdevice: (\S+)")
_LEASED = re.compile(r"\bleased (cuda:\d+) \((.*?)\)")
_RESUMED = re.compile(r"resuming after round (\d+)")
_TIMED = re.compile(r": (\d+) rounds in ([\d.]+) s\b")


def read_log(path: str | Path) -> LogFacts:
    """Device, GPU name, training seconds and resumed round from a train job's log."""
    device, name, train_s, resumed = "unknown", "", math.nan, 0
    for line in Path(path).read_text(encoding="utf-8", errors="replace").splitlines():
        if (m := _DEVICE.search(line)) and "training.device" not in line:
            device = m.group(1)
        elif m := _LEASED.search(line):
            name = m.group(2)
        elif m := _RESUMED.search(line):
            resumed = int(m.group(1))
        elif m := _TIMED.search(line):
            train_s = float(m.group(2))
    if device == "cpu":
        name = "cpu"
    return LogFacts(device, name, train_s, resumed)


def read_benchmark(path: str | Path) -> dict[str, float]:
    """Snakemake's benchmark record of a job: ``s``, ``max_rss`` (MiB), ``cpu_time``.

    The last row counts (a job benchmarked with repeats writes one per repeat);
    ``NA`` (Snakemake could not sample the process) becomes NaN, and so does every
    value of a missing or damaged record (:func:`pflrepro.store.records.checked_benchmark`
    names it and sets a damaged one aside).
    """
    import pandas as pd

    from pflrepro.store.records import checked_benchmark

    if checked_benchmark(path) is None:
        return {k: math.nan for k in ("s", "max_rss", "cpu_time")}
    frame = pd.read_csv(path, sep="\t", na_values=["NA", "-"])
    if frame.empty or "s" not in frame.columns:
        raise ValueError(f"{path}: not a Snakemake benchmark file (no 's' column)")
    last = frame.iloc[-1]
    return {k: float(last[k]) if k in frame.columns else math.nan
            for k in ("s", "max_rss", "cpu_time")}


def local_passes(training: Mapping[str, Any], samples_per_client: float) -> float:
    """Passes over a client's training samples per round (epochs, or steps x batch / n)."""
    steps = int(training.get("local_steps", 0) or 0)
    if steps > 0:
        batch = int(training.get("batch_size", 32))
        return steps * batch / samples_per_client if samples_per_client > 0 else math.nan
    return float(training.get("local_epochs", 1))


def job_cost(run: str | Path, benchmark: str | Path, log: str | Path,
             training: Mapping[str, Any]) -> JobCost:
    """The cost of one job from its run table, benchmark record and log."""
    table = R.read_table(run, columns=["round", "client", "metric", "value", "experiment",
                                       "partition", "method", "algorithm", "split_seed",
                                       "train_seed"])
    first = table.iloc[0]
    n_train = table[(table["metric"] == R.N_TRAIN) & (table["round"] == 0)]
    clients = int(n_train["client"].nunique())
    samples = int(n_train["value"].sum())
    rounds = int(table["round"].max())
    facts = read_log(log)
    bench = read_benchmark(benchmark)
    return JobCost(
        experiment=str(first["experiment"]), partition=str(first["partition"]),
        method=str(first["method"]), algorithm=str(first["algorithm"]),
        split_seed=int(first["split_seed"]), train_seed=int(first["train_seed"]),
        device=facts.device, device_name=facts.device_name, rounds=rounds,
        rounds_run=max(rounds - facts.resumed_after, 0), clients=clients,
        train_samples=samples,
        local_passes=local_passes(training, samples / clients if clients else 0.0),
        wall_s=bench["s"], train_s=facts.train_s, cpu_s=bench["cpu_time"],
        max_rss_mb=bench["max_rss"])


def job_costs(runs: Sequence[str | Path], benchmarks: Sequence[str | Path],
              logs: Sequence[str | Path], training: Mapping[str, Any]) -> pd.DataFrame:
    """One row per job (:class:`JobCost` fields); the three lists are aligned."""
    import pandas as pd

    if not (len(runs) == len(benchmarks) == len(logs)):
        raise ValueError(f"cost: {len(runs)} runs, {len(benchmarks)} benchmarks and "
                         f"{len(logs)} logs given; one of each per job is needed")
    if not runs:
        raise ValueError("cost: no training job given")
    rows = [asdict(job_cost(r, b, lg, training)) for r, b, lg in zip(runs, benchmarks, logs,
                                                                      strict=True)]
    return _share_jobs(pd.DataFrame(rows), [str(b) for b in benchmarks])


def _share_jobs(rows: pd.DataFrame, benchmarks: Sequence[str]) -> pd.DataFrame:
    """Runs trained by one job (one benchmark record): split the job's wall and CPU time.

    Each of the job's k runs gets its own training time plus 1/k of the job's time
    outside training (start-up, data, writing), and the job's CPU time in proportion
    to that wall time; ``max_rss_mb`` stays the job's peak. ``runs_in_job``: k.
    """
    import pandas as pd

    rows = rows.copy()
    rows["runs_in_job"] = 1
    for _, index in rows.groupby(pd.Series(list(benchmarks), index=rows.index)
                                 ).groups.items():
        k = len(index)
        if k == 1:
            continue
        wall, cpu = float(rows.loc[index[0], "wall_s"]), float(rows.loc[index[0], "cpu_s"])
        train = rows.loc[index, "train_s"]
        if train.isna().any():
            share = pd.Series([wall / k] * k, index=index)
        else:
            share = train + (wall - float(train.sum())) / k
        rows.loc[index, "wall_s"] = share
        rows.loc[index, "cpu_s"] = cpu * share / wall if wall > 0 else math.nan
        rows.loc[index, "runs_in_job"] = k
    return rows



def cost_table(jobs: pd.DataFrame, methods_order: Sequence[str] | None = None
               ) -> pd.DataFrame:
    """Per method: jobs, devices, mean wall/training seconds, s/round, rounds/s, max RSS.

    ``s_per_round`` is total training seconds over total rounds run (so is
    ``rounds_per_s``, inverted); ``s_per_sample`` the same per training sample and
    local pass (what :func:`projection` prices with); ``overhead_s`` mean wall minus
    training time.
    """
    import pandas as pd

    rows = []
    methods = list(dict.fromkeys([*(methods_order or []), *jobs["method"]]))
    for method in methods:
        group = jobs[jobs["method"] == method]
        if group.empty:
            continue
        rounds = float(group["rounds_run"].sum())
        train = float(group["train_s"].sum())
        work = float((group["rounds_run"] * group["local_passes"]
                      * group["train_samples"]).sum())
        devices = sorted(set(group["device_name"].where(group["device_name"] != "",
                                                        group["device"])))
        rows.append({
            "method": method, "algorithm": str(group["algorithm"].iloc[0]),
            "jobs": len(group), "device": ", ".join(devices),
            "rounds": int(group["rounds"].max()), "clients": int(group["clients"].max()),
            "wall_s": float(group["wall_s"].mean()), "train_s": float(group["train_s"].mean()),
            "s_per_round": train / rounds if rounds else math.nan,
            "rounds_per_s": rounds / train if train else math.nan,
            "s_per_sample": train / work if work else math.nan,
            "overhead_s": float((group["wall_s"] - group["train_s"]).mean()),
            "max_rss_mb": float(group["max_rss_mb"].max()),
            "cpu_s": float(group["cpu_s"].mean()),
        })
    return pd.DataFrame(rows)


def _dataset_size(dataset: str) -> int | None:
    from pflrepro.data.datasets import DATASETS

    return DATASETS[dataset].num_samples


def projection(costs: pd.DataFrame, cfg: WorkflowConfig, scale: str = "paper"
               ) -> pd.DataFrame:
    """The ``scale`` experiments of ``cfg`` priced at the measured per-algorithm rates.

    One row per (experiment, method); ``hours`` is NaN where the method's algorithm was
    not measured or the data set's size is unknown (``note`` says which). See the
    module docstring for the formula and what it cannot project.
    """
    import pandas as pd

    measured = {str(r["algorithm"]): r for _, r in costs.iterrows()}
    rows = []
    for name, exp in cfg.experiments.items():
        if exp.scale != scale:
            continue
        runs_per_partition = len(exp.seed_pairs())
        t = exp.training.to_dict()
        size = _dataset_size(exp.dataset)
        samples = 0.0
        for p in exp.partitions:
            if size is None:
                samples = math.nan
                break
            n = min(size, p.max_samples) if p.max_samples else size
            train = n * (1.0 - p.test_fraction)
            samples += (train * exp.training.client_fraction
                        * local_passes(t, train / p.clients))
        runs = runs_per_partition * len(exp.partitions)
        for method in exp.methods:
            algorithm = cfg.methods[method].algorithm
            rate = measured.get(algorithm)
            note = ""
            hours = math.nan
            if rate is None:
                note = f"algorithm {algorithm} not measured"
            elif math.isnan(samples):
                note = f"size of data set {exp.dataset} unknown"
            else:
                per_partition_samples = samples / len(exp.partitions)
                seconds = runs * (float(rate["overhead_s"]) + exp.training.rounds
                                  * per_partition_samples * float(rate["s_per_sample"]))
                hours = seconds / 3600.0
            rows.append({
                "experiment": name, "method": method, "algorithm": algorithm,
                "model": exp.training.model, "runs": runs, "rounds": exp.training.rounds,
                "clients": max(p.clients for p in exp.partitions),
                "samples_per_round": samples / len(exp.partitions),
                "rate_from": "" if rate is None else f"{rate['method']} on {rate['device']}",
                "hours": hours, "note": note,
            })
    return pd.DataFrame(rows, columns=["experiment", "method", "algorithm", "model", "runs",
                                       "rounds", "clients", "samples_per_round", "rate_from",
                                       "hours", "note"])


def _fmt(value: Any, digits: int = 2) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return "–"
        if value != 0 and abs(value) < 10 ** -digits:
            return f"{value:.2e}"
        return f"{value:.{digits}f}"
    return str(value)


MEASURED_COLUMNS = ("method", "jobs", "device", "rounds", "clients", "wall_s", "train_s",
                    "s_per_round", "rounds_per_s", "max_rss_mb", "cpu_s")
PROJECTED_COLUMNS = ("experiment", "model", "methods", "measured", "runs", "rounds",
                     "samples_per_round", "hours")
PROJECTED_HEADERS = {"measured": "methods priced", "runs": "runs per method",
                     "samples_per_round": "train samples/round",
                     "hours": "hours (priced methods)"}


def projection_by_experiment(projected: pd.DataFrame) -> pd.DataFrame:
    """:func:`projection` summed per paper experiment (the Markdown table's rows)."""
    import pandas as pd

    rows = []
    for name, group in projected.groupby("experiment", sort=False):
        priced = group["hours"].notna()
        rows.append({"experiment": name, "model": group["model"].iloc[0],
                     "methods": len(group), "measured": int(priced.sum()),
                     "runs": int(group["runs"].iloc[0]), "rounds": int(group["rounds"].iloc[0]),
                     "samples_per_round": float(group["samples_per_round"].iloc[0]),
                     "hours": float(group["hours"].sum()) if priced.any() else math.nan})
    return pd.DataFrame(rows, columns=list(PROJECTED_COLUMNS))
MEASURED_HEADERS = {"wall_s": "wall s (mean)", "train_s": "train s (mean)",
                    "s_per_round": "s/round", "rounds_per_s": "rounds/s",
                    "max_rss_mb": "max RSS MiB", "cpu_s": "CPU s (mean)"}


def markdown(table: pd.DataFrame, columns: Sequence[str],
             headers: Mapping[str, str] | None = None) -> str:
    """A pipe table of ``columns`` (pandas' ``to_markdown`` needs tabulate; this does not).

    A ``method`` column shows the papers' names (:mod:`pflrepro.reporting.names`).
    """
    from pflrepro.reporting.names import method_name

    headers = headers or {}
    if "method" in table.columns:
        table = table.assign(method=table["method"].map(method_name))
    lines = ["| " + " | ".join(headers.get(c, c) for c in columns) + " |",
             "|" + "|".join(":--" if i == 0 else "--:" for i in range(len(columns))) + "|"]
    for _, row in table.iterrows():
        lines.append("| " + " | ".join(_fmt(row[c]) for c in columns) + " |")
    return "\n".join(lines)


def projection_text(projected: pd.DataFrame, measured: pd.DataFrame) -> list[str]:
    """The Markdown section of a :func:`projection` priced at ``measured``'s rates."""
    total = float(projected["hours"].sum(min_count=1)) if not projected.empty else math.nan
    devices = ", ".join(sorted(set(measured["device"])))
    on_gpu = all(d.startswith("cuda") or "NVIDIA" in d or "GPU" in d
                 for d in measured["device"])
    kind = "GPU-hours" if on_gpu else "CPU hours at the measured model's cost, NOT GPU-hours"
    unpriced = int(projected["hours"].isna().sum())
    return ["## Projection of the paper-scale grid", "",
            "hours = runs × (overhead + rounds × samples per round × measured seconds "
            "per sample) / 3600, with each method's rate measured here (on "
            f"{devices}; matched by algorithm) and the paper grid's runs, rounds, "
            "partitions' training samples and local passes. It scales the measured "
            "cost by the grid's work; it does not scale by model size (the paper's "
            "models cost more per sample than a small measured model), and a "
            f"CPU-measured rate is not a GPU rate. Unit: {kind}. Per method: the "
            "projection CSV.", "",
            markdown(projection_by_experiment(projected), PROJECTED_COLUMNS,
                     PROJECTED_HEADERS), "",
            f"Total: {_fmt(total, 1)} hours ({kind}) for the methods priced; "
            f"{unpriced} experiment × method pair(s) not priced (algorithm not "
            "measured here, or data set of unknown size)."]


def write_cost(measured: pd.DataFrame, projected: pd.DataFrame | None, md: str | Path,
               csv: str | Path, projection_csv: str | Path | None = None, *,
               experiment: str = "", tuning: Sequence[str] = (),
               missing: Sequence[str] = ()) -> None:
    """Write the measured table (Markdown with the projection, CSV) atomically.

    ``tuning``: sentences on the measured runs' tuned values, one per tuned method
    (:func:`pflrepro.reporting.tuning_note.table_notes`), a paragraph below the measured table;
    ``missing``: the benchmark records that were missing or damaged, named below it.
    """
    from pflrepro.store.io import write_csv, write_text

    title = f"Compute cost of {experiment}" if experiment else "Compute cost"
    parts = [f"# {title}", "",
             "Measured per training job (Snakemake benchmark records and the jobs' logs), "
             "per method: wall time and CPU time of the whole job, training time of the "
             "round loop, seconds per round and rounds per second of training, the largest "
             "resident memory.", "", markdown(measured, MEASURED_COLUMNS, MEASURED_HEADERS)]
    if tuning:
        parts += ["", " ".join(tuning)]
    if missing:
        parts += ["", f"No benchmark record for {len(missing)} job(s), so their wall "
                  f"time, CPU time and memory are missing from the table (a job killed "
                  f"before Snakemake wrote its record, or a damaged record set aside): "
                  f"{', '.join(missing)}. To measure one again, delete its run and rerun "
                  f"snakemake."]
    if projected is not None:
        parts += ["", *projection_text(projected, measured)]
    write_text(md, "\n".join(parts) + "\n")
    write_csv(measured, csv)
    if projection_csv is not None:
        write_csv(projected if projected is not None else measured.iloc[0:0], projection_csv)
