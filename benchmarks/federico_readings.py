"""FedeRiCo's readings of its text, measured at CPU scale against the paper's statements.

The text leaves five choices open (``estep_loss``, ``mstep``, ``table_start``,
``warmup_rounds``, ``ema_start``; see ``src/pflrepro/algorithms/federico.py``). This
script runs readings (a full factorial of the first three without warm-up by default,
or ``--readings`` as ``estep/mstep/start`` with optional ``/wN``, N warm-up rounds, and
``/zero``, ``ema_start: zero``) on the partitions of ``config.yaml``'s federico_*_cpu
experiments (Table 1 Fashion-MNIST and digits with their 3 seed pairs, Fig. 5, and the
Fig. 6 design: Fashion-MNIST, 1200 images, 4 groups, split 0, train seeds 0-2;
``--fig6-digits``: the former digits design) through
``pflrepro.pipeline.single.single_run``, the ``pflrepro run`` path, and reports per reading:

* mean client test accuracy, final and best over rounds (Table 1 runs, averaged);
* peer mass on the own group: for a client with group-mates, Σ_{j≠i, g_j=g_i} w_ij /
  Σ_{j≠i} w_ij at the last round (mean over such clients and runs), and the weight
  Σ_{j≠i, g_j=g_i} w_ij it puts on them (its mixture with group-mates);
* a lone client's (no group-mate) own weight w_ii at the last round;
* the mean entropy (nats; ln 8 = 2.08 is uniform over 8) of the weight rows at rounds
  0, 1, 5 and the last;
* the share of weights w_ij < 0.01 five rounds after the first table;
* with ``--over-rounds``, the entropy, same-group share, lone w_ii and share of
  w_ij < 0.01 at rounds 0, 1, 2, 3, 5, 10, 20 and 30;
* the statements: (S1, Sec. 3.3) no weights of a client with group-mates one-hot
  (max ≥ 0.99; a lone client's are, by Fig. 3) one round after the table starts
  (round 1 without warm-up, W + 1 after W warm-up rounds); (S2, Fig. 3) group-mates
  share their weights (peer mass on the own group ≥ 0.5 and own-group peer weight ≥
  0.1) and lone clients keep w_ii ≥ 0.9; (S3, Fig. 5b) EMA
  weights more distributed than accumulative ones with ε = 1 (final entropy higher by
  more than 0.05 nats);
  (S4, Fig. 7) β = 0.1 changes the weights less per round than β = 0.9 (mean total
  variation of a row between rounds from the first table on, client 0 and all clients,
  Fig. 6 design); (S5, Fig. 6b) M = 0
  within 1 point of Local; (S6, Fig. 3) a lone client uses only itself (mean w_ii ≥
  0.9), the lone half of S2; (S7, footnote 4) "most of the client weights are 0 after
  a few rounds" (more than half of the w_ij below 0.01 five rounds after the table).
  On the Fig. 6 design (means over its 3 runs; test-size-weighted accuracy, the
  claims' metric; "early" is round 6, 20 % of the rounds): (S8, Fig. 7) "a bigger β
  can lead to more drastic changes in early training": the weights' mean total
  variation per round over the 5 rounds after the table starts is larger with β = 0.9
  than with 0.1; (S9, Fig. 6c) β = 0.1 below β = 0.6 early; (S10, Fig. 7) similar final
  weights: mean |w(β 0.1) − w(β 0.9)| ≤ 0.05 at the end; (S11, Fig. 6a) ε = 1 below
  ε = 0.3 early; (S12, Fig. 6a) ε = 0 puts a smaller same-group share of its peer
  weight than ε = 0.3 at the end, by more than 0.01; (S13, Fig. 6b) M = 1 above M = 0
  at the end; (S14) M = 1 below M = 3 at the end; (S15) M = 7 below M = 1 early.
  S9-S15 restate the Fig. 6/7 claims of config/claims.yaml on means; the per-seed
  differences, and whether the accuracy statements hold in all 3 seeds, are printed
  below each reading. The thresholds are ours; the numbers are printed beside each
  yes/no.

Runs are cached under ``--work`` (parquet per run), so a rerun only reports. M = 0
never uses another model, so its runs depend on ``mstep`` alone and are shared by the
readings with the same M-step. ``--threads 1`` per run; one run at a time.

    python benchmarks/federico_readings.py --work /tmp/h1 \\
        --readings mean/epoch/all_to_all sum/step/all_to_all
"""

