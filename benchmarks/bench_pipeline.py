"""Pipeline overheads at paper scale: the dry run of the full grid, and aggregation.

* **dry run**: ``snakemake -n`` on config.yaml as shipped (``scale: paper``: every
  paper-scale table and figure) in an empty temporary directory, i.e. the DAG of
  the whole grid with nothing built yet. Timed end to end (Python start, config
  validation, DAG, printing); the number of training jobs it plans must equal the
  number of runs ``pflrepro.config.parse`` gives.
* **aggregation**: synthetic run Parquet files, one per training run of that grid,
  with the run table's schema (``pflrepro.store.results``) and realistic row counts: per
  run ``n_train``/``n_test``/``group`` per client at round 0, ``test_accuracy`` and
  ``test_loss`` per client at every evaluated round (0, every ``eval_every``, the
  last), ``train_loss`` per client every round, and what the algorithm records
  (FedeRiCo and FedFomo: K x K weights every round from 0; FedEM: K x M; FedAMP and
  HeurFedAMP: K x K from round 1; APFL, Clustered FL: one value per client). Then
  the workflow's two aggregation stages, each ``pflrepro.store.results.aggregate`` (what
  ``pflrepro aggregate`` runs: read with dictionary-encoded strings, concatenate in
  Arrow, write): every (experiment, method) from its runs, then every experiment
  from its methods.
  Timed in one process (the work), and through the ``pflrepro aggregate`` command for
  one experiment's jobs (the per-process cost the workflow pays once per job).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from _common import PYTHON, REPO, Report, median, table

RECORDS_SQUARE_FROM_0 = {"federico", "fedfomo"}
RECORDS_SQUARE_FROM_1 = {"fedamp", "heurfedamp"}
RECORDS_PER_CLIENT = {"apfl", "clustered_fl"}


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{Path(PYTHON).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


# --------------------------------------------------------------------------- dry run
def dry_run(workdir: Path) -> tuple[float, dict[str, int]]:
    """``snakemake -n`` on config.yaml in ``workdir``; wall seconds and the job counts."""
    (workdir / "config.yaml").write_text((REPO / "config.yaml").read_text())
    cmd = [PYTHON, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory",
           str(workdir), "--configfile", str(workdir / "config.yaml"), "--cores", "2", "-n"]
    t = time.perf_counter()
    proc = subprocess.run(cmd, cwd=workdir, env=_env(), capture_output=True, text=True,
                          check=False)
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        raise RuntimeError(f"snakemake -n failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    text = proc.stdout + proc.stderr
    stats = text[text.rfind("Job stats:"):]
    counts = {m.group(1): int(m.group(2))
              for m in re.finditer(r"^(\w+)\s+(\d+)\s*$", stats, flags=re.MULTILINE)}
    return wall, counts


# --------------------------------------------------------------------------- runs
def paper_runs() -> list[dict[str, Any]]:
    """Every training run of the paper-scale grid with what sizes its table."""
    from pflrepro.config import parse

    cfg = parse(yaml.safe_load((REPO / "config.yaml").read_text()))
    runs = []
    for name, exp in cfg.experiments.items():
        if exp.scale != cfg.scale:
            continue
        for key in cfg.runs(name):
            method = cfg.methods[key.method]
            runs.append({"key": key, "algorithm": method.algorithm,
                         "params": dict(method.params), "dataset": exp.dataset,
                         "clients": exp.partition(key.partition).clients,
                         "rounds": exp.training.rounds, "eval_every": exp.training.eval_every})
    return runs


def run_frame(run: dict[str, Any], rng: np.random.Generator) -> Any:
    """A synthetic run table with the schema and row count of ``run``'s real one."""
    import pandas as pd

    from pflrepro.store import results as R

    k, rounds, alg = run["clients"], run["rounds"], run["algorithm"]
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray, str]] = []
    cl = np.arange(k)

    def add(rnds: np.ndarray, clients: np.ndarray, peers: np.ndarray, metric: str) -> None:
        parts.append((rnds, clients, peers, metric))

    def per_client(rnds: np.ndarray, metric: str) -> None:
        add(np.repeat(rnds, k), np.tile(cl, len(rnds)), np.full(len(rnds) * k, -1), metric)

    zero = np.zeros(1, dtype=np.int64)
    for m in (R.N_TRAIN, R.N_TEST, R.GROUP):
        per_client(zero, m)
    evaluated = np.array(sorted({0, rounds, *range(run["eval_every"], rounds + 1,
                                                   run["eval_every"])}))
    per_client(evaluated, R.TEST_ACCURACY)
    per_client(evaluated, R.TEST_LOSS)
    per_client(np.arange(1, rounds + 1), R.TRAIN_LOSS)
    peers = 0
    if alg in RECORDS_SQUARE_FROM_0 | RECORDS_SQUARE_FROM_1:
        peers = k
    elif alg == "fedem":
        peers = int(run["params"].get("components", 4))
    if peers:
        first = 1 if alg in RECORDS_SQUARE_FROM_1 else 0
        rr = np.arange(first, rounds + 1)
        add(np.repeat(rr, k * peers), np.tile(np.repeat(cl, peers), len(rr)),
            np.tile(np.arange(peers), len(rr) * k), R.WEIGHT)
    elif alg in RECORDS_PER_CLIENT:
        per_client(np.arange(0, rounds + 1), "alpha" if alg == "apfl" else "cluster")
    rnd = np.concatenate([p[0] for p in parts]).astype(np.int32)
    frame = pd.DataFrame({
        "round": rnd,
        "client": np.concatenate([p[1] for p in parts]).astype(np.int32),
        "peer": np.concatenate([p[2] for p in parts]).astype(np.int32),
        "metric": pd.array(np.concatenate([np.full(len(p[0]), p[3], dtype=object)
                                           for p in parts]), dtype="string"),
        "value": rng.random(len(rnd)),
    })
    key = run["key"]
    config = {"experiment": key.experiment, "dataset": run["dataset"],
              "partition": key.partition, "method": key.method, "algorithm": alg,
              "params": str(sorted(run["params"].items())), "client_training": "loop",
              "package_version": "0.1.0",
              "git_revision": "0" * 40}
    for col in R.CONFIG_COLUMNS:
        if col in ("split_seed", "train_seed"):
            frame[col] = np.int64(key.split if col == "split_seed" else key.seed)
        else:
            frame[col] = pd.array([config[col]] * len(frame), dtype="string")
    return frame


