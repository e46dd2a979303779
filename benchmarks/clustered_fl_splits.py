"""Clustered FL's splits at CPU scale for given ε₁ values, on FedeRiCo's Table 1 designs.

Runs ``clustered_fl`` (``pflrepro.pipeline.single.single_run``, the ``pflrepro run`` path) on the
partitions and seed pairs of config.yaml's federico_table1_cpu_* experiments (as
``benchmarks/federico_readings.py`` does) for each ``--eps1``, and prints per design the
final mean client test accuracy and the number of clusters at rounds 20, 21, 25 and 30
(splits start after round 20), from the ``cluster`` ids the method records every round;
plus, per design, how often the final clusters hold one label group each.

    python benchmarks/clustered_fl_splits.py --work /tmp/cfl --eps1 0.4 1 3 10

``--compare`` instead sets the two Table 1 variants side by side with FedAvg on the same
runs: ``clustered_fl_fedem`` with its hyperparameters read from config.yaml (FedEM's
ε₁ = 0.4, ε₂ = 1.6, the implementation FedeRiCo ran) and ``clustered_fl`` at the ε₁/ε₂
its validation selection gave per design (``--tuned design=eps1/eps2``; the pipeline's
``results/tuning/federico_table1_cpu_*/clustered_fl.json`` hold them). Per design and
variant: final mean client test accuracy per pair and its mean, the difference to
FedAvg's mean, and the distinct clusters at round 30 per pair against the design's
label groups.

    python benchmarks/clustered_fl_splits.py --work /tmp/cfl --compare \\
        --tuned fashion2=3/0.4 fashion4=3/0.4 digits2=0.4/0.4 digits4=1/0.4
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import numpy as np
import pandas as pd
import yaml
from federico_readings import TABLE1, accuracy, groups_of, run

CONFIG = Path(__file__).resolve().parents[1] / "config.yaml"


def clusters(df: pd.DataFrame) -> dict[int, np.ndarray]:
    """round -> cluster id per client."""
    c = df[df.metric == "cluster"]
    return {int(r): g.sort_values("client").value.to_numpy().astype(int)
            for r, g in c.groupby("round")}


def pure(ids: np.ndarray, groups: np.ndarray) -> bool:
    """Every cluster holds clients of one label group only."""
    return all(len(set(groups[ids == c])) == 1 for c in set(ids))


def variant_params(name: str, config: Path = CONFIG) -> dict:
    """A ``methods:`` variant's hyperparameters in config.yaml (algorithm and sources dropped)."""
    spec = yaml.safe_load(config.read_text())["methods"][name]
    return {k: v for k, v in spec.items() if k not in ("algorithm", "sources")}


def parse_tuned(items: list[str]) -> dict[str, dict[str, float]]:
    """``design=eps1/eps2`` items -> design -> {eps1, eps2}."""
    out = {}
    for item in items:
        design, values = item.split("=")
        eps1, eps2 = values.split("/")
        out[design] = {"eps1": float(eps1), "eps2": float(eps2)}
    return out


def sweep(work: Path, eps1s: list[float]) -> None:
    print("eps1 | design | final acc % (per pair) | clusters at r20/r21/r25/r30 (per pair)"
          " | pure final clusters")
    for eps1 in eps1s:
        for name, data, groups, pairs in TABLE1:
            accs, counts, purity = [], [], []
            for split, seed in pairs:
                df = run(work, "clustered_fl", {"eps1": eps1}, data, groups, split, seed,
                         f"cfl_eps{eps1:g}-{name}")
                accs.append(accuracy(df)[0])
                ids = clusters(df)
                counts.append("/".join(str(len(set(ids[r]))) for r in (20, 21, 25, max(ids))))
                purity.append(pure(ids[max(ids)], groups_of(df)))
            print(f"{eps1:g} | {name} | " + " ".join(f"{a:.1f}" for a in accs) + " | "
                  + " ".join(counts) + f" | {sum(purity)}/{len(purity)}", flush=True)


def compare(work: Path, tuned: dict[str, dict[str, float]]) -> None:
    fedem = variant_params("clustered_fl_fedem")
    print(f"clustered_fl_fedem: {fedem}; clustered_fl: {tuned}")
    print("design | variant | eps1/eps2 | final acc % per pair (mean) | minus FedAvg (pp)"
          " | clusters at r30 per pair / groups | pure")
    for name, data, groups, pairs in TABLE1:
        base = [accuracy(run(work, "fedavg", {}, data, groups, s, t, f"fedavg-{name}"))[0]
                for s, t in pairs]
        print(f"{name} | fedavg | - | " + " ".join(f"{a:.2f}" for a in base)
              + f" ({np.mean(base):.2f}) | 0 | - | -", flush=True)
        for label, params in (("clustered_fl_fedem", fedem), ("clustered_fl", tuned[name])):
            tag = f"{label}_{params['eps1']:g}_{params['eps2']:g}-{name}"
            accs, used, purity = [], [], []
            for split, seed in pairs:
                df = run(work, "clustered_fl", params, data, groups, split, seed, tag)
                accs.append(accuracy(df)[0])
                ids = clusters(df)
                used.append(len(set(ids[max(ids)])))
                purity.append(pure(ids[max(ids)], groups_of(df)))
            print(f"{name} | {label} | {params['eps1']:g}/{params['eps2']:g} | "
                  + " ".join(f"{a:.2f}" for a in accs) + f" ({np.mean(accs):.2f}) | "
                  f"{np.mean(accs) - np.mean(base):+.2f} | "
                  + " ".join(map(str, used)) + f" / {groups} | {sum(purity)}/{len(purity)}",
                  flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, default=Path("/tmp/clustered_fl_splits"))
    ap.add_argument("--eps1", type=float, nargs="+", default=[0.4, 1.0, 3.0, 10.0])
    ap.add_argument("--compare", action="store_true",
                    help="clustered_fl_fedem and the tuned clustered_fl against FedAvg")
    ap.add_argument("--tuned", nargs="+", default=[],
                    help="design=eps1/eps2 per design (fashion2 fashion4 digits2 digits4)")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    if args.compare:
        tuned = parse_tuned(args.tuned)
        missing = [d for d, *_ in TABLE1 if d not in tuned]
        if missing:
            ap.error(f"--compare needs --tuned for {missing}")
        compare(args.work, tuned)
    else:
        sweep(args.work, args.eps1)


if __name__ == "__main__":
    main()
