"""Clustered FL's splits at CPU scale for given ε₁ values, on FedeRiCo's Table 1 designs.

Runs ``clustered_fl`` (``pflrepro.pipeline.single.single_run``, the ``pflrepro run`` path) on the
partitions and seed pairs of config.yaml's federico_table1_cpu_* experiments (as
``benchmarks/federico_readings.py`` does) for each ``--eps1``, and prints per design the
final mean client test accuracy and the number of clusters at rounds 20, 21, 25 and 30
(splits start after round 20), from the ``cluster`` ids the method records every round;
plus, per design, how often the final clusters hold one label group each.

    python benchmarks/clustered_fl_splits.py --work /tmp/cfl --eps1 0.4 1 3 10
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import numpy as np
import pandas as pd
from federico_readings import TABLE1, accuracy, groups_of, run


def clusters(df: pd.DataFrame) -> dict[int, np.ndarray]:
    """round -> cluster id per client."""
    c = df[df.metric == "cluster"]
    return {int(r): g.sort_values("client").value.to_numpy().astype(int)
            for r, g in c.groupby("round")}


def pure(ids: np.ndarray, groups: np.ndarray) -> bool:
    """Every cluster holds clients of one label group only."""
    return all(len(set(groups[ids == c])) == 1 for c in set(ids))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, default=Path("/tmp/clustered_fl_splits"))
    ap.add_argument("--eps1", type=float, nargs="+", default=[0.4, 1.0, 3.0, 10.0])
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    print("eps1 | design | final acc % (per pair) | clusters at r20/r21/r25/r30 (per pair)"
          " | pure final clusters")
    for eps1 in args.eps1:
        for name, data, groups, pairs in TABLE1:
            accs, counts, purity = [], [], []
            for split, seed in pairs:
                df = run(args.work, "clustered_fl", {"eps1": eps1}, data, groups, split, seed,
                         f"cfl_eps{eps1:g}-{name}")
                accs.append(accuracy(df)[0])
                ids = clusters(df)
                counts.append("/".join(str(len(set(ids[r]))) for r in (20, 21, 25, max(ids))))
                purity.append(pure(ids[max(ids)], groups_of(df)))
            print(f"{eps1:g} | {name} | " + " ".join(f"{a:.1f}" for a in accs) + " | "
                  + " ".join(counts) + f" | {sum(purity)}/{len(purity)}", flush=True)


if __name__ == "__main__":
    main()