from __future__ import annotations

import argparse
import itertools
import logging
import time
from pathlib import Path

import numpy as np
import pandas as pd

from pflrepro.pipeline.single import SingleRun, single_run

TRAINING = {"rounds": 30, "batch_size": 32, "eval_every": 1, "model": "mlp",
            "model_options": {"hidden": [128]}, "device": "cpu"}
FASHION = {"dataset": "fashion_mnist", "max_samples": 2400}
DIGITS = {"dataset": "digits"}
#: (name, data, groups, [(split seed, train seed)]): config.yaml's federico_*_cpu grids
FASHION_PAIRS, DIGIT_PAIRS = [(0, 0), (1, 0), (2, 0)], [(0, 0), (1, 1), (2, 2)]
TABLE1 = [("fashion2", FASHION, 2, FASHION_PAIRS), ("fashion4", FASHION, 4, FASHION_PAIRS),
          ("digits2", DIGITS, 2, DIGIT_PAIRS), ("digits4", DIGITS, 4, DIGIT_PAIRS)]
#: config.yaml's federico_fig6{a,b,c}_cpu design: Fashion-MNIST, 4 groups, 1200 images
#: (Local about 91 %, FedAvg about 63 %: below the ceiling), split 0, train seeds 0-2
FIG6_DATA, FIG6_PAIRS = {"dataset": "fashion_mnist", "max_samples": 1200}, [(0, 0), (0, 1),
                                                                           (0, 2)]
#: the round at 20 % of the 30 rounds (the claims' round_fraction 0.2) and the early
#: window (rounds after the table starts) of the Fig. 7 statement
EARLY_ROUND, EARLY_WINDOW = 6, 5
#: cache tag of the Fig. 6 design's runs (``--fig6-digits``: the former digits design)
FIG6_NAME = "fig6"
MIRRORS = ("/usr/share/datasets/fashion-mnist",)


def reading_params(reading: str) -> dict:
    """``estep/mstep/start[/wN][/zero]`` -> hyperparameters (``wN``: N warm-up rounds,
    else 0; ``zero``/``first``: ``ema_start``, else ``first``)."""
    estep, mstep, start, *rest = reading.split("/")
    warmup = next((int(r.removeprefix("w")) for r in rest if r.startswith("w")), 0)
    ema_start = "zero" if "zero" in rest else "first"
    return {"estep_loss": estep, "mstep": mstep, "table_start": start,
            "warmup_rounds": warmup, "ema_start": ema_start}


def run(work: Path, method: str, params: dict, data: dict, groups: int, split: int,
        seed: int, tag: str) -> pd.DataFrame:
    """One run through ``single_run`` (cached by ``tag``); its run table."""
    out = work / "runs" / f"{tag}-split{split}-seed{seed}.parquet"
    if not out.exists():
        opts = {"clients": 8, "groups": groups}
        if "max_samples" in data:
            opts["max_samples"] = data["max_samples"]
        t0 = time.perf_counter()
        single_run(SingleRun(method=method, dataset=data["dataset"], scheme="label_groups",
                             partition_options=opts, params=params, training=TRAINING,
                             split_seed=split, train_seed=seed),
                   out=out, work=work / "cli", data_root=work / "data",
                   raw_root=work / "raw", mirrors=MIRRORS, threads=1)
        print(f"  ran {out.name} in {time.perf_counter() - t0:.1f}s", flush=True)
    return pd.read_parquet(out)


def accuracy(df: pd.DataFrame) -> tuple[float, float]:
    """Final and best (over rounds) mean client test accuracy, %."""
    acc = df[df.metric == "test_accuracy"].groupby("round").value.mean()
    return 100 * float(acc.iloc[-1]), 100 * float(acc.max())


