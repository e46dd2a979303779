"""pflrepro.training.memory: a vectorised pass's bytes per client, by hand on a linear model.

The linear model of ``_fl_helpers`` (2 features, 2 classes) has 6 parameters, 24
bytes in float32. A step at batch 4 saves only its input for the backward (4 x 2
floats, 32 bytes: the flattened images are a view of it; the weight autograd saves
is the parameter's own storage), plus twice the largest saved storage for the
backward's gradients: 3 x 32 = 96 bytes.
"""

from __future__ import annotations

import pytest
import torch
from _fl_helpers import make_engine

from pflrepro.training import memory as M

PARAM_BYTES = 6 * 4
ACTIVATIONS_AT_4 = 3 * 4 * 2 * 4


@pytest.mark.parametrize(("optimizer", "momentum", "slots"),
                         [("sgd", 0.0, 0), ("sgd", 0.9, 1), ("adam", 0.0, 2)])
def test_linear_model_by_hand(optimizer: str, momentum: float, slots: int) -> None:
    e = make_engine()
    need = M.client_memory(e.model, e.in_shape, 4, optimizer, momentum)
    assert need.param_bytes == PARAM_BYTES
    assert need.slots == slots == M.optimizer_slots(optimizer, momentum)
    assert need.activation_bytes == ACTIVATIONS_AT_4
    # parameters, working copy, gradients (PARAM_COPIES = 3) and the optimiser's slots
    assert need.state_bytes == PARAM_BYTES * (3 + slots)
    assert need.total(10) == 10 * (PARAM_BYTES * (3 + slots) + ACTIVATIONS_AT_4)


def test_activations_grow_with_the_batch_and_the_forwards() -> None:
    e = make_engine()
    assert M.activation_bytes(e.model, e.in_shape, 8) == 2 * ACTIVATIONS_AT_4
    assert M.activation_bytes(e.model, e.in_shape, 4, torch.float64) == 2 * ACTIVATIONS_AT_4
    two = M.client_memory(e.model, e.in_shape, 4, "sgd", forwards=2)
    assert two.activation_bytes == 2 * ACTIVATIONS_AT_4


def test_clients_that_fit() -> None:
    assert M.clients_that_fit(100, 1000, safety=1.0) == 10
    assert M.clients_that_fit(100, 1000, safety=0.5) == 5
    assert M.clients_that_fit(100, 999, safety=1.0) == 9
    assert M.clients_that_fit(10**9, 1000) == 1  # one client at a time at least
    with pytest.raises(ValueError, match="per_client"):
        M.clients_that_fit(0, 1000)


def test_no_limit_off_cuda() -> None:
    assert M.device_free_bytes(torch.device("cpu")) is None
    with pytest.raises(ValueError, match="unknown optimizer"):
        M.optimizer_slots("rmsprop")
