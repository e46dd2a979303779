"""PerFed-CKT's evaluation and sampling readings, measured (docs/methods/perfedckt.md).

The text says neither which test rows a client is scored on, nor how client
accuracies are averaged, nor what p_k (the chance a client is sampled) is. Two parts:

* ``--partition``: no training. The paper-scale partition (Dirichlet α = 0.01 over 100
  clients, ``min_samples`` 5, the dirichlet scheme's own code) of a CIFAR-10-shaped
  label vector (10 classes x 6000: the prepared set pools 5000 train and 1000 test
  images per class; the order is a seeded shuffle, as CIFAR-10 is not on disk here),
  and the CPU design's partitions of the real Fashion-MNIST labels; per split seed:
  clients holding one class, clients at exactly ``min_samples``, and the score of the
  majority-class rule (each client predicts its most frequent training label) under
  each evaluation reading: own test rows averaged unweighted / weighted by test size,
  and the global test rows (every client's test rows together). With
  ``--partition-readings`` also the majority rule on the CIFAR-10-shaped vector under
  each partition reading of ``perfedckt_partitions.py`` (per-class / per-client
  Dirichlet, top-up / redraw / drop of small clients, FedDF's reference split) at
  α = 0.01 over 20, 50 and 100 clients, split seeds 0-2.
* ``--train``: config.yaml's perfedckt_table1_cpu design (Fashion-MNIST, Dir 0.1, 50
  clients, C = 0.1, 20 rounds, split seeds 0-2, training seed 0) through
  ``pflrepro.pipeline.single.single_run`` (the ``pflrepro run`` path), methods
  ``majority local fedavg per_fedavg perfedckt`` (``--methods all``: every method of
  the design), under the readings ``base`` (uniform selection, own test rows),
  ``global`` (global test rows), ``size`` (p_k ∝ n_k), ``shuffled`` (random
  reshuffling), and ``base_c15`` / ``shuffled_c15`` (the C = 0.15 experiment, uniform /
  reshuffled), each also as ``het_<reading>`` (Table 2's three MLP widths by data size;
  ``--methods het``: its methods). Per method and reading: mean BMTA, final mean, the
  weighted accuracy (best over rounds and final), the mean BMTA over the clients drawn
  at least once in the run (the same set at every round), and the clients never
  drawn. Runs are cached under ``--work``; ``--threads 1``, one run at a time.

    python benchmarks/perfedckt_readings.py --work /tmp/perfedckt --partition --train
    python benchmarks/perfedckt_readings.py --work /tmp/perfedckt --partition \
        --partition-readings
    python benchmarks/perfedckt_readings.py --work /tmp/perfedckt --train \
        --readings base shuffled base_c15 shuffled_c15 --methods all
    python benchmarks/perfedckt_readings.py --work /tmp/perfedckt --train \
        --readings het_base het_shuffled het_base_c15 het_shuffled_c15 --methods het
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd

from pflrepro.data.partition import from_spec
from pflrepro.training.selection import participants

TRAINING = {"rounds": 20, "batch_size": 32, "optimizer": "sgd", "lr": 0.05,
            "eval_every": 1, "model": "mlp", "model_options": {"hidden": [64]},
            "device": "cpu", "client_fraction": 0.1}
PARTITION = {"clients": 50, "alpha": 0.1, "max_samples": 4000, "min_samples": 5}
PAPER_PARTITION = {"scheme": "dirichlet", "clients": 100, "alpha": 0.01, "min_samples": 5}
#: label -> (algorithm, hyperparameters): config.yaml's perfedckt_table1_cpu variants
METHODS = {"majority": ("majority", {}), "local": ("local", {}), "fedavg": ("fedavg", {}),
           "per_fedavg": ("per_fedavg", {"variant": "hf", "aggregation": "uniform"}),
           "perfedckt": ("perfedckt", {"clusters": 3}),
           "fedprox": ("fedprox", {}), "scaffold": ("scaffold", {"server_lr": 1.0}),
           "feddf": ("feddf", {"server_steps": 10000, "server_lr": 0.001,
                               "lr_schedule": "cosine", "clip_norm": 5.0, "eval_every": 100,
                               "patience": 1000, "early_stopping": "agreement",
                               "val_fraction": 0.2}),
           "fedfomo_m5": ("fedfomo", {"downloads": 5}),
           "ditto": ("ditto", {"personal_steps": 0}),
           "hypcluster": ("hypcluster", {"hypotheses": 3}),
           **{f"perfedckt_c{c}": ("perfedckt", {"clusters": c}) for c in (1, 2, 4, 5)}}
#: the methods measured under every reading (--methods all: every method above)
CORE = ["majority", "local", "fedavg", "per_fedavg", "perfedckt"]
#: the methods of the heterogeneous-model experiments (Table 2)
HET_METHODS = ["majority", "feddf", "perfedckt_c1", "perfedckt_c2", "perfedckt",
               "perfedckt_c4", "perfedckt_c5"]
READINGS = {"base": {}, "global": {"eval_test": "global"},
            "size": {"client_selection": "data_size"},
            "shuffled": {"client_selection": "shuffled"},
            # perfedckt_table1_c15_cpu: C = 0.15 (m = 8)
            "base_c15": {"client_fraction": 0.15},
            "shuffled_c15": {"client_fraction": 0.15, "client_selection": "shuffled"}}
#: perfedckt_table2*_cpu: three MLP widths by data size (run with --methods het)
HET = {"architectures": [{"model": "mlp", "model_options": {"hidden": [h]}}
                         for h in (16, 64, 256)],
       "architecture_assignment": "data_size"}
for _name in ("base", "shuffled", "base_c15", "shuffled_c15"):
    READINGS[f"het_{_name}"] = {**READINGS[_name], **HET}
SPLITS = (0, 1, 2)
MIRRORS = ("/usr/share/datasets/fashion-mnist",)


# ----------------------------------------------------------------------- partition
def majority_scores(frame: pd.DataFrame, labels: np.ndarray, min_samples: int) -> dict:
    """The majority rule's scores on one partition table, and its skew counts."""
    own, sizes, singles, at_min = [], [], 0, 0
    test_all = labels[frame.loc[frame.split == "test", "index"].to_numpy()]
    glob, held = [], []
    for _, rows in frame.groupby("client", sort=True):
        held.append(len(rows))
        y_train = labels[rows.loc[rows.split == "train", "index"].to_numpy()]
        y_test = labels[rows.loc[rows.split == "test", "index"].to_numpy()]
        label = int(np.bincount(y_train, minlength=labels.max() + 1).argmax())
        own.append(float(np.mean(y_test == label)))
        sizes.append(len(y_test))
        glob.append(float(np.mean(test_all == label)))
        singles += len(np.unique(labels[rows["index"].to_numpy()])) == 1
        at_min += len(rows) == min_samples
    own_a, sizes_a = np.array(own), np.array(sizes)
    return {"one_class": singles, "at_min": at_min, "clients": len(held),
            "size_min": min(held), "size_max": max(held), "own_mean": 100 * own_a.mean(),
            "own_weighted": 100 * float((own_a * sizes_a).sum() / sizes_a.sum()),
            "global": 100 * float(np.mean(glob))}