def weighted_acc(df: pd.DataFrame) -> pd.Series:
    """Per round: client test accuracy weighted by test-set size, % (the claims' metric)."""
    n = df[(df.metric == "n_test") & (df["round"] == 0)].set_index("client").value
    acc = df[df.metric == "test_accuracy"]
    w = acc.client.map(n).astype(float)
    return 100 * (acc.value * w).groupby(acc["round"]).sum() / w.groupby(acc["round"]).sum()


def weights(df: pd.DataFrame) -> dict[int, np.ndarray]:
    """round -> K x K weight matrix."""
    w = df[df.metric == "weight"]
    k = int(w.client.max()) + 1
    return {int(r): g.sort_values(["client", "peer"]).value.to_numpy().reshape(k, k)
            for r, g in w.groupby("round")}


def groups_of(df: pd.DataFrame) -> np.ndarray:
    g = df[(df.metric == "group") & (df["round"] == 0)].sort_values("client")
    return g.value.to_numpy().astype(int)


def entropy(w: np.ndarray) -> float:
    return float(np.mean(-(w * np.log(np.where(w > 0, w, 1.0))).sum(axis=1)))


def group_stats(w: np.ndarray, g: np.ndarray) -> tuple[list[float], list[float], list[float]]:
    """Per client with group-mates: share of peer mass on them, weight on them; lone: w_ii."""
    share, mates, lone = [], [], []
    for i in range(len(g)):
        same = [j for j in range(len(g)) if j != i and g[j] == g[i]]
        if not same:
            lone.append(float(w[i, i]))
            continue
        peer = float(w[i].sum() - w[i, i])
        mates.append(float(w[i, same].sum()))
        if peer > 0:
            share.append(mates[-1] / peer)
    return share, mates, lone


def tv_per_round(ws: dict[int, np.ndarray], client: int | None = None, start: int = 0
                 ) -> float:
    """Mean over rounds from ``start`` (the first table) of the total variation
    ½ Σ_j |w_ij^t − w_ij^(t-1)| (row mean)."""
    rounds = [r for r in sorted(ws) if r >= start]
    tvs = []
    for a, b in itertools.pairwise(rounds):
        d = 0.5 * np.abs(ws[b] - ws[a]).sum(axis=1)
        tvs.append(float(d[client]) if client is not None else float(d.mean()))
    return float(np.mean(tvs))


