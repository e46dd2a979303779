"""Helpers shared by the benchmarks: machine facts, timing statistics, synthetic data.

Nothing here is timed against a target; the benchmarks print ratios measured in one
run, and ``run_all.py`` compares them with the issue's targets without failing on them.
"""

from __future__ import annotations

import contextlib
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
BENCH_DIR = Path(__file__).resolve().parent
PYTHON = sys.executable

# --------------------------------------------------------------------------- report


@dataclass
class Report:
    """What one benchmark hands back to ``run_all.py``."""

    name: str
    lines: list[str] = field(default_factory=list)  # its printed table(s)
    # (target description, measured value as text, met?) -- never fails the run
    targets: list[tuple[str, str, bool]] = field(default_factory=list)
    # (correctness check description, passed?) -- a failure makes run_all exit 1
    checks: list[tuple[str, bool]] = field(default_factory=list)
    values: dict[str, Any] = field(default_factory=dict)

    def say(self, line: str = "") -> None:
        """Print ``line`` now and keep it for the report."""
        print(line, flush=True)
        self.lines.append(line)

    def check(self, what: str, ok: bool) -> None:
        """Record (and print) a correctness check."""
        self.checks.append((what, bool(ok)))
        self.say(f"  check: {what}: {'ok' if ok else 'FAILED'}")

    def target(self, what: str, measured: str, met: bool) -> None:
        """Record a speed or size target (reported, never asserted)."""
        self.targets.append((what, measured, bool(met)))