def cifar_shaped() -> np.ndarray:
    """The CIFAR-10-shaped label vector: 10 classes x 6000 in a seeded order."""
    rng = np.random.default_rng(12345)  # the label order of the CIFAR-10-shaped vector
    return rng.permutation(np.repeat(np.arange(10), 6000))


def partition_part(work: Path) -> None:
    """Print the majority rule's scores on the paper-scale and CPU-scale partitions."""
    cifar = cifar_shaped()
    print("| partition | split | one-class clients | clients at min_samples | "
          "own, mean | own, weighted | global |")
    print("|---|---|---|---|---|---|---|")
    fashion = _fashion_labels(work)
    cases = [("CIFAR-10 shape, Dir 0.01, 100 clients", cifar, PAPER_PARTITION)]
    for alpha in (0.1, 0.01):
        cases.append((f"Fashion-MNIST 4000, Dir {alpha}, 50 clients", fashion,
                      {"scheme": "dirichlet", **PARTITION, "alpha": alpha}))
    for name, labels, spec in cases:
        part = from_spec(spec)
        for split in SPLITS:
            s = majority_scores(part.split(labels, 10, split), labels, spec["min_samples"])
            print(f"| {name} | {split} | {s['one_class']} | {s['at_min']} | "
                  f"{s['own_mean']:.1f} | {s['own_weighted']:.1f} | {s['global']:.1f} |")