def measure(work: Path, reading: str) -> dict:
    p = reading_params(reading)
    tag = reading.replace("/", "_")
    res: dict = {"reading": reading}
    finals, bests, shares, mates, lone, onehot1, zeros = [], [], [], [], [], [], []
    first = p["warmup_rounds"]  # the round whose end holds the first table
    ent = {r: [] for r in ("0", "1", "5", "last")}
    by_exp: dict[str, tuple[float, float]] = {}
    for name, data, groups, pairs in TABLE1:
        f_e, b_e = [], []
        for split, seed in pairs:
            df = run(work, "federico", p, data, groups, split, seed, f"{tag}-{name}")
            f, b = accuracy(df)
            f_e.append(f)
            b_e.append(b)
            ws, g = weights(df), groups_of(df)
            last = max(ws)
            s, m, lo = group_stats(ws[last], g)
            shares += s
            mates += m
            lone += lo
            # rows of clients with group-mates: a lone client's row is one-hot by Fig. 3
            mated = [i for i in range(len(g)) if (g == g[i]).sum() > 1]
            onehot1 += list(ws[first + 1][mated].max(axis=1) >= 0.99)
            zeros.append(float(np.mean(ws[first + 5] < 0.01)))
            for r, key in ((0, "0"), (1, "1"), (5, "5"), (last, "last")):
                ent[key].append(entropy(ws[r]))
        by_exp[name] = (float(np.mean(f_e)), float(np.mean(b_e)))
        finals += f_e
        bests += b_e
    res.update(final=np.mean(finals), best=np.mean(bests), by_exp=by_exp,
               share=np.mean(shares) if shares else float("nan"),
               mates=np.mean(mates), lone=np.mean(lone) if lone else float("nan"),
               n_lone=len(lone), onehot1=float(np.mean(onehot1)),
               zeros=float(np.mean(zeros)),
               **{f"H{k}": float(np.mean(v)) for k, v in ent.items()})
    # Fig. 5: accumulative with uniform sampling vs the EMA run (fashion4, split 0)
    ema = run(work, "federico", p, FASHION, 4, 0, 0, f"{tag}-fashion4")
    acc_df = run(work, "federico", {**p, "loss_tracking": "accumulative", "epsilon": 1.0},
                 FASHION, 4, 0, 0, f"{tag}-fig5acc")
    res["H_ema"], res["H_acc"] = (entropy(weights(d)[max(weights(d))]) for d in (ema, acc_df))
    res.update(fig6(work, p, tag))
    tv = res["tv"]
    # Fig. 6b: M = 0 vs Local (fashion4, split 0, train seeds 0 and 1)
    m0 = [accuracy(run(work, "federico", {"mstep": p["mstep"], "neighbors": 0}, FASHION, 4,
                       0, s, f"m0_{p['mstep']}"))[0] for s in (0, 1)]
    loc = [accuracy(run(work, "local", {}, FASHION, 4, 0, s, "local"))[0] for s in (0, 1)]
    res["m0"], res["local6b"] = float(np.mean(m0)), float(np.mean(loc))
    res["S1"] = res["onehot1"] == 0.0
    res["S2"] = bool(res["share"] >= 0.5 and res["mates"] >= 0.1
                     and (not lone or res["lone"] >= 0.9))
    res["S6"] = bool(lone) and res["lone"] >= 0.9
    res["S7"] = res["zeros"] > 0.5
    res["S3"] = res["H_ema"] > res["H_acc"] + 0.05
    res["S4"] = tv[0.1][0] < tv[0.9][0] and tv[0.1][1] < tv[0.9][1]
    res["S5"] = abs(res["m0"] - res["local6b"]) <= 1.0
    acc6 = res["acc6"]
    res["S8"] = res["tv_early"][0.9] > res["tv_early"][0.1]
    res["S9"] = acc6["beta0.1"][0] < acc6["default"][0]
    res["S10"] = res["wdist"] <= 0.05
    res["S11"] = acc6["eps1"][0] < acc6["default"][0]
    res["S12"] = res["same_eps"][0.0] < res["same_eps"][0.3] - 0.01
    res["S13"] = acc6["m1"][1] > acc6["m0"][1]
    res["S14"] = acc6["m1"][1] < acc6["default"][1]
    res["S15"] = acc6["m7"][0] < acc6["m1"][0]
    return res


#: Fig. 6's variants: name -> hyperparameters over the reading's (``default`` is the
#: reading itself: β 0.6, ε 0.3, M 3)
FIG6_VARIANTS = {"default": {}, "beta0.1": {"beta": 0.1}, "beta0.9": {"beta": 0.9},
                 "eps0": {"epsilon": 0.0}, "eps1": {"epsilon": 1.0},
                 "m0": {"neighbors": 0}, "m1": {"neighbors": 1}, "m7": {"neighbors": 7}}


