"""pflrepro.training.optim: functional SGD/Adam against torch.optim, and hand-computed steps."""

import pytest
import torch

from pflrepro.training.optim import Optimizer


def _params() -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    return {"w": torch.randn(3, 4, generator=gen), "b": torch.randn(4, generator=gen)}


def _grad_sequence(steps: int) -> list[dict[str, torch.Tensor]]:
    gen = torch.Generator().manual_seed(1)
    return [{"w": torch.randn(3, 4, generator=gen), "b": torch.randn(4, generator=gen)}
            for _ in range(steps)]


def _torch_optimizer(name: str, params: list[torch.nn.Parameter], **kw) -> torch.optim.Optimizer:
    if name == "sgd":
        return torch.optim.SGD(params, lr=kw["lr"], momentum=kw.get("momentum", 0.0))
    return torch.optim.Adam(params, lr=kw["lr"])


@pytest.mark.parametrize(("name", "kw"), [
    ("sgd", {"lr": 0.1}),
    ("sgd", {"lr": 0.05, "momentum": 0.9}),
    ("adam", {"lr": 0.01}),
    ("adam", {"lr": 0.3}),
])
def test_matches_torch_step_by_step(name, kw):
    opt = Optimizer(name, **kw)
    params = _params()
    state = opt.init(params)
    ref = {k: torch.nn.Parameter(v.clone()) for k, v in params.items()}
    ref_opt = _torch_optimizer(name, list(ref.values()), **kw)
    for grads in _grad_sequence(6):
        params, state = opt.step(params, grads, state)
        for k, p in ref.items():
            p.grad = grads[k].clone()
        ref_opt.step()
        for k in params:
            torch.testing.assert_close(params[k], ref[k].detach(), atol=1e-6, rtol=1e-6)
    assert float(state["step"]) == 6


def test_sgd_single_step_by_hand():
    # p = 1.0, g = 0.5, lr = 0.1: p - lr * g = 1.0 - 0.05 = 0.95
    opt = Optimizer("sgd", 0.1)
    p, _ = opt.step({"p": torch.tensor([1.0])}, {"p": torch.tensor([0.5])},
                    opt.init({"p": torch.tensor([1.0])}))
    assert p["p"].item() == pytest.approx(0.95)


def test_sgd_momentum_by_hand():
    # momentum 0.9, g = 0.5 twice: buf1 = 0.5 -> p = 0.95; buf2 = 0.9*0.5 + 0.5 = 0.95
    # -> p = 0.95 - 0.1*0.95 = 0.855
    opt = Optimizer("sgd", 0.1, momentum=0.9)
    params = {"p": torch.tensor([1.0])}
    state = opt.init(params)
    assert set(state) == {"step", "buf.p"}
    for _ in range(2):
        params, state = opt.step(params, {"p": torch.tensor([0.5])}, state)
    assert params["p"].item() == pytest.approx(0.855)
    assert state["buf.p"].item() == pytest.approx(0.95)


def test_adam_first_step_moves_by_lr_sign():
    # step 1: m = 0.1 g, v = 0.001 g^2; m/(1-0.9) = g, sqrt(v/(1-0.999)) = |g|
    # -> update = lr * g / (|g| + eps) ~= lr * sign(g), whatever |g| is
    lr = 0.01
    opt = Optimizer("adam", lr)
    p0 = torch.tensor([1.0, 1.0, 1.0, -2.0])
    g = torch.tensor([0.5, -2.0, 1e-3, 300.0])
    new, state = opt.step({"p": p0}, {"p": g}, opt.init({"p": p0}))
    torch.testing.assert_close(new["p"] - p0, -lr * torch.sign(g), atol=1e-6, rtol=1e-4)
    torch.testing.assert_close(state["m.p"], 0.1 * g)
    torch.testing.assert_close(state["v.p"], 0.001 * g * g)


@pytest.mark.parametrize(("name", "kw"), [("sgd", {}), ("sgd", {"momentum": 0.5}),
                                          ("adam", {})])
def test_inputs_not_mutated(name, kw):
    opt = Optimizer(name, 0.1, **kw)
    params = _params()
    state = opt.init(params)
    grads_seq = _grad_sequence(2)
    params, state = opt.step(params, grads_seq[0], state)  # non-trivial state
    before = ({k: v.clone() for k, v in params.items()},
              {k: v.clone() for k, v in grads_seq[1].items()},
              {k: v.clone() for k, v in state.items()})
    new_params, new_state = opt.step(params, grads_seq[1], state)
    for now, then in zip((params, grads_seq[1], state), before, strict=True):
        for k in then:
            assert torch.equal(now[k], then[k]), k
    assert not torch.equal(new_params["w"], params["w"])
    assert float(new_state["step"]) == 2.0 and float(state["step"]) == 1.0


def test_init_state_keys():
    params = _params()
    assert set(Optimizer("sgd", 0.1).init(params)) == {"step"}
    assert set(Optimizer("adam", 0.1).init(params)) == {"step", "m.w", "v.w", "m.b", "v.b"}
    state = Optimizer("adam", 0.1).init(params)
    assert all(float(v.abs().sum()) == 0.0 for v in state.values())


@pytest.mark.parametrize(("name", "lr"), [("rmsprop", 0.1), ("SGD", 0.1), ("sgd", 0.0),
                                          ("adam", -0.01)])
def test_bad_arguments_raise(name, lr):
    with pytest.raises(ValueError):
        Optimizer(name, lr)


def test_negative_momentum_raises():
    with pytest.raises(ValueError):
        torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1, momentum=-0.5)
    with pytest.raises(ValueError):
        Optimizer("sgd", 0.1, momentum=-0.5)


@pytest.mark.parametrize(("name", "kw"), [
    ("sgd", {"lr": 0.1}), ("sgd", {"lr": 0.05, "momentum": 0.9}), ("adam", {"lr": 0.01}),
])
def test_in_place_step_matches_functional_step_bitwise(name, kw):
    opt = Optimizer(name, **kw)
    params = _params()
    state = opt.init(params)
    live = {k: v.clone() for k, v in params.items()}
    live_state = {k: v.clone() for k, v in state.items()}
    for grads in _grad_sequence(4):
        before = {k: v.clone() for k, v in params.items()}
        params, state = opt.step(params, grads, state)
        opt.step_(live, grads, live_state)
        for k in params:
            assert torch.equal(params[k], live[k])
        for k in state:
            assert torch.equal(state[k], live_state[k])
        assert not any(torch.equal(before[k], params[k]) for k in params)