def reading_row(reading: str, clients: int, labels: np.ndarray) -> dict[str, str]:
    """One row of the partition readings' table: each cell the splits' values, "/"-joined.

    A split whose reading has no passing draw shows "-" in every other cell; "draws
    passing" counts, per split, the draws of a redrawing reading that hold its minimum.
    """
    import perfedckt_partitions as pp

    cells: dict[str, list[str]] = {k: [] for k in (
        "clients", "one_class", "at_min", "range", "own_mean", "own_weighted", "global",
        "passing")}
    attempts = 1
    for split in SPLITS:
        built = pp.build(reading, labels, clients, PAPER_PARTITION["alpha"], split)
        cells["passing"].append(str(built.passes))
        attempts = built.attempts
        if built.indices is None:
            for key in cells:
                if key != "passing":
                    cells[key].append("-")
            continue
        s = majority_scores(pp.given(built).split(labels, 10, split), labels, pp.MIN_SAMPLES)
        cells["clients"].append(str(s["clients"]))
        cells["one_class"].append(str(s["one_class"]))
        cells["at_min"].append(str(s["at_min"]))
        cells["range"].append(f"{s['size_min']}..{s['size_max']}")
        for key in ("own_mean", "own_weighted", "global"):
            cells[key].append(f"{s[key]:.1f}")
    row = {k: "/".join(v) for k, v in cells.items()}
    row["passing"] = f"{row['passing']} of {attempts}" if attempts > 1 else "single draw"
    return row