def fig6(work: Path, p: dict, tag: str) -> dict:
    """Fig. 6/7 statistics on the Fig. 6 design (3 train seeds, means over them).

    ``acc6``: variant -> (weighted accuracy at :data:`EARLY_ROUND`, final); ``tv``: β ->
    (client 0's, all clients') mean total variation per round from the first table;
    ``tv_early``: β -> the same over the :data:`EARLY_WINDOW` rounds after the table
    starts (all clients); ``wdist``: mean |w(β 0.1) − w(β 0.9)| at the end; ``same_eps``:
    ε -> same-group share of peer weight at the end.
    """
    first = p["warmup_rounds"]
    acc6, dfs = {}, {}
    for name, extra in FIG6_VARIANTS.items():
        params = ({"mstep": p["mstep"], "neighbors": 0} if name == "m0"
                  else {**p, **extra})
        vtag = (f"m0_{p['mstep']}-{FIG6_NAME}" if name == "m0"
                else f"{tag}-{FIG6_NAME}{name}")
        runs = [run(work, "federico", params, FIG6_DATA, 4, sp, sd, vtag)
                for sp, sd in FIG6_PAIRS]
        dfs[name] = runs
        accs = [weighted_acc(d) for d in runs]
        acc6[name] = (float(np.mean([a.loc[EARLY_ROUND] for a in accs])),
                      float(np.mean([a.iloc[-1] for a in accs])),
                      [float(a.loc[EARLY_ROUND]) for a in accs],
                      [float(a.iloc[-1]) for a in accs])
    tv, tv_early = {}, {}
    for beta, name in ((0.1, "beta0.1"), (0.9, "beta0.9")):
        ws = [weights(d) for d in dfs[name]]
        tv[beta] = (float(np.mean([tv_per_round(w, 0, first) for w in ws])),
                    float(np.mean([tv_per_round(w, start=first) for w in ws])))
        tv_early[beta] = float(np.mean([tv_per_round(
            {r: m for r, m in w.items() if r <= first + EARLY_WINDOW}, start=first)
            for w in ws]))
    w1, w9 = ([weights(d) for d in dfs[n]] for n in ("beta0.1", "beta0.9"))
    wdist = float(np.mean([np.abs(a[max(a)] - b[max(b)]).mean()
                           for a, b in zip(w1, w9, strict=True)]))
    same = {}
    for eps, name in ((0.0, "eps0"), (0.3, "default")):
        shares = []
        for d in dfs[name]:
            ws = weights(d)
            shares += group_stats(ws[max(ws)], groups_of(d))[0]
        same[eps] = float(np.mean(shares))
    return {"acc6": acc6, "tv": tv, "tv_early": tv_early, "wdist": wdist,
            "same_eps": same}


OVER_ROUNDS = (0, 1, 2, 3, 5, 10, 20, 30)


def over_rounds(work: Path, reading: str) -> list[str]:
    """Entropy, same-group share of peer weight, lone clients' w_ii and the share of
    w_ij < 0.01 at :data:`OVER_ROUNDS`, means over the reading's Table 1 runs (cached)."""
    p = reading_params(reading)
    tag = reading.replace("/", "_")
    rows: dict[str, dict[int, list[float]]] = {
        k: {r: [] for r in OVER_ROUNDS} for k in ("entropy", "same-group", "lone w_ii",
                                                  "w<0.01")}
    for name, data, groups, pairs in TABLE1:
        for split, seed in pairs:
            df = run(work, "federico", p, data, groups, split, seed, f"{tag}-{name}")
            ws, g = weights(df), groups_of(df)
            for r in OVER_ROUNDS:
                share, _, lone = group_stats(ws[r], g)
                rows["entropy"][r].append(entropy(ws[r]))
                rows["same-group"][r] += share
                rows["lone w_ii"][r] += lone
                rows["w<0.01"][r].append(float(np.mean(ws[r] < 0.01)))
    out = [f"{reading}: round " + " ".join(f"{r:>5d}" for r in OVER_ROUNDS)]
    for key, by in rows.items():
        out.append(f"  {key:12s} " + " ".join(
            f"{np.mean(v):5.2f}" if v else "    -" for v in by.values()))
    return out


