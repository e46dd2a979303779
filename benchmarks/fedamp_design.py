"""FedAMP's CPU design chosen by an oracle, and FedAMP's α readings, on VALIDATION rows.

Two measurements, both on validation partitions (:func:`pflrepro.tuning.validation_partition`:
20 % of each client's training rows, seeded by the split; the test rows are dropped
before anything else, so no test image is read):

``--oracle``: for each candidate practical design (:data:`DESIGNS`), FedAMP's server
and client steps with a *fixed* ξ that cannot favour the method (λ = 0: each client
starts every round from its cloud model u_i = Σ_j ξ_ij w_j, then trains its local
epoch):

* ``identity``: ξ = I (Local training);
* ``block``: ξ_ij = 1/|G| for j in client i's own group G (itself included), 0 across
  (the partition's groups: an oracle block, per-group FedAvg with a final local epoch);
* ``uniform``: ξ_ij = 1/K (flat averaging over all K clients).

A design on which ``block`` beats both others by a margin is one on which grouping can
matter: only there can validation prefer a grouped ξ. Reported per design: the
best-over-rounds (BMTA on validation) and final mean client validation accuracy of
each arm (mean over the seed pairs), and block's margin over the better of the others.

``--readings``: FedAMP's own attention (eq. 5) on a design, for (σ, α/σ, step, λ/α)
readings (``--reading sigma/ratio/step/prox``): validation accuracy and, at the rounds
of ``--rounds-at``, ξ's mean within-group / across-group peer weight, their ratio, and
the peer mass on the own group (Σ_{j≠i, g_j=g_i} ξ_ij / Σ_{j≠i} ξ_ij).

Runs are cached under ``--work`` (parquet per run); ``--threads 1``; one run at a time.

    OMP_NUM_THREADS=1 python benchmarks/fedamp_design.py --work /tmp/fedamp --oracle
    OMP_NUM_THREADS=1 python benchmarks/fedamp_design.py --work /tmp/fedamp \\
        --design fashion_h16 --reading 1e-6/0.05/fixed/0 --reading 1e-6/1/capped/0
"""

from __future__ import annotations

import argparse
import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from pflrepro.algorithms.fedamp import FedAMP

MIRRORS = ("/usr/share/datasets/fashion-mnist",)
#: (split seed, train seed) pairs, as config.yaml's FedAMP CPU experiments (3 runs).
PAIRS = [(0, 0), (1, 1), (2, 2)]
BASE_TRAINING = {"rounds": 40, "batch_size": 32, "optimizer": "sgd", "lr": 0.05,
                 "eval_every": 1, "model": "mlp", "model_options": {"hidden": [64]},
                 "device": "cpu"}
