"""Shared by the objective tests: a small engine per model and optimiser, and both paths.

Each objective's vectorised pass (``local_training.VMAP``) must equal its per-client
loop within float32 rounding, with clients of different step counts and batch sizes
(padding): :func:`both_paths` trains the same start both ways (and in chunks) and
checks that they agree.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import torch
from _fl_helpers import MODELS, OPTIMISERS, assert_params_close, make_data, make_engine

from pflrepro.training import local_training as LT
from pflrepro.training.engine import Engine
from pflrepro.training.objective import Objective

RTOL, ATOL = 1e-4, 1e-5
#: batch 4: batch sizes 4, 3, 4, 4, 1; steps per epoch 2, 1, 3, 2, 1
N_TRAIN = (7, 3, 12, 5, 1)

__all__ = ["ATOL", "MODELS", "N_TRAIN", "OPTIMISERS", "RTOL", "assert_same", "both_paths",
           "engine_for", "rows_of", "train"]


def engine_for(model: str, opt: str, seed: int = 3) -> Engine:
    """Five clients of :data:`N_TRAIN` samples, 3 classes, a public set of 5, batch 4."""
    spec = MODELS[model]
    data = make_data(n_train=N_TRAIN, n_test=(1,) * len(N_TRAIN), shape=spec["shape"],
                     num_classes=3, seed=seed, public=5)
    data = dataclasses.replace(data, x=data.x.to(torch.float32))
    return make_engine(data, seed=seed, model=spec["model"],
                       model_options=spec["model_options"], batch_size=4, local_epochs=2,
                       **OPTIMISERS[opt])


def rows_of(stacked: dict, which: list[int]) -> dict:
    """The rows ``which`` of a stacked dict."""
    return {n: v[which] for n, v in stacked.items()}


def assert_same(a: tuple, b: tuple) -> None:
    """Two ``train`` results (parameters, states, losses) agree to float32 rounding."""
    assert_params_close(a[0], b[0], atol=ATOL, rtol=RTOL)
    assert_params_close(a[1], b[1], atol=ATOL, rtol=RTOL)
    np.testing.assert_allclose(np.asarray(a[2]), b[2], rtol=RTOL, atol=ATOL)


def train(e: Engine, params: dict, state: dict, clients: list[int], path: str,
          objective: Objective | None, **kwargs: Any) -> tuple:
    """``local_training.train`` of round 1 on the engine's context."""
    return LT.train(e.context, params, state, clients, 1, path=path, objective=objective,
                    **kwargs)


def both_paths(e: Engine, params: dict, state: dict, objective: Objective,
               clients: list[int] | None = None, chunk: int | None = 2) -> tuple:
    """The loop's result, checked equal to the vectorised path's (whole and in chunks)."""
    clients = list(range(e.num_clients)) if clients is None else clients
    looped = train(e, params, state, clients, LT.LOOP, objective)
    assert_same(train(e, params, state, clients, LT.VMAP, objective), looped)
    if chunk:
        assert_same(train(e, params, state, clients, LT.VMAP, objective, chunk=chunk), looped)
    return looped