def baselines(work: Path) -> dict[str, dict[str, tuple[float, float]]]:
    out: dict[str, dict[str, tuple[float, float]]] = {}
    for method in ("local", "fedavg"):
        out[method] = {}
        for name, data, groups, pairs in TABLE1:
            acc = [accuracy(run(work, method, {}, data, groups, s, t, f"{method}-{name}"))
                   for s, t in pairs]
            out[method][name] = (float(np.mean([a[0] for a in acc])),
                                 float(np.mean([a[1] for a in acc])))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, default=Path("/tmp/federico_readings"))
    ap.add_argument("--readings", nargs="*", help="estep/mstep/start (default: all 12)")
    ap.add_argument("--over-rounds", action="store_true",
                    help="also print the weights' statistics over rounds per reading")
    ap.add_argument("--fig6-digits", action="store_true",
                    help="Fig. 6 statistics on the former design (digits, 4 groups, "
                         "split 0) instead of Fashion-MNIST with 1200 images")
    args = ap.parse_args()
    if args.fig6_digits:
        global FIG6_DATA, FIG6_NAME
        FIG6_DATA, FIG6_NAME = DIGITS, "fig6digits"
    logging.basicConfig(level=logging.WARNING)
    readings = args.readings or ["/".join(r) for r in itertools.product(
        ("sum", "mean"), ("full", "step", "epoch"), ("all_to_all", "uniform"))]
    base = baselines(args.work)
    names = [t[0] for t in TABLE1]
    print("\nbaselines (final/best mean client acc %):")
    for method, by in base.items():
        print(f"  {method:7s} " + "  ".join(f"{n} {by[n][0]:.1f}/{by[n][1]:.1f}" for n in names))
    fig6_local = [weighted_acc(run(args.work, m, {}, FIG6_DATA, 4, sp, sd,
                                   f"{m}-{FIG6_NAME}"))
                  for m in ("local", "fedavg") for sp, sd in FIG6_PAIRS]
    print(f"  Fig. 6 design (weighted final %): Local "
          f"{np.mean([a.iloc[-1] for a in fig6_local[:3]]):.1f}, FedAvg "
          f"{np.mean([a.iloc[-1] for a in fig6_local[3:]]):.1f}")
    print("\nreading                  | acc final/best | " + " | ".join(names)
          + " | peer-same | mates | lone w_ii | H r0/r1/r5/last | onehot r1 | "
          "zero r+5 | H ema/acc | TV c0 b.1/b.9 | M0/Local | S1-S15")
    for reading in readings:
        r = measure(args.work, reading)
        per = " | ".join(f"{r['by_exp'][n][0]:.1f}" for n in names)
        print(f"{reading:24s} | {r['final']:.1f}/{r['best']:.1f} | {per} | "
              f"{r['share']:.2f} | {r['mates']:.2f} | {r['lone']:.2f} (n={r['n_lone']}) | "
              f"{r['H0']:.2f}/{r['H1']:.2f}/{r['H5']:.2f}/{r['Hlast']:.2f} | "
              f"{r['onehot1']:.2f} | {r['zeros']:.2f} | {r['H_ema']:.2f}/{r['H_acc']:.2f} | "
              f"{r['tv'][0.1][0]:.3f}/{r['tv'][0.9][0]:.3f} | {r['m0']:.1f}/{r['local6b']:.1f}"
              f" | " + "".join("y" if r[f"S{i}"] else "n" for i in range(1, 16)), flush=True)
        a6 = r["acc6"]
        print("    Fig. 6 design, weighted acc r6/final: " + ", ".join(
            f"{k} {v[0]:.1f}/{v[1]:.1f}" for k, v in a6.items())
            + f"; TV early b.1/b.9 {r['tv_early'][0.1]:.3f}/{r['tv_early'][0.9]:.3f}"
            f"; TV all b.1/b.9 {r['tv'][0.1][1]:.3f}/{r['tv'][0.9][1]:.3f}"
            f"; final |w b.1 - b.9| {r['wdist']:.3f}; same-share eps 0/0.3 "
            f"{r['same_eps'][0.0]:.3f}/{r['same_eps'][0.3]:.3f}", flush=True)
        # the accuracy statements' per-seed differences (a - b, seeds 0, 1, 2)
        diffs = {"S9 b.1-b.6 r6": ("beta0.1", "default", 2),
                 "S11 eps1-eps.3 r6": ("eps1", "default", 2),
                 "S13 M1-M0 final": ("m1", "m0", 3), "S14 M1-M3 final": ("m1", "default", 3),
                 "S15 M7-M1 r6": ("m7", "m1", 2)}
        print("    per-seed differences: " + "; ".join(
            f"{k} " + "/".join(f"{x - y:+.1f}" for x, y in zip(a6[a][i], a6[b][i],
                                                               strict=True))
            for k, (a, b, i) in diffs.items()), flush=True)
        # the same statements held in every seed (strictly), not only on the means
        sign = {"S9": -1, "S11": -1, "S13": 1, "S14": -1, "S15": -1}
        print("    in all 3 seeds: " + " ".join(
            f"{k.split()[0]} " + ("y" if all(sign[k.split()[0]] * (x - y) > 0 for x, y in
                                           zip(a6[a][i], a6[b][i], strict=True)) else "n")
            for k, (a, b, i) in diffs.items()), flush=True)
    if args.over_rounds:
        for reading in readings:
            print("\n".join(over_rounds(args.work, reading)))


if __name__ == "__main__":
    main()
