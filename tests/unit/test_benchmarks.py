"""The benchmarks: the reference loops compute what the engine computes; run_all runs.

``benchmarks/reference.py`` re-implements every method as a plain per-client PyTorch
loop; the per-method speed ratios of ``bench_methods.py`` are honest only if each
reference trains the same thing as the engine, so the first test runs both for three
rounds on a tiny setting and compares every client's predictions and reported losses
(to float tolerance), with a negative control showing the comparison can fail.

``benchmarks/run_all.py --quick`` (tier ``bench``): every benchmark runs, its
correctness checks pass and every section is printed. Speed targets are printed by
the benchmarks, never asserted.

``bench_paper_shapes.py``: every paper shape agrees between the vmapped path and the
loop (tier ``paper_smoke``), and every method at one paper shape (tier ``bench``).
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
if str(REPO / "benchmarks") not in sys.path:
    sys.path.insert(0, str(REPO / "benchmarks"))

import bench_methods as BM  # noqa: E402
from reference import REFERENCES  # noqa: E402

from pflrepro.algorithms import ALGORITHMS  # noqa: E402

#: Tolerance on probabilities and losses: float rounding only. A changed hyperparameter
#: moves them by 3e-4 (FedProx's μ 0.01 -> 0) to 0.5 (test_reference_control).
TOL = 1e-5
#: Hyperparameters for the tiny setting: the benchmark's, and Clustered FL splitting
#: from round 1 (the split path runs; with its defaults nothing splits in 3 rounds).
TINY_PARAMS = {**BM.PARAMS, "clustered_fl": {"warmup_rounds": 0, "eps1": 100.0, "eps2": 0.0}}


def _tiny(name: str) -> dict:
    """4 clients x 20 samples, batch 8 (3 steps), a 16-unit MLP, 16 public rows."""
    return BM.build(name, 4, 20, 16, "mlp", 1, batch=8, model_options={"hidden": (16,)},
                    params=TINY_PARAMS.get(name, {}))


def _gap(built: dict, ref, rounds: int = 3) -> tuple[float, float]:
    """Largest |engine - reference| over rounds and clients: (probabilities, losses)."""
    e, alg, state = built["engine"], built["alg"], built["state"]
    probs = losses = 0.0
    for rnd in range(1, rounds + 1):
        state, engine_losses = alg.round(state, rnd)
        losses = max(losses, float(np.abs(engine_losses - ref.round(rnd)).max()))
        for k in range(e.num_clients):
            x = e.data.x[e.data.test[k]]
            probs = max(probs, float((alg.predict(state, k, x, rnd)
                                      - ref.predict(k, x, rnd)).abs().max()))
    return probs, losses


def test_every_method_has_a_reference() -> None:
    assert sorted(REFERENCES) == sorted(ALGORITHMS)


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_reference_matches_engine(name: str) -> None:
    torch.manual_seed(0)  # nothing may depend on it: every draw is seeded
    built = _tiny(name)
    probs, losses = _gap(built, BM.reference_for(built))
    assert probs <= TOL, f"{name}: predictions differ by {probs:.3g}"
    assert losses <= TOL, f"{name}: reported losses differ by {losses:.3g}"


@pytest.mark.parametrize(("name", "change"), [("fedprox", {"mu": 0.0}),
                                              ("fedfomo", {"distance": "l2"}),
                                              ("federico", {"beta": 0.1})])
def test_reference_control(name: str, change: dict) -> None:
    """A reference run with another hyperparameter is caught (the check can fail)."""
    built = _tiny(name)
    ref = REFERENCES[name](built["engine"], dataclasses.replace(built["alg"].hp, **change))
    ref.init()
    probs, _ = _gap(built, ref)
    assert probs > 10 * TOL
SECTIONS = ("== cell:", "== grid:", "== pairwise:", "== methods:", "== scale:", "== pipeline:",
            "== gpu:", "== gpu methods:", "== paper shapes:", "== H200 estimate:",
            "== targets", "== correctness checks:")


@pytest.mark.workflow
@pytest.mark.bench
def test_run_all_quick() -> None:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks/run_all.py"), "--quick"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-5000:]
    assert out.startswith("machine: "), out[:500]
    for section in SECTIONS:
        assert section in out, f"missing {section!r}:\n{out[-5000:]}"
    assert "FAILED" not in out, out[-5000:]
    assert "correctness checks: 0 of" not in out


def test_gpu_methods_section_dry_path_counts_vmapped_calls() -> None:
    """bench_gpu's per-method section on the CPU: FedAvg and FedeRiCo vmap once a round."""
    import bench_gpu
    from _common import Report

    rep = Report("gpu")
    bench_gpu.methods_section(rep, torch.device("cpu"), clients=2, n_train=8, repeats=1,
                              model="project", names=["fedavg", "federico"])
    assert all(ok for _, ok in rep.checks), rep.checks
    assert rep.values["vmapped_calls"] == {"fedavg": 2, "federico": 2}  # 1 + 1 rounds
    assert any("own per-client loop (about 1x): none" in line for line in rep.lines)


@pytest.mark.paper_smoke
def test_every_paper_shape_vmap_equals_loop() -> None:
    """Every paper shape (CNN, VGG11, the mixed CNN/VGG11/VGG13 group, the MLP, FedMix's
    experts): one round, vmap = loop, float64.

    The benchmark's ``shapes`` subset (each shape's first method) with 3 clients and
    batch 8: cuts of the paper's clients and batch sizes that keep the tier's time.
    """
    import bench_paper_shapes as PS

    rep = PS.run(subset="shapes", max_clients=3, batch=8, threads=2)
    failed = [what for what, ok in rep.checks if not ok]
    assert rep.checks and not failed, failed
    assert set(rep.values["h200_fit"]) == {e.name for e in PS.paper_experiments(
        PS.paper_config())}


@pytest.mark.bench
def test_every_method_at_a_paper_shape_vmap_equals_loop() -> None:
    """Every method at one paper shape and every paper shape: one round, vmap = loop.

    The benchmark's ``cover`` subset with 4 clients and batch 16, float64 (tens of
    minutes on two cores: the opt-in ``bench`` tier).
    """
    import bench_paper_shapes as PS

    rep = PS.run(subset="cover", max_clients=4, batch=16, threads=2)
    failed = [what for what, ok in rep.checks if not ok]
    assert rep.checks and not failed, failed
