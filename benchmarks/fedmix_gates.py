"""FedMix's experts at the last round of finished runs: does q route by class, the gate by group?

Reads the run tables of one experiment (``results/runs/<experiment>/<partition>/<method>/
split*-seed*.parquet``) and prints, per FedMix method and run, at the last round:

* the final mean and weighted client test accuracy (%);
* the mean over classes of max_k q(z = k | y = c) (1/K: uniform, 1: one-hot per class);
* per client group (e.g. rotation), the mean over the group's clients of each client's
  mean gate p(z = k | x, θ_s) over its test inputs, shown as the group's largest entry
  and the expert it falls on; and the mean total-variation distance between the
  group-mean gates of two groups (0: every group routes alike, 1: disjoint experts).

    python benchmarks/fedmix_gates.py --results results --experiment fedmix_rotated_cpu_digits
"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path

import numpy as np
import pandas as pd

from pflrepro.store import results as R


def summarise(frame: pd.DataFrame) -> dict[str, object]:
    """The figures above for one run table."""
    last = int(frame["round"].max())
    acc = frame[(frame["metric"] == R.TEST_ACCURACY) & (frame["round"] == last)
                & (frame["client"] >= 0) & (frame["peer"] < 0)]
    size = frame[(frame["metric"] == R.N_TEST) & (frame["client"] >= 0)
                 & (frame["peer"] < 0)].drop_duplicates("client").set_index("client")["value"]
    weights = acc["client"].map(size).to_numpy(dtype=float)
    out: dict[str, object] = {
        "mean acc": 100 * float(acc["value"].mean()),
        "weighted acc": 100 * float(np.average(acc["value"], weights=weights)),
    }
    q = frame[(frame["metric"] == R.EXPERT_POSTERIOR) & (frame["round"] == last)]
    if not q.empty:
        out["mean max q"] = float(q.groupby("client")["value"].max().mean())
    gates = frame[(frame["metric"] == R.GATE_MASS) & (frame["round"] == last)]
    group = frame[(frame["metric"] == R.GROUP) & (frame["client"] >= 0)
                  & (frame["peer"] < 0)].drop_duplicates("client").set_index("client")["value"]
    if not gates.empty and not group.empty:
        table = gates.pivot_table(index="client", columns="peer", values="value")
        means = table.groupby(table.index.map(group)).mean()
        out["group-mean gate max (expert)"] = ", ".join(
            f"g{int(g)}: {row.max():.2f} (e{int(row.idxmax())})" for g, row in means.iterrows())
        tv = [0.5 * float(np.abs(means.loc[a] - means.loc[b]).sum())
              for a, b in itertools.combinations(means.index, 2)]
        out["between-group TV"] = float(np.mean(tv)) if tv else float("nan")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", default="results")
    parser.add_argument("--experiment", required=True)
    parser.add_argument("--methods", nargs="*", default=None, help="default: every method")
    args = parser.parse_args()
    root = Path(args.results) / "runs" / args.experiment
    for path in sorted(root.glob("*/*/split*-seed*.parquet")):
        method = path.parent.name
        if args.methods and method not in args.methods:
            continue
        stats = summarise(R.read_table(str(path)))
        shown = "; ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}"
                          for k, v in stats.items())
        print(f"{method} {path.stem}: {shown}")


if __name__ == "__main__":
    main()