BASE_PARTITION = {"clients": 20, "groups": 5, "dominant_share": 0.8, "max_samples": 3000}
#: name -> (data set, partition options over BASE_PARTITION, training over BASE_TRAINING)
DESIGNS: dict[str, tuple[str, dict, dict]] = {
    "fashion_base": ("fashion_mnist", {}, {}),
    "fashion_h16": ("fashion_mnist", {}, {"model_options": {"hidden": [16]}}),
    "fashion_d95": ("fashion_mnist", {"dominant_share": 0.95}, {}),
    "fashion_d95_h16": ("fashion_mnist", {"dominant_share": 0.95},
                        {"model_options": {"hidden": [16]}}),
    "fashion_s5": ("fashion_mnist", {}, {"local_steps": 5}),
    "fashion_h16_s5": ("fashion_mnist", {}, {"local_steps": 5,
                                             "model_options": {"hidden": [16]}}),
    "fashion_x4_h16": ("fashion_mnist", {"max_samples": 12000},
                       {"model_options": {"hidden": [16]}}),
    "fashion_h4": ("fashion_mnist", {}, {"model_options": {"hidden": [4]}}),
    "fashion_d90": ("fashion_mnist", {"dominant_share": 0.9}, {}),
    "fashion_d95_x4": ("fashion_mnist", {"dominant_share": 0.95, "max_samples": 12000}, {}),
    "fashion_d90_x4": ("fashion_mnist", {"dominant_share": 0.9, "max_samples": 12000}, {}),
    "fashion_d100": ("fashion_mnist", {"dominant_share": 1.0}, {}),
    "fashion_d95_x2": ("fashion_mnist", {"dominant_share": 0.95, "max_samples": 6000}, {}),
    "fashion_d95_half": ("fashion_mnist", {"dominant_share": 0.95, "max_samples": 1500}, {}),
    "fashion_d100_half": ("fashion_mnist", {"dominant_share": 1.0, "max_samples": 1500}, {}),
    "fashion_half": ("fashion_mnist", {"max_samples": 1500}, {}),
    "fashion_d95_s1": ("fashion_mnist", {"dominant_share": 0.95}, {"local_steps": 1}),
    "fashion_d100_s1": ("fashion_mnist", {"dominant_share": 1.0}, {"local_steps": 1}),
    "fashion_g10": ("fashion_mnist", {"groups": 10}, {}),
    "fashion_g2": ("fashion_mnist", {"groups": 2}, {}),
    "fashion_g10_h16": ("fashion_mnist", {"groups": 10}, {"model_options": {"hidden": [16]}}),
    # 2 groups of 5 disjoint dominant classes each: the groups' tasks differ most.
    "fashion_g2_d95": ("fashion_mnist", {"groups": 2, "dominant_share": 0.95}, {}),
    "fashion_g2_d100": ("fashion_mnist", {"groups": 2, "dominant_share": 1.0}, {}),
    "fashion_g2_d95_h16": ("fashion_mnist", {"groups": 2, "dominant_share": 0.95},
                           {"model_options": {"hidden": [16]}}),
    "fashion_g2_d100_h16": ("fashion_mnist", {"groups": 2, "dominant_share": 1.0},
                            {"model_options": {"hidden": [16]}}),
    "fashion_g2_d95_h4": ("fashion_mnist", {"groups": 2, "dominant_share": 0.95},
                          {"model_options": {"hidden": [4]}}),
    "fashion_g2_d100_h4": ("fashion_mnist", {"groups": 2, "dominant_share": 1.0},
                           {"model_options": {"hidden": [4]}}),
    "fashion_g2_d95_half": ("fashion_mnist", {"groups": 2, "dominant_share": 0.95,
                                              "max_samples": 1500}, {}),
    "fashion_g2_d100_half": ("fashion_mnist", {"groups": 2, "dominant_share": 1.0,
                                               "max_samples": 1500}, {}),
    "fashion_d100_h4": ("fashion_mnist", {"dominant_share": 1.0},
                        {"model_options": {"hidden": [4]}}),
}


def design_from_name(name: str) -> tuple[str, dict, dict]:
    """A design's (data set, partition, training) options read off its name's tokens.

    ``fashion`` then ``_``-separated tokens over ``fashion_base``: ``base`` (none),
    ``gN`` N groups, ``dNN`` dominant share NN/100, ``hN`` N hidden units, ``xN`` N × the
    base's ``max_samples``, ``half`` ½ × it, ``sN`` N local steps a round. Every entry of
    :data:`DESIGNS` equals the reading of its name (tests/unit/test_fedamp_design.py).
    """
    head, *tokens = name.split("_")
    if head != "fashion":
        raise ValueError(f"design {name!r}: unknown data set {head!r}")
    popts: dict = {}
    topts: dict = {}
    for token in tokens:
        key, num = token[:1], token[1:]
        if token == "base":
            continue
        if token == "half":
            popts["max_samples"] = BASE_PARTITION["max_samples"] // 2
        elif key and key in "gdhxs" and num.isdigit():
            n = int(num)
            if key == "g":
                popts["groups"] = n
            elif key == "d":
                popts["dominant_share"] = n / 100
            elif key == "x":
                popts["max_samples"] = BASE_PARTITION["max_samples"] * n
            elif key == "h":
                topts["model_options"] = {"hidden": [n]}
            else:
                topts["local_steps"] = n
        else:
            raise ValueError(f"design {name!r}: unknown token {token!r}")
    return "fashion_mnist", popts, topts


