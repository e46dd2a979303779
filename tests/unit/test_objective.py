"""pflrepro.training.objective: one loss per objective, differentiated on both paths.

A toy objective checks what every objective shares: the per-client fields sliced and
broadcast by the base class, the loop's gradient and reported loss, the ``obj.*``
state's update from its gradient (and a padded step leaving it alone), and the
vectorised path equal to the loop. Each method's own objective is tested with the
method (tests/unit/test_algorithm_<method>.py).
"""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
import torch.nn.functional as F
from _fl_helpers import B, W, assert_params_close, make_engine
from _objective_helpers import MODELS, OPTIMISERS, both_paths, engine_for, rows_of, train
from torch import nn

from pflrepro.training import local_training as LT
from pflrepro.training.objective import (
    Aux,
    Batch,
    Objective,
    Stream,
    loss_and_grad,
    masked_ce,
    per_client_field,
)
from pflrepro.training.optim import Params
from pflrepro.training.params import take

T_KEY = "obj.t"


@dataclasses.dataclass(frozen=True)
class Scaled(Objective):
    """``(1 + t) · scale · mean ℓ``; t (state) steps by −lr · ∂/∂t; reports mean ℓ."""

    scale: torch.Tensor = per_client_field()
    names: tuple[str, ...] = per_client_field(default=("a",))
    lr: float = 0.5
    per_client: bool = False
    differentiates = (T_KEY,)

    def loss(self, model: nn.Module, params: Params, batch: Batch, extra: object,
             state: dict[str, torch.Tensor]) -> tuple[torch.Tensor, Aux]:
        ce = masked_ce(model, params, batch)
        t = state[T_KEY].to(ce.dtype)
        return (1 + t) * self.scale * ce, {"loss": ce.detach()}

    def update(self, state: dict[str, torch.Tensor], aux: Aux,
               grads: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {T_KEY: state[T_KEY] - self.lr * grads[T_KEY]}


@dataclasses.dataclass(frozen=True)
class Plain(Objective):
    """The mean cross-entropy as an objective."""

    per_client: bool = False

    def loss(self, model: nn.Module, params: Params, batch: Batch, extra: object,
             state: object) -> tuple[torch.Tensor, Aux]:
        return masked_ce(model, params, batch), {}


def test_stream_checks() -> None:
    with pytest.raises(ValueError, match="public stream has no client"):
        Stream("p", public=True, client=1)
    with pytest.raises(ValueError, match="no batch size"):
        Stream("w", whole=True, batch_size=3)


def test_per_client_fields_are_sliced_and_broadcast_alike() -> None:
    shared = Scaled(torch.tensor(2.0), ("x",))
    assert shared.row(3) is shared
    stacked = shared.stacked(3)
    assert stacked.per_client and stacked.scale.tolist() == [2.0] * 3
    assert stacked.names == (("x",),) * 3 and stacked.lr == 0.5
    per = Scaled(torch.tensor([1.0, 2.0, 3.0]), (("a",), ("b",), ("c",)), per_client=True)
    assert per.stacked(3) is per
    row = per.row(1)
    assert not row.per_client and float(row.scale) == 2.0 and row.names == ("b",)
    part = per.rows(1, 3)
    assert part.per_client and part.scale.tolist() == [2.0, 3.0]
    assert part.names == (("b",), ("c",))
    assert per.scale.tolist() == [1.0, 2.0, 3.0]  # slicing leaves the original alone


def test_masked_ce_is_the_mean_over_real_samples() -> None:
    # linear model, logits x W^T + b; rows 0 and 1 real (mask 1), row 2 padding
    e = make_engine()
    params = {W: torch.tensor([[1.0, 0.0], [0.0, 1.0]]), B: torch.tensor([0.0, 0.0])}
    x = torch.tensor([[[[math.log(3.0), 0.0]]], [[[0.0, 0.0]]], [[[9.0, -9.0]]]])
    y = torch.tensor([0, 1, 1])
    batch = Batch(torch.arange(3), x, y, torch.tensor([1.0, 1.0, 0.0]), torch.tensor(2.0))
    # −ln(3/4) and −ln(1/2), averaged over the two real rows
    want = (-math.log(0.75) - math.log(0.5)) / 2
    assert float(masked_ce(e.model, params, batch)) == pytest.approx(want, rel=1e-6)


def test_loop_gradient_state_update_and_reported_loss_by_hand() -> None:
    # L = (1 + t) · 2 · ℓ: gradient 2 (1 + t) ∇ℓ, ∂L/∂t = 2 ℓ, t1 = t − 0.5 · 2 ℓ
    e = make_engine()
    params = e.init_params()
    idx = e.data.train[0]
    n = len(idx)
    batch = Batch(idx, e.data.x[idx], e.data.y[idx], torch.ones(n), torch.tensor(float(n)))
    state = {"step": torch.zeros(()), T_KEY: torch.tensor(0.25, dtype=torch.float64)}
    loss, grads = loss_and_grad(Scaled(torch.tensor(2.0)), e.model, params, batch, [], state)
    ell, g = e.loss_and_grad(params, idx)
    assert float(loss) == pytest.approx(ell, rel=1e-6)
    assert_params_close(grads, {k: 2.5 * v for k, v in g.items()}, atol=1e-7, rtol=1e-5)
    assert float(state[T_KEY]) == pytest.approx(0.25 - 0.5 * 2 * ell, rel=1e-6)
    assert state[T_KEY].dtype == torch.float64 and float(state["step"]) == 0.0


@pytest.mark.parametrize("model", sorted(MODELS))
@pytest.mark.parametrize("opt", sorted(OPTIMISERS))
def test_a_toy_objective_vmap_equals_loop_and_padded_steps_keep_the_state(
        model: str, opt: str) -> None:
    e = engine_for(model, opt)
    start = e.client_init()
    c = e.num_clients
    state = {**start["opt"], T_KEY: torch.linspace(0.0, 0.4, c, dtype=torch.float64)}
    objective = Scaled(torch.tensor([0.5, 1.0, 1.5, 2.0, 2.5]), (("a",),) * c,
                       per_client=True)
    looped = both_paths(e, start["params"], state, objective)
    assert not torch.equal(looped[1][T_KEY], state[T_KEY])  # t moved on every client
    # clients with no step (0 of them for client 1): t, parameters and state stay
    steps = [2, 0, 3, 1, 0]
    for path in LT.PATHS:
        out = train(e, start["params"], state, list(range(c)), path, objective, steps=steps)
        for i in (1, 4):
            assert float(out[1][T_KEY][i]) == float(state[T_KEY][i])
            assert all(torch.equal(take(out[0], i)[k], take(start["params"], i)[k])
                       for k in start["params"])
        assert all(float(out[1][T_KEY][i]) != float(state[T_KEY][i]) for i in (0, 2, 3))


def test_the_plain_objective_takes_the_plain_steps() -> None:
    # masked_ce's gradient is the mean cross-entropy's, bit for bit on the loop
    e = engine_for("cnn", "momentum")
    start = e.client_init()
    clients = [0, 2, 3]
    params, state = rows_of(start["params"], clients), rows_of(start["opt"], clients)
    plain = train(e, params, state, clients, LT.LOOP, None)
    as_objective = both_paths(e, params, state, Plain(), clients)
    assert all(torch.equal(plain[0][k], as_objective[0][k]) for k in plain[0])
    assert as_objective[2] == pytest.approx(plain[2], rel=1e-6)


def test_a_client_without_streams_takes_a_zero_gradient() -> None:
    # an objective summing over its streams' batches: no stream, no loss, zero gradient
    @dataclasses.dataclass(frozen=True)
    class Streams(Objective):
        users: tuple[tuple[Stream, ...], ...] = per_client_field()
        per_client: bool = True

        @property
        def streams(self) -> tuple[Stream, ...]:  # type: ignore[override]
            return self.users  # type: ignore[return-value]

        def loss(self, model: nn.Module, params: Params, batch: Batch, extra: list[Batch],
                 state: object) -> tuple[torch.Tensor, Aux]:
            total = torch.zeros(())
            for b in extra:
                out = torch.func.functional_call(model, params, (b.x,))
                total = total + (F.cross_entropy(out, b.y, reduction="none")
                                 * b.mask).sum() / b.count
            return total, {}

    e = engine_for("mlp", "adam")
    start = e.client_init()
    objective = Streams(((Stream("s", client=2),), (), (Stream("s", client=0),
                                                        Stream("t", client=3)), (), ()))
    looped = both_paths(e, start["params"], start["opt"], objective)
    for i in (1, 3, 4):
        assert looped[2][i] == 0.0
        assert all(torch.equal(take(looped[0], i)[k], take(start["params"], i)[k])
                   for k in start["params"])
