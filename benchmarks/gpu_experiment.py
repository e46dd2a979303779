"""One paper-scale experiment of config.yaml end to end on a device, timed per round.

For an experiment of ``config.yaml`` (default ``fedamp_practical_fashion``: FedAMP's
practical non-IID split of the full Fashion-MNIST, 20 clients, the 784-200-200 MLP) it
runs the workflow's own job commands, as its rules do: ``pflrepro prepare`` (from a
mirror folder holding the raw files, e.g. Debian's idx ``.gz`` files), ``pflrepro
partition`` (the first partition, split seed 0) and ``pflrepro train`` with the spec the
workflow gives the job (:meth:`pflrepro.config.WorkflowConfig.run_spec`: the method's
configured hyperparameters, the experiment's training settings, training seed 0), with
only the rounds and the device set here. Each method is trained on each device of
``--devices`` (``cuda`` for ``--rounds`` rounds, ``cpu`` for ``--cpu-rounds``: the same
machine's cores), and the per-round time comes from the job's own log line ("N rounds
in T s"). The table gives seconds per round per device and the CPU / device ratio, and
each run's final mean test accuracy (of that many rounds: a check that it trained, not
a result).

No Snakemake is needed (the job commands are the package's CLI), so it runs where only
the package's runtime dependencies are installed. Used by ``gpu_check.sh``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]


def pflrepro(*args: str, log: Path) -> float:
    """Run ``python -m pflrepro ARGS`` with its stderr in ``log``; its wall seconds."""
    start = time.perf_counter()
    with log.open("w") as err:
        proc = subprocess.run([sys.executable, "-m", "pflrepro", *args], stderr=err,
                              stdout=err, check=False)
    if proc.returncode != 0:
        sys.stderr.write(log.read_text()[-4000:])
        raise SystemExit(f"pflrepro {args[0]} failed (exit {proc.returncode}); log: {log}")
    return time.perf_counter() - start


def seconds_per_round(log: Path, rounds: int) -> float:
    """The training time per round from the job log (its "N rounds in T s" line)."""
    from pflrepro.reporting.cost import read_log

    seconds = read_log(log).train_s
    if math.isnan(seconds):
        raise SystemExit(f"no 'rounds in' line in {log}")
    return seconds / rounds


def final_accuracy(run: Path) -> tuple[float, str]:
    """Mean test accuracy over clients at the run's last round, and its training path."""
    import pandas as pd

    table = pd.read_parquet(run, columns=["round", "metric", "value", "client_training"])
    acc = table[table["metric"] == "test_accuracy"]
    last = acc[acc["round"] == acc["round"].max()]
    return float(last["value"].mean()), str(table["client_training"].iloc[0])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default=str(REPO / "config.yaml"))
    p.add_argument("--experiment", default="fedamp_practical_fashion")
    p.add_argument("--methods", default="fedamp,fedavg",
                   help="comma-separated methods of the experiment")
    p.add_argument("--mirror", required=True, help="folder holding the data set's raw files")
    p.add_argument("--work", required=True, help="where data, partition, runs and logs go")
    p.add_argument("--devices", default="cuda,cpu")
    p.add_argument("--rounds", type=int, default=20, help="rounds on a CUDA device")
    p.add_argument("--cpu-rounds", type=int, default=3, help="rounds on the CPU")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                   help="the train job's --threads")
    a = p.parse_args(argv)
    from pflrepro.config import parse
    from pflrepro.config.model import RunKey

    cfg = parse(yaml.safe_load(Path(a.config).read_text()))
    if a.experiment not in cfg.experiments:
        p.error(f"no experiment {a.experiment!r} in {a.config}")
    exp = cfg.experiments[a.experiment]
    methods = a.methods.split(",")
    unknown = sorted(set(methods) - set(exp.methods))
    if unknown:
        p.error(f"{a.experiment} has no method(s) {unknown}; it has {list(exp.methods)}")
    work = Path(a.work)
    (work / "logs").mkdir(parents=True, exist_ok=True)
    data = work / "data" / exp.dataset
    took = pflrepro("prepare", "--dataset", exp.dataset, "--out", str(data), "--raw",
                    str(work / "raw"), "--mirror", str(Path(a.mirror).resolve()),
                    log=work / "logs" / "prepare.log")
    print(f"prepare {exp.dataset}: {took:.1f} s", flush=True)
    part = exp.partitions[0]
    partition = work / "partition.parquet"
    took = pflrepro("partition", "--data", str(data / "meta.json"), "--dataset", exp.dataset,
                    "--spec", json.dumps(part.spec()), "--seed", "0", "--out", str(partition),
                    log=work / "logs" / "partition.log")
    print(f"partition {part.id}: {took:.1f} s", flush=True)
    rows: list[dict[str, Any]] = []
    for method in methods:
        row: dict[str, Any] = {"method": method}
        for device in a.devices.split(","):
            spec = cfg.run_spec(RunKey(a.experiment, part.id, method, 0, 0))
            rounds = a.cpu_rounds if device == "cpu" else a.rounds
            spec["training"] = {**spec["training"], "rounds": rounds, "device": device,
                                "eval_every": rounds}
            run = work / "runs" / f"{method}-{device}.parquet"
            run.parent.mkdir(parents=True, exist_ok=True)
            log = work / "logs" / f"train-{method}-{device}.log"
            pflrepro("train", "--spec", json.dumps(spec), "--data", str(data / "meta.json"),
                     "--partition", str(partition), "--out", str(run), "--threads",
                     str(a.threads), log=log)
            row[device] = seconds_per_round(log, rounds)
            accuracy, path = final_accuracy(run)
            print(f"{method} on {device} ({path} path): {rounds} rounds, {row[device]:.3f} "
                  f"s/round, final mean test accuracy {accuracy:.3f}", flush=True)
        rows.append(row)
    devices = a.devices.split(",")
    print(f"\n{a.experiment} ({exp.dataset}, partition {part.id}, split 0, seed 0): "
          "seconds per round")
    print("| method | " + " | ".join(devices) + (" | cpu / cuda |" if {"cpu", "cuda"} <=
                                                   set(devices) else " |"))
    for row in rows:
        cells = [f"{row[d]:.3f}" for d in devices]
        if {"cpu", "cuda"} <= set(devices):
            cells.append(f"{row['cpu'] / row['cuda']:.1f}x")
        print(f"| {row['method']} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