ORACLE_ARMS = ("identity", "block", "uniform")
#: The oracle arm a patched FedAMP.attention returns (None: FedAMP's own ξ).
_ARM: dict[str, str | None] = {"arm": None}


def oracle_xi(arm: str, groups: np.ndarray) -> torch.Tensor:
    """ξ of an oracle arm: I, uniform over the own group (self included), or 1/K."""
    k = len(groups)
    if arm == "identity":
        return torch.eye(k, dtype=torch.float64)
    if arm == "uniform":
        return torch.full((k, k), 1.0 / k, dtype=torch.float64)
    if arm == "block":
        same = torch.tensor(groups[:, None] == groups[None, :], dtype=torch.float64)
        return same / same.sum(dim=1, keepdim=True)
    raise ValueError(f"unknown oracle arm {arm!r}")


@contextlib.contextmanager
def oracle(arm: str) -> Iterator[None]:
    """FedAMP.attention returns the oracle arm's fixed ξ inside the block."""
    original = FedAMP.attention

    def fixed(self: FedAMP, flat: torch.Tensor, squared: torch.Tensor,
              step: float | None = None) -> torch.Tensor:
        groups = np.asarray(self.engine.data.groups)
        return oracle_xi(arm, groups).to(flat.device)

    FedAMP.attention = fixed  # type: ignore[method-assign]
    try:
        yield
    finally:
        FedAMP.attention = original  # type: ignore[method-assign]


def run(work: Path, design: str, params: dict, split: int, seed: int, tag: str,
        arm: str | None = None) -> pd.DataFrame:
    """One FedAMP run on the design's validation partition (cached by ``tag``)."""
    from pflrepro.config import RunKey, canonical_json, check
    from pflrepro.config.schema import build_schema
    from pflrepro.data.datasets import prepare_dataset
    from pflrepro.data.jobs import make_partition
    from pflrepro.pipeline.single import SINGLE_EXPERIMENT, SingleRun, single_run_config
    from pflrepro.pipeline.train_job import train_job
    from pflrepro.tuning import DEFAULT_FRACTION, write_validation_partition

    out = work / "runs" / design / f"{tag}-split{split}-seed{seed}.parquet"
    if out.exists():
        return pd.read_parquet(out)
    dataset, popts, topts = DESIGNS[design]
    training = {**BASE_TRAINING, **topts}
    req = SingleRun(method="fedamp", dataset=dataset, scheme="practical",
                    partition_options={**BASE_PARTITION, **popts}, params=params,
                    training=training, split_seed=split, train_seed=seed)
    cfg = check(single_run_config(req), build_schema())
    part_spec = cfg.experiments[SINGLE_EXPERIMENT].partitions[0]
    key = RunKey(SINGLE_EXPERIMENT, part_spec.id, "fedamp", split, seed)
    data_dir = work / "data" / dataset
    if not (data_dir / "meta.json").exists():
        prepare_dataset(dataset, data_dir, work / "raw" / dataset, MIRRORS)
    part = work / "partitions" / f"{part_spec.id}-split{split}.parquet"
    val = work / "partitions" / f"{part_spec.id}-split{split}-validation.parquet"
    part.parent.mkdir(parents=True, exist_ok=True)
    if not part.exists():
        make_partition(data_dir, dataset, part_spec.spec(), split, part)
    if not val.exists():
        write_validation_partition(str(part), str(val), DEFAULT_FRACTION, split)
    out.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with oracle(arm) if arm else contextlib.nullcontext():
        train_job(canonical_json(cfg.run_spec(key)), data_dir, val, out, threads=1)
    print(f"  ran {design}/{out.name} in {time.perf_counter() - t0:.1f}s", flush=True)
    return pd.read_parquet(out)


def accuracy(df: pd.DataFrame) -> tuple[float, float]:
    """Best over rounds and final mean client validation accuracy, %."""
    acc = df[(df.metric == "test_accuracy") & (df.client >= 0)].groupby("round").value.mean()
    return 100 * float(acc.max()), 100 * float(acc.iloc[-1])