def table(rows: Sequence[Sequence[Any]], header: Sequence[str]) -> list[str]:
    """A plain-text table (right-aligned numbers), as lines."""
    cells = [[str(h) for h in header]] + [[_fmt(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    out = []
    for n, r in enumerate(cells):
        out.append("  " + "  ".join(c.ljust(w) if n == 0 or i == 0 else c.rjust(w)
                                    for i, (c, w) in enumerate(zip(r, widths, strict=True))))
        if n == 0:
            out.append("  " + "  ".join("-" * w for w in widths))
    return out


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        if value == 0:
            return "0"
        if abs(value) >= 100:
            return f"{value:.0f}"
        if abs(value) >= 10:
            return f"{value:.1f}"
        if abs(value) >= 0.1:
            return f"{value:.2f}"
        return f"{value:.3g}"
    return str(value)


def median(xs: Sequence[float]) -> float:
    """Median of ``xs``."""
    return float(statistics.median(xs))


def best(xs: Sequence[float], higher: bool = False) -> float:
    """Best of ``xs``: the minimum (times) or the maximum (rates) when ``higher``."""
    return float(max(xs) if higher else min(xs))


class Timer:
    """Accumulates wall time over ``with timer:`` blocks."""

    def __init__(self) -> None:
        self.total = 0.0
        self._start = 0.0

    def __enter__(self) -> Timer:
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.total += time.perf_counter() - self._start


# --------------------------------------------------------------------------- machine


def cpu_model() -> str:
    """CPU model name from /proc/cpuinfo (platform's guess elsewhere)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def blas_name() -> str:
    """NumPy's BLAS library and version."""
    try:
        info = np.show_config(mode="dicts")  # numpy >= 2
        blas = info["Build Dependencies"]["blas"]
        return f"{blas.get('name', '?')} {blas.get('version', '')}".strip()
    except Exception:  # noqa: BLE001 - older numpy: no dict form
        return "unknown"


def load_average() -> str:
    """1/5/15-minute load averages (other jobs on the machine skew every timing)."""
    try:
        return " ".join(f"{v:.1f}" for v in os.getloadavg())
    except OSError:
        return "n/a"


def machine_line() -> str:
    """One line: CPU, cores, torch version and threads, NumPy's BLAS, load."""
    import torch

    cores = os.cpu_count()
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else cores
    return (f"machine: {cpu_model()}, {cores} cores ({usable} usable), torch "
            f"{torch.__version__} with {torch.get_num_threads()} threads "
            f"(interop {torch.get_num_interop_threads()}), numpy {np.__version__} "
            f"BLAS {blas_name()}, python {platform.python_version()}, "
            f"load average {load_average()}")


@contextlib.contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """Run the block with ``n`` torch threads (in this thread), then restore the count.

    The engine side of a comparison runs like a CPU training job (``pflrepro train
    --threads T``): T client threads of one torch thread each, so the main thread is
    set to 1; a library-style reference gets torch's T threads for its one loop.
    """
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def proc_status(field: str) -> int:
    """A /proc/self/status field in bytes (VmRSS, VmHWM)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(field)


def reset_peak() -> bool:
    """Reset VmHWM to the current resident set (``/proc/self/clear_refs``); whether it could."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def mm_rate(n: int = 2048, repeats: int = 5) -> list[float]:
    """GFLOP/s of ``torch.mm`` on two float32 n x n matrices, one value per repeat."""
    import torch

    a = torch.randn(n, n)
    b = torch.randn(n, n)
    torch.mm(a, b)  # warm-up
    rates = []
    for _ in range(repeats):
        t = time.perf_counter()
        torch.mm(a, b)
        rates.append(2 * n**3 / (time.perf_counter() - t) / 1e9)
    return rates


# --------------------------------------------------------------------------- model


def register_issue_cnn() -> str:
    """Register the issue's 2-conv CIFAR CNN (878,538 parameters) as ``cnn_issue``.

    pflrepro's ``cnn`` pads its convolutions ("same" size), which on 32x32 inputs gives
    2,156,490 parameters and ~106 MFLOP per training sample; the issue's facts are for
    the unpadded network (McMahan et al.; FedEM's CIFAR CNN): 5x5 convolutions without
    padding, 32 and 64 channels, 512 hidden units, 878,538 parameters, ~47 MFLOP per
    training sample. Registered at run time in the model registry (src/ is not
    modified), so the engine builds it like any other model.
    """
    from torch import nn

    from pflrepro.models import MODELS

    class IssueCNN(nn.Module):
        def __init__(self, in_shape: tuple[int, int, int], num_classes: int) -> None:
            super().__init__()
            c, h, w = in_shape
            self.features = nn.Sequential(
                nn.Conv2d(c, 32, 5), nn.ReLU(), nn.MaxPool2d(2),
                nn.Conv2d(32, 64, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten())
            hh, ww = ((h - 4) // 2 - 4) // 2, ((w - 4) // 2 - 4) // 2
            self.head = nn.Sequential(nn.Linear(64 * hh * ww, 512), nn.ReLU(),
                                      nn.Linear(512, num_classes))

        def forward(self, x):  # noqa: ANN001, ANN201
            return self.head(self.features(x))

    MODELS.setdefault("cnn_issue", IssueCNN)
    return "cnn_issue"


def model_name(choice: str) -> str:
    """``issue`` -> the registered 878,538-parameter CNN; ``project`` -> pflrepro's cnn."""
    return register_issue_cnn() if choice == "issue" else "cnn"


def forward_flops(model: Any, in_shape: tuple[int, int, int], batch: int = 32) -> float:
    """FLOPs of one forward pass per sample (torch.utils.flop_counter on one batch)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    x = torch.zeros(batch, *in_shape)
    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        model(x)
    return counter.get_total_flops() / batch


def param_count(model: Any) -> int:
    """Number of parameters of ``model``."""
    return sum(p.numel() for p in model.parameters())


# --------------------------------------------------------------------------- data

MEAN = (0.5, 0.5, 0.5)
STD = (0.25, 0.25, 0.25)


def synthetic_cifar(clients: int, n_train: int, n_test: int, seed: int = 0,
                    classes: int = 10, contrast: float = 128.0, noise: float = 60.0,
                    label_noise: float = 0.2, shape: tuple[int, int, int] = (3, 32, 32)
                    ) -> tuple[np.ndarray, np.ndarray, list[np.ndarray], list[np.ndarray]]:
    """CIFAR-shaped uint8 images that a CNN can learn: class template + noise.

    ``shape`` (C, H, W; sides multiples of 4) gives other data sets' images the same way.
    Each class has a blocky random 3x32x32 template (8x8 blocks of 4x4 pixels, values
    128 ± ``contrast``); a sample is its class template plus Gaussian pixel noise
    (std ``noise``), clipped to [0, 255]. A share ``label_noise`` of the labels is then
    redrawn uniformly, so accuracy tops out near ``1 - 0.9 * label_noise`` instead of
    saturating at 1. Client ``k`` holds consecutive rows: ``n_train`` training rows then
    ``n_test`` test rows (IID labels).
    Returns ``x (N,3,32,32) uint8, y (N,) int64, train index arrays, test index arrays``.
    """
    rng = np.random.default_rng(seed)
    c, h, w = shape
    coarse = 128.0 + contrast * rng.uniform(-1, 1, size=(classes, c, h // 4, w // 4))
    templates = coarse.repeat(4, axis=2).repeat(4, axis=3)
    per = n_train + n_test
    total = clients * per
    y = rng.integers(0, classes, size=total).astype(np.int64)
    x = np.empty((total, *shape), dtype=np.uint8)
    chunk = 512  # keeps the generator's float64 temporaries small (memory benchmark)
    for s in range(0, total, chunk):
        e = min(total, s + chunk)
        img = templates[y[s:e]] + rng.normal(0, noise, size=(e - s, *shape))
        x[s:e] = np.clip(img, 0, 255).astype(np.uint8)
    flip = rng.random(total) < label_noise
    y[flip] = rng.integers(0, classes, size=int(flip.sum()))
    train = [np.arange(k * per, k * per + n_train) for k in range(clients)]
    test = [np.arange(k * per + n_train, (k + 1) * per) for k in range(clients)]
    return x, y, train, test


def federated_data(x: np.ndarray, y: np.ndarray, train: list[np.ndarray],
                   test: list[np.ndarray], device: str = "cpu",
                   classes: int | None = None, public: np.ndarray | None = None) -> Any:
    """pflrepro's FederatedData built the way a training job builds it.

    Goes through ``FederatedData.build`` (an ArrayDataset plus a partition table),
    so the benchmark times and measures the real data path. ``classes``: the data
    set's class count (default: the largest label + 1); ``public``: raw unlabeled
    images of a public set.
    """
    import pandas as pd
    import torch

    from pflrepro.data.federated import FederatedData
    from pflrepro.data.store import ArrayDataset, DatasetMeta

    channels = x.shape[1]
    meta = DatasetMeta(name="synthetic_cifar",
                       num_classes=int(y.max()) + 1 if classes is None else classes,
                       shape=tuple(x.shape[1:]), mean=MEAN[:1] * channels,
                       std=STD[:1] * channels, max_value=255,
                       size=len(x), x_sha256="", y_sha256="", source="benchmark")
    parts = []
    for k, (tr, te) in enumerate(zip(train, test, strict=True)):
        for split, idx in (("train", tr), ("test", te)):
            parts.append(pd.DataFrame({"index": idx, "client": k, "split": split,
                                       "group": -1}))
    partition = pd.concat(parts, ignore_index=True)
    return FederatedData.build(ArrayDataset(x=x, y=y, meta=meta), partition,
                               torch.device(device), public=public)


def normalise(x: np.ndarray) -> np.ndarray:
    """uint8 images -> float32, scaled to [0, 1] and standardised with MEAN/STD."""
    out = x.astype(np.float32) / 255.0
    out -= np.asarray(MEAN, dtype=np.float32).reshape(1, -1, 1, 1)
    out /= np.asarray(STD, dtype=np.float32).reshape(1, -1, 1, 1)
    return out


def repeat_interleaved(repeats: int, fns: dict[str, Callable[[int], Any]]) -> dict[str, list]:
    """Call every ``fns[name](rep)`` once per repeat, alternating the order (A/B, B/A)."""
    names = list(fns)
    out: dict[str, list] = {n: [] for n in names}
    for rep in range(repeats):
        order = names if rep % 2 == 0 else names[::-1]
        for n in order:
            out[n].append(fns[n](rep))
    return out