def partition_readings_part() -> None:
    """Print the majority rule under each partition reading (perfedckt_partitions.py)."""
    import perfedckt_partitions as pp

    cifar = cifar_shaped()
    print("| reading | K | clients | one-class clients | clients at 5 samples | size range | "
          "own, mean | own, weighted | global | draws passing |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for reading in pp.READINGS:
        for clients in pp.CLIENT_COUNTS:
            r = reading_row(reading, clients, cifar)
            print(f"| {reading} | {clients} | {r['clients']} | {r['one_class']} | "
                  f"{r['at_min']} | {r['range']} | {r['own_mean']} | {r['own_weighted']} | "
                  f"{r['global']} | {r['passing']} |", flush=True)


def _fashion_labels(work: Path) -> np.ndarray:
    """Fashion-MNIST's prepared labels (prepared under ``work`` if missing)."""
    from pflrepro.data.datasets import prepare_dataset

    out = work / "data" / "fashion_mnist"
    if not (out / "y.npy").exists():
        prepare_dataset("fashion_mnist", out, work / "raw" / "fashion_mnist", MIRRORS)
    return np.load(out / "y.npy")


# ----------------------------------------------------------------------- training
def run(work: Path, method: str, reading: str, split: int) -> pd.DataFrame:
    """One run of the CPU design (cached); its run table."""
    from pflrepro.pipeline.single import SingleRun, single_run

    out = work / "runs" / f"{method}-{reading}-split{split}.parquet"
    if not out.exists():
        t0 = time.perf_counter()
        algorithm, params = METHODS[method]
        single_run(SingleRun(method=algorithm, dataset="fashion_mnist", scheme="dirichlet",
                             partition_options=PARTITION, params=params,
                             training={**TRAINING, **READINGS[reading]},
                             split_seed=split, train_seed=0),
                   out=out, work=work / "cli", data_root=work / "data",
                   raw_root=work / "raw", mirrors=MIRRORS, threads=1)
        print(f"  ran {out.name} in {time.perf_counter() - t0:.1f}s", flush=True)
    return pd.read_parquet(out)


def scores(df: pd.DataFrame, reading: str) -> dict:
    """Accuracies (%) of one run and its never-trained clients."""
    first = df[df["round"] == 0]
    n_train = first[first.metric == "n_train"].sort_values("client").value.to_numpy()
    n_test = first[first.metric == "n_test"].set_index("client").value
    acc = df[(df.metric == "test_accuracy") & (df.client >= 0)]
    table = acc.pivot(index="round", columns="client", values="value").sort_index()
    w = n_test.reindex(table.columns).to_numpy()
    training = {**TRAINING, **READINGS[reading]}
    selection = training.get("client_selection", "uniform")
    # the clients drawn at least once in the run (the training seed is 0 in every run)
    trained = sorted(set().union(*(
        participants(selection, training["client_fraction"], n_train.astype(int).tolist(),
                     0, r) for r in range(1, training["rounds"] + 1))))
    mean = table.mean(axis=1)
    weighted = (table * w).sum(axis=1) / w.sum()
    return {"mean_bmta": 100 * mean.max(), "mean_final": 100 * mean.iloc[-1],
            "weighted_best": 100 * weighted.max(), "weighted_final": 100 * weighted.iloc[-1],
            "trained_bmta": 100 * table[trained].mean(axis=1).max(),
            "never": len(table.columns) - len(trained)}


def train_part(work: Path, readings: list[str], methods: list[str]) -> None:
    """Print the CPU design's table per reading (means over the split seeds)."""
    rows = []
    for reading in readings:
        for method in methods:
            per = [scores(run(work, method, reading, s), reading) for s in SPLITS]
            row = {"reading": reading, "method": method}
            for key in per[0]:
                row[key] = float(np.mean([p[key] for p in per]))
            row["mean_bmta_splits"] = "/".join(f"{p['mean_bmta']:.1f}" for p in per)
            rows.append(row)
    print("| reading | method | mean BMTA (splits 0/1/2) | mean BMTA | final mean | "
          "weighted best | weighted final | mean BMTA, trained clients | never trained |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['reading']} | {r['method']} | {r['mean_bmta_splits']} | "
              f"{r['mean_bmta']:.1f} | {r['mean_final']:.1f} | {r['weighted_best']:.1f} | "
              f"{r['weighted_final']:.1f} | {r['trained_bmta']:.1f} | {r['never']:.1f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/perfedckt"))
    parser.add_argument("--partition", action="store_true")
    parser.add_argument("--partition-readings", action="store_true",
                        help="with --partition: also the partition readings' table "
                             "(perfedckt_partitions.py)")
    parser.add_argument("--train", action="store_true")
    parser.add_argument("--readings", nargs="+", default=list(READINGS), choices=READINGS)
    parser.add_argument("--methods", nargs="+", default=CORE,
                        choices=[*METHODS, "all", "het"])
    args = parser.parse_args()
    if "all" in args.methods:
        args.methods = list(METHODS)
    if "het" in args.methods:
        args.methods = HET_METHODS
    if args.partition_readings and not args.partition:
        parser.error("--partition-readings extends --partition")
    if args.partition:
        partition_part(args.work)
        if args.partition_readings:
            print()
            partition_readings_part()
    if args.train:
        train_part(args.work, args.readings, args.methods)


if __name__ == "__main__":
    main()
