"""Tiny data sets and engines shared by the engine and algorithm unit tests.

Everything runs on the CPU. The default model is ``mlp`` with ``hidden=[]``, i.e. a
single linear layer ``logits = x.flatten(1) @ W.T + b`` with parameters
``net.1.weight`` (classes, features) and ``net.1.bias`` (classes), so gradients can be
recomputed by hand (see :func:`manual_loss_and_grad`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F

from pflrepro.data.federated import FederatedData
from pflrepro.training.engine import Engine
from pflrepro.training.settings import TrainingConfig

CPU = torch.device("cpu")
W, B = "net.1.weight", "net.1.bias"

#: Small models (their ``training`` settings and input shape) and optimisers for the tests
#: that compare the two local-training paths on every combination.
MODELS: dict[str, dict[str, Any]] = {
    "mlp": {"model": "mlp", "model_options": {"hidden": [6]}, "shape": (1, 4, 4)},
    "cnn": {"model": "cnn", "model_options": {"channels": [2, 3], "hidden": 8,
                                              "kernel_size": 3}, "shape": (2, 8, 8)},
}
OPTIMISERS: dict[str, dict[str, Any]] = {
    "sgd": {"optimizer": "sgd", "lr": 0.1},
    "momentum": {"optimizer": "sgd", "lr": 0.05, "momentum": 0.9},
    "adam": {"optimizer": "adam", "lr": 0.01},
}


def make_data(n_train: Sequence[int] = (4, 2, 3), n_test: Sequence[int] = (2, 1, 2),
              shape: tuple[int, int, int] = (1, 1, 2), num_classes: int = 2, seed: int = 0,
              groups: Sequence[int] | None = None, public: int = 0) -> FederatedData:
    """Clients hold consecutive rows: client k's train rows, then its test rows.

    x ~ N(0, 1) from a fixed generator; labels are ``row % num_classes``; ``public``
    unlabeled rows (drawn after the others) form the public set.
    """
    gen = torch.Generator().manual_seed(seed)
    total = sum(n_train) + sum(n_test)
    x = torch.randn(total, *shape, generator=gen)
    y = torch.arange(total) % num_classes
    train, test, start = [], [], 0
    for a, b in zip(n_train, n_test, strict=True):
        train.append(torch.arange(start, start + a))
        start += a
        test.append(torch.arange(start, start + b))
        start += b
    k = len(n_train)
    extra = torch.randn(public, *shape, generator=gen) if public else None
    return FederatedData(x=x, y=y, train=tuple(train), test=tuple(test),
                         groups=tuple(groups if groups is not None else [-1] * k),
                         num_classes=num_classes, public=extra)


def make_engine(data: FederatedData | None = None, seed: int = 0, workers: int = 1,
                **training: Any) -> Engine:
    """Engine on ``data`` (default :func:`make_data`), linear model, plain SGD lr 0.1."""
    cfg: dict[str, Any] = {"rounds": 2, "model": "mlp", "model_options": {"hidden": []},
                           "batch_size": 2, "optimizer": "sgd", "lr": 0.1, "device": "cpu"}
    cfg.update(training)
    data = make_data() if data is None else data
    return Engine(data, TrainingConfig(**cfg), seed, tuple(data.x.shape[1:]), CPU,
                  workers=workers)


def clone(tree: Any) -> Any:
    """Deep copy of nested dicts/lists of tensors (other leaves kept as they are)."""
    if isinstance(tree, torch.Tensor):
        return tree.clone()
    if isinstance(tree, dict):
        return {k: clone(v) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return type(tree)(clone(v) for v in tree)
    return tree


def assert_params_close(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor],
                        atol: float = 1e-6, rtol: float = 1e-5) -> None:
    """Same keys, allclose values."""
    assert set(a) == set(b)
    for k in a:
        torch.testing.assert_close(a[k], b[k], atol=atol, rtol=rtol, msg=f"param {k}")


def manual_loss_and_grad(params: dict[str, torch.Tensor], x: torch.Tensor, y: torch.Tensor,
                         sample_weight: torch.Tensor | None = None
                         ) -> tuple[float, dict[str, torch.Tensor]]:
    """Loss and gradient of the linear model, written out without the engine."""
    w = params[W].detach().clone().requires_grad_(True)
    b = params[B].detach().clone().requires_grad_(True)
    logits = x.flatten(1) @ w.T + b
    per_sample = F.cross_entropy(logits, y, reduction="none")
    loss = per_sample.mean() if sample_weight is None else (per_sample * sample_weight).sum()
    gw, gb = torch.autograd.grad(loss, [w, b])
    return float(loss.detach()), {W: gw, B: gb}


def manual_sgd(params: dict[str, torch.Tensor], engine: Engine, client: int, rnd: int,
               purpose: str, steps: int, lr: float) -> tuple[dict[str, torch.Tensor], float]:
    """Plain SGD over the engine's batches, gradients from :func:`manual_loss_and_grad`."""
    data = engine.data
    p = clone(params)
    total = 0.0
    batches = engine.minibatches(client, rnd, purpose, steps)
    for idx in batches:
        loss, g = manual_loss_and_grad(p, data.x[idx], data.y[idx])
        p = {k: p[k] - lr * g[k] for k in p}
        total += loss
    return p, total / len(batches)
