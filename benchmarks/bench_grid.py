"""The CPU-scale FedeRiCo table through Snakemake: 2 cores as configured vs one job at a time.

Builds ``results/tables/federico_table1_cpu.md`` from a reduced copy of config.yaml
(``scale: cpu``; the table's experiments with 5 instead of 30 rounds, their tuning
budgets scaled with them, and one split seed, see ``--rounds``/``--seeds``) in
temporary directories, each variant twice in alternating order (``--repeats``):

* **as configured**: ``snakemake --cores 2`` -- training jobs declare ``threads: 1``,
  so two run side by side, one torch thread each;
* **one job at a time**: ``snakemake --cores 1`` (the same as ``-j 1`` for local
  execution) -- one job, one thread;
* optionally (``--two-threads``) **one job at a time, 2 threads**: ``--cores 2
  --set-threads train=2``, so each training job gets both cores.

The data sets are prepared once with ``pflrepro prepare`` (the prepare rule's command;
Fashion-MNIST from Debian's local copy when it is installed, else the table uses
digits only) and copied into each directory, so the timings cover partitions,
training, aggregation and the table. Both runs must write
the same table (the correctness check: same config, same seeds, byte-identical
results). Per-job times come from the ``benchmark:`` files the train rule writes.
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from _common import PYTHON, REPO, Report, median, table

from pflrepro.config.shrink import shrink_config

FASHION = Path("/usr/share/datasets/fashion-mnist")
TABLE = "federico_table1_cpu"
TARGET = f"results/tables/{TABLE}.md"


def reduced_config(rounds: int, seeds: int, methods: list[str] | None,
                   partitions: int | None, digits_only: bool = False) -> dict[str, Any]:
    """config.yaml at CPU scale, only the table's experiments, smaller (and still valid).

    Through :func:`pflrepro.config.shrink.shrink_config`, which lowers each experiment's
    tuning budget and grids with its rounds and methods.
    """
    cfg = yaml.safe_load((REPO / "config.yaml").read_text())
    cfg["scale"] = "cpu"
    wanted = [e for e in cfg["tables"][TABLE]["experiments"]
              if (FASHION.is_dir() and not digits_only)
              or cfg["experiments"][e]["dataset"] != "fashion_mnist"]
    cfg = shrink_config(cfg, experiments=wanted, rounds=rounds, split_seeds=seeds,
                        train_seeds=1, methods=methods, partitions=partitions)
    cfg["tables"] = {TABLE: cfg["tables"][TABLE]}
    return cfg


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{Path(PYTHON).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def snakemake(workdir: Path, *args: str) -> tuple[float, subprocess.CompletedProcess]:
    cmd = [PYTHON, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory",
           str(workdir), "--configfile", str(workdir / "config.yaml"),
           "--replace-workflow-config", *args]
    t = time.perf_counter()
    proc = subprocess.run(cmd, cwd=workdir, env=_env(), capture_output=True, text=True,
                          check=False)
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        raise RuntimeError(f"snakemake {' '.join(args)} failed in {workdir}:\n"
                           f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return wall, proc


def prepare(seed_dir: Path, cfg: dict[str, Any]) -> None:
    """Prepare every data set of ``cfg`` once, with the command the prepare rule runs."""
    for d in sorted({e["dataset"] for e in cfg["experiments"].values()}):
        mirrors = [a for m in cfg.get("data", {}).get("mirrors", {}).get(d, [])
                   for a in ("--mirror", str(m))]
        subprocess.run([str(Path(PYTHON).parent / "pflrepro"), "prepare", "--dataset", d,
                        "--out", str(seed_dir / "results/data" / d), "--raw",
                        str(seed_dir / "data/raw" / d), *mirrors], env=_env(), check=True,
                       capture_output=True)


def job_seconds(workdir: Path) -> tuple[int, float]:
    """Number of training jobs and their summed wall seconds (Snakemake benchmark files)."""
    files = list((workdir / "results/benchmarks/train").rglob("*.tsv"))
    total = 0.0
    for f in files:
        with f.open() as fh:
            row = next(csv.DictReader(fh, delimiter="\t"))
            total += float(row["s"])
    return len(files), total


def run(quick: bool = False, rounds: int | None = None, seeds: int | None = None,
        two_threads: bool = False, repeats: int | None = None) -> Report:
    """Run the benchmark; return its report."""
    rounds = rounds or (1 if quick else 5)
    repeats = repeats or (1 if quick else 5)
    seeds = seeds or 1
    # quick: digits only (no Fashion-MNIST preparation), FedAvg, one partition
    cfg = reduced_config(rounds, seeds, ["fedavg"] if quick else None,
                         1 if quick else None, digits_only=quick)
    n_runs = sum(len(e["partitions"]) * len(e["methods"]) * len(e["split_seeds"])
                 * len(e["train_seeds"]) for e in cfg["experiments"].values())
    rep = Report("grid")
    rep.say(f"== grid: {TABLE} at reduced size: experiments {list(cfg['experiments'])}, "
            f"{n_runs} training runs of {rounds} round(s), through Snakemake; {repeats} "
            f"repeat(s), order alternating ==")
    variants = [("--cores 2 (as configured)", ["--cores", "2"]),
                ("--cores 1 (one job at a time)", ["--cores", "1"])]
    if two_threads:
        variants.append(("--cores 2 --set-threads train=2 (one job, 2 threads)",
                         ["--cores", "2", "--set-threads", "train=2"]))
    results: list[list[dict[str, Any]]] = [[] for _ in variants]
    with tempfile.TemporaryDirectory(prefix="bench_grid_") as tmp:
        root = Path(tmp)
        t = time.perf_counter()
        prepare(root / "seed", cfg)
        prep_s = time.perf_counter() - t
        for rep_i in range(repeats):
            order = list(range(len(variants)))
            for i in (order if rep_i % 2 == 0 else order[::-1]):
                label, args = variants[i]
                work = root / f"run{i}-{rep_i}"
                work.mkdir()
                (work / "config.yaml").write_text(yaml.safe_dump(cfg))
                shutil.copytree(root / "seed/results/data", work / "results/data")
                wall, _ = snakemake(work, *args, TARGET)
                jobs, secs = job_seconds(work)
                out = work / f"results/tables/{TABLE}.csv"
                results[i].append({"wall": wall, "jobs": jobs, "job_s": secs,
                                   "table": out.read_text() if out.exists() else None,
                                   "md": (work / TARGET).exists()})
                shutil.rmtree(work)
    walls = [[r["wall"] for r in runs] for runs in results]
    rows = [[label, median(w), min(w), runs[0]["jobs"], median([r["job_s"] for r in runs]),
             median([r["job_s"] / r["wall"] for r in runs])]
            for (label, _), w, runs in zip(variants, walls, results, strict=True)]
    for line in table(rows, ["variant", "wall s med", "best", "train jobs", "train job-s",
                             "job-s / wall"]):
        rep.say(line)
    ratio = median(walls[1]) / median(walls[0])
    ratio_best = min(walls[1]) / min(walls[0])
    rep.say(f"  data preparation (once, not timed above): {prep_s:.1f} s")
    rep.say(f"  speed-up --cores 2 vs one job at a time: median {ratio:.2f}x, best "
            f"{ratio_best:.2f}x")
    if two_threads:
        rep.say(f"  speed-up --cores 2 vs one job with 2 threads: "
                f"{median(walls[2]) / median(walls[0]):.2f}x")
    flat = [r for runs in results for r in runs]
    rep.values.update(ratio=ratio, ratio_best=ratio_best, walls=walls)
    rep.target("grid: --cores 2 >= 1.4x one job at a time",
               f"{ratio:.2f}x (best {ratio_best:.2f}x)", ratio >= 1.4)
    rep.check(f"every run wrote {TARGET} with {n_runs} training runs",
              all(r["md"] and r["jobs"] == n_runs for r in flat))
    rep.check("every run wrote the same table",
              all(r["table"] is not None and r["table"] == flat[0]["table"] for r in flat))
    return rep


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--rounds", type=int)
    p.add_argument("--seeds", type=int, help="split seeds per experiment (default 1)")
    p.add_argument("--repeats", type=int, help="runs of each variant (default 5; quick 1)")
    p.add_argument("--two-threads", action="store_true",
                   help="also time one job at a time with 2 torch threads")
    a = p.parse_args(argv)
    rep = run(quick=a.quick, rounds=a.rounds, seeds=a.seeds, two_threads=a.two_threads,
              repeats=a.repeats)
    return 0 if all(ok for _, ok in rep.checks) else 1


if __name__ == "__main__":
    raise SystemExit(main())