def xi_at(df: pd.DataFrame, rnd: int) -> tuple[np.ndarray, np.ndarray]:
    """(ξ at round ``rnd`` as a K × K matrix, the clients' groups)."""
    w = df[(df.metric == "weight") & (df["round"] == rnd)]
    k = int(w.client.max()) + 1
    xi = w.sort_values(["client", "peer"]).value.to_numpy().reshape(k, k)
    g = df[(df.metric == "group") & (df.client >= 0)].drop_duplicates("client")
    return xi, g.sort_values("client").value.to_numpy().astype(int)


def xi_stats(xi: np.ndarray, groups: np.ndarray) -> tuple[float, float, float]:
    """(mean within-group peer weight, mean across-group, peer mass on the own group)."""
    same = groups[:, None] == groups[None, :]
    off = ~np.eye(len(groups), dtype=bool)
    within, across = xi[same & off].mean(), xi[~same].mean()
    peer = (xi * off).sum(axis=1)
    own = (xi * (same & off)).sum(axis=1)
    mass = float(np.mean(np.where(peer > 0, own / np.where(peer > 0, peer, 1), np.nan)))
    return float(within), float(across), mass


def oracle_table(work: Path, designs: list[str]) -> list[dict]:
    rows = []
    for design in designs:
        res: dict = {"design": design}
        for arm in ORACLE_ARMS:
            acc = [accuracy(run(work, design, {"lam": 0.0}, s, t, f"oracle-{arm}", arm))
                   for s, t in PAIRS]
            res[arm] = float(np.mean([a[0] for a in acc]))
            res[f"{arm}_final"] = float(np.mean([a[1] for a in acc]))
            res[f"{arm}_pairs"] = [round(a[0], 2) for a in acc]
        res["margin"] = res["block"] - max(res["identity"], res["uniform"])
        rows.append(res)
        print(json.dumps(res), flush=True)
    return rows


def reading_params(reading: str) -> dict:
    """``sigma/ratio/step/prox`` -> FedAMP hyperparameters (α = ratio·σ, λ = prox·α)."""
    sigma, ratio, step, prox = reading.split("/")
    alpha = float(ratio) * float(sigma)
    return {"sigma": float(sigma), "alpha": alpha, "lam": float(prox) * alpha,
            "step": step}


def readings_table(work: Path, design: str, readings: list[str],
                   rounds_at: list[int]) -> list[dict]:
    rows = []
    for reading in readings:
        params = reading_params(reading)
        tag = "reading-" + reading.replace("/", "_")
        res: dict = {"design": design, "reading": reading}
        best, final, stats = [], [], {r: [] for r in rounds_at}
        for s, t in PAIRS:
            df = run(work, design, params, s, t, tag)
            b, f = accuracy(df)
            best.append(b)
            final.append(f)
            for r in rounds_at:
                stats[r].append(xi_stats(*xi_at(df, r)))
        res["best"], res["final"] = float(np.mean(best)), float(np.mean(final))
        for r in rounds_at:
            w, a, m = (float(np.mean(v)) for v in zip(*stats[r], strict=True))
            res[f"r{r}"] = {"within": w, "across": a,
                            "ratio": w / a if a > 0 else float("inf"), "own_mass": m}
        rows.append(res)
        print(json.dumps(res), flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--oracle", action="store_true")
    ap.add_argument("--designs", nargs="*", default=list(DESIGNS))
    ap.add_argument("--design", default="fashion_base", help="the --readings' design")
    ap.add_argument("--reading", action="append", default=[],
                    help="sigma/alpha_ratio/step/prox, e.g. 1e-6/1/capped/0")
    ap.add_argument("--rounds-at", type=int, nargs="*", default=[2, 5, 11, 20, 40])
    args = ap.parse_args()
    torch.set_num_threads(1)
    if args.oracle:
        oracle_table(args.work, args.designs)
    if args.reading:
        readings_table(args.work, args.design, args.reading, args.rounds_at)


if __name__ == "__main__":
    main()
