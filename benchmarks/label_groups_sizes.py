"""Client sizes of the label_groups partition under ``sizes: by_group`` and ``equal``.

Per design and ``sizes``: the range of the clients' training sizes over the split seeds
and the largest client's share of the test-size-weighted metric (its test rows over
all test rows), the mean and the maximum over the split seeds. Designs: the CIFAR-10
label vector (10 classes x 6000 rows: 5000 train + 1000 test, partitioned together
as the pipeline does; 8 clients, 2-5 groups, split seeds 0-4, config.yaml's
federico_table1_cifar10) and the CPU designs on the prepared labels of digits and
Fashion-MNIST (``--data``: a directory with ``<name>/y.npy``, e.g. the ``data``
folder of a ``federico_readings.py`` work directory; split seeds 0-2).

    python benchmarks/label_groups_sizes.py --data /tmp/federico/w2/data
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from pflrepro.data.schemes.label_groups import SIZES, LabelGroupsPartitioner


def stats(labels: np.ndarray, groups: int, max_samples: int, seeds: range, sizes: str
          ) -> tuple[int, int, float, float, float]:
    """(smallest, largest) training size over the splits, the largest ratio largest /
    smallest within a split, the largest client's test share (mean, max)."""
    lo, hi, ratio, shares = np.inf, 0, 0.0, []
    for seed in seeds:
        p = LabelGroupsPartitioner(clients=8, groups=groups, max_samples=max_samples,
                                   sizes=sizes)
        frame = p.split(labels, 10, seed)
        train = frame[frame.split == "train"].groupby("client").size()
        test = frame[frame.split == "test"].groupby("client").size()
        lo, hi = min(lo, int(train.min())), max(hi, int(train.max()))
        ratio = max(ratio, float(train.max() / train.min()))
        shares.append(float(test.max() / test.sum()))
    return int(lo), int(hi), ratio, float(np.mean(shares)), float(np.max(shares))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, help="directory with digits/ and fashion_mnist/")
    args = ap.parse_args()
    designs = [(f"CIFAR-10, {g} groups", np.repeat(np.arange(10), 6000), g, 0, range(5))
               for g in (2, 3, 4, 5)]
    if args.data:
        fashion = np.load(args.data / "fashion_mnist" / "y.npy")
        digits = np.load(args.data / "digits" / "y.npy")
        designs += [(f"Fashion-MNIST 2400, {g} groups", fashion, g, 2400, range(3))
                    for g in (2, 4)]
        designs += [("Fashion-MNIST 1200, 4 groups (Fig. 6)", fashion, 4, 1200, range(1))]
        designs += [(f"digits, {g} groups", digits, g, 0, range(3)) for g in (2, 4)]
    print("| design | sizes | train rows per client (min-max over splits) | largest / "
          "smallest within a split | largest client's share of the weighted metric "
          "(mean / max over splits) |")
    print("|---|---|---|---|---|")
    for name, labels, groups, max_samples, seeds in designs:
        for sizes in SIZES:
            lo, hi, ratio, mean, top = stats(labels, groups, max_samples, seeds, sizes)
            print(f"| {name} (splits {seeds.start}-{seeds.stop - 1}) | {sizes} | "
                  f"{lo}-{hi} | {ratio:.1f} | {100 * mean:.0f} % / {100 * top:.0f} % |",
                  flush=True)


if __name__ == "__main__":
    main()