def write_runs(root: Path, runs: list[dict[str, Any]], scale: float = 1.0
               ) -> dict[tuple[str, str], list[Path]]:
    """Write every run's synthetic Parquet (the train rule's path layout)."""
    from pflrepro.store.io import write_parquet

    rng = np.random.default_rng(0)
    groups: dict[tuple[str, str], list[Path]] = defaultdict(list)
    for run in runs:
        key = run["key"]
        path = (root / "results/runs" / key.experiment / key.partition / key.method
                / f"split{key.split}-seed{key.seed}.parquet")
        path.parent.mkdir(parents=True, exist_ok=True)
        if scale != 1.0:
            run = dict(run, rounds=max(1, int(run["rounds"] * scale)))
        write_parquet(run_frame(run, rng), path)
        groups[(key.experiment, key.method)].append(path)
    return groups


def aggregate(paths: list[Path], out: Path) -> int:
    """What ``pflrepro aggregate`` does (:func:`pflrepro.store.results.aggregate`); returns rows.

    The output's folder is made first, as Snakemake makes a job's output folders (the
    store creates missing folders only inside the working directory).
    """
    from pflrepro.store.results import aggregate as aggregate_tables

    out.parent.mkdir(parents=True, exist_ok=True)
    return aggregate_tables(paths, out)


def aggregate_all(root: Path, groups: dict[tuple[str, str], list[Path]]) -> dict[str, Any]:
    """Both workflow stages in one process; seconds per stage and row counts."""
    t = time.perf_counter()
    per_exp: dict[str, list[Path]] = defaultdict(list)
    rows = 0
    for (exp, method), paths in groups.items():
        out = root / "results/aggregate" / exp / f"{method}.parquet"
        rows += aggregate(paths, out)
        per_exp[exp].append(out)
    t1 = time.perf_counter()
    exp_rows = sum(aggregate(outs, root / "results/aggregate" / f"{exp}.parquet")
                   for exp, outs in per_exp.items())
    t2 = time.perf_counter()
    return {"method_s": t1 - t, "experiment_s": t2 - t1, "total_s": t2 - t, "rows": rows,
            "experiment_rows": exp_rows, "jobs": len(groups) + len(per_exp)}


