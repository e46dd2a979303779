"""Labels per client of the pathological split under its two readings (``shards``).

Partitions a data set's prepared labels (``y.npy`` of a ``pflrepro prepare`` output, or a
synthetic balanced label vector with ``--classes``) with ``per_label`` and
``label_sorted`` shards for each split seed, and prints per reading the distribution of
distinct labels per client, the clients' row counts, the rows used, and whether the two
partitions are identical:

    python benchmarks/pathological_labels.py --labels /tmp/cfl/data/fashion_mnist/y.npy \\
        --max-samples 3000 --seeds 0 1 2
    python benchmarks/pathological_labels.py --classes 47 --per-class 2400
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from pflrepro.data.schemes.pathological import SHARDS, PathologicalPartitioner


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--labels", type=Path, help="a prepared data set's y.npy")
    ap.add_argument("--classes", type=int, help="synthetic: this many balanced labels")
    ap.add_argument("--per-class", type=int, default=100, help="synthetic: rows per label")
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--classes-per-client", type=int, default=2)
    ap.add_argument("--max-samples", type=int, default=0)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    args = ap.parse_args()
    if (args.labels is None) == (args.classes is None):
        ap.error("give --labels or --classes")
    if args.labels is not None:
        labels = np.load(args.labels)
        classes = int(labels.max()) + 1
    else:
        classes = args.classes
        labels = np.repeat(np.arange(classes), args.per_class)
    print("seed | shards | clients by labels held | rows per client min-max | rows used")
    for seed in args.seeds:
        frames = {}
        for shards in SHARDS:
            p = PathologicalPartitioner(clients=args.clients, max_samples=args.max_samples,
                                        classes_per_client=args.classes_per_client,
                                        shards=shards)
            frame = frames[shards] = p.split(labels, classes, seed)
            held = frame.assign(label=labels[frame["index"]]).groupby("client").label.nunique()
            sizes = frame.groupby("client").size()
            print(f"{seed} | {shards} | {held.value_counts().sort_index().to_dict()} | "
                  f"{sizes.min()}-{sizes.max()} | {len(frame)}")
        print(f"{seed} | identical: {frames[SHARDS[0]].equals(frames[SHARDS[1]])}")


if __name__ == "__main__":
    main()