def aggregate_cli(root: Path, exp: str, groups: dict[tuple[str, str], list[Path]]
                  ) -> tuple[float, int]:
    """One experiment's aggregate jobs through the ``pflrepro aggregate`` command."""
    exe = str(Path(PYTHON).parent / "pflrepro")
    outs = []
    t = time.perf_counter()
    for (e, method), paths in groups.items():
        if e != exp:
            continue
        out = root / "cli" / exp / f"{method}.parquet"
        out.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([exe, "aggregate", "--out", str(out), *map(str, paths)], check=True,
                       env=_env(), capture_output=True)
        outs.append(out)
    subprocess.run([exe, "aggregate", "--out", str(root / "cli" / f"{exp}.parquet"),
                    *map(str, outs)], check=True, env=_env(), capture_output=True)
    return time.perf_counter() - t, len(outs) + 1


# --------------------------------------------------------------------------- benchmark
def run(quick: bool = False, repeats: int | None = None) -> Report:
    """Run the benchmark; return its report."""
    repeats = repeats or (1 if quick else 5)
    rep = Report("pipeline")
    runs = paper_runs()
    rep.say(f"== pipeline: paper-scale grid of config.yaml: {len(runs)} training runs; "
            f"{repeats} repeat(s) ==")
    with tempfile.TemporaryDirectory(prefix="bench_pipeline_") as tmp:
        root = Path(tmp)
        walls, counts = [], {}
        for i in range(repeats):
            work = root / f"dry{i}"
            work.mkdir()
            wall, counts = dry_run(work)
            walls.append(wall)
        rep.say(f"  snakemake -n (full grid, empty directory): median {median(walls):.2f} s, "
                f"best {min(walls):.2f} s; plans {counts.get('total', 0)} jobs, "
                f"{counts.get('train', 0)} of them training")
        rep.target("pipeline: dry run of the full grid < 10 s", f"{median(walls):.2f} s",
                   median(walls) < 10)
        if not quick:
            imp = []
            for _ in range(repeats):
                t = time.perf_counter()
                subprocess.run([PYTHON, "-c", "import pflrepro.config"], check=True,
                               env=_env())
                imp.append(time.perf_counter() - t)
            rep.say(f"  of which the Snakefile's `import pflrepro.config` (a fresh Python): "
                    f"median {median(imp):.2f} s")
        rep.check(f"dry run plans one training job per run ({counts.get('train')} == "
                  f"{len(runs)})", counts.get("train") == len(runs))

        chosen = runs[:24] if quick else runs
        scale = 0.1 if quick else 1.0
        t = time.perf_counter()
        groups = write_runs(root / "agg", chosen, scale)
        gen_s = time.perf_counter() - t
        files = [p for ps in groups.values() for p in ps]
        size = sum(p.stat().st_size for p in files)
        res = [aggregate_all(root / "agg", groups) for _ in range(repeats)]
        tot = [r["total_s"] for r in res]
        exps = sorted({e for e, _ in groups})
        biggest = max(exps, key=lambda e: sum(len(p) for (x, _), p in groups.items() if x == e))
        cli_s, cli_jobs = aggregate_cli(root / "agg", biggest, groups)
        rows = [["in process: (experiment, method) from runs", len(groups),
                 median([r["method_s"] for r in res])],
                ["in process: experiment from methods", len(exps),
                 median([r["experiment_s"] for r in res])],
                ["in process: both stages", res[0]["jobs"], median(tot)],
                [f"pflrepro aggregate CLI, {biggest}", cli_jobs, cli_s]]
        rep.say(f"  {len(files)} synthetic run files{' (10% of the rounds)' if quick else ''}"
                f", {res[0]['rows']:,} rows, {size / 2**20:.1f} MB Parquet (written in "
                f"{gen_s:.1f} s, not timed below)")
        for line in table(rows, ["aggregation", "jobs", "seconds (median)"]):
            rep.say(line)
        per_job = cli_s / cli_jobs
        rep.say(f"  CLI: {per_job:.2f} s per aggregate job; the grid's {res[0]['jobs']} "
                f"aggregate jobs ~ {per_job * res[0]['jobs'] / 2:.0f} s on 2 cores")
        rep.target("pipeline: aggregation of the full grid < 5 s",
                   f"{median(tot):.2f} s in process (best {min(tot):.2f})", median(tot) < 5)
        rep.check(f"aggregates hold every row ({res[0]['experiment_rows']:,} == "
                  f"{res[0]['rows']:,})", res[0]["experiment_rows"] == res[0]["rows"])
        rep.values.update(dry=median(walls), agg=median(tot), rows=res[0]["rows"])
    return rep


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--repeats", type=int)
    a = p.parse_args(argv)
    rep = run(quick=a.quick, repeats=a.repeats)
    return 0 if all(ok for _, ok in rep.checks) else 1


if __name__ == "__main__":
    raise SystemExit(main())
