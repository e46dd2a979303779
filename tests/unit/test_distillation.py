"""pflrepro.training.distillation: the KL pass on public rows, its value and gradient by hand;
the padded cross-entropy part the objectives differentiate."""

import math

import pytest
import torch
from _fl_helpers import B, W, make_engine

from pflrepro.training.distillation import distill_cross, distill_loss_and_grad


def test_kl_and_its_gradient_by_hand() -> None:
    e = make_engine()  # linear model: logits = x W^T + b, two classes
    params = {W: torch.tensor([[1.0, 0.0], [0.0, 1.0]]), B: torch.tensor([0.0, 0.0])}
    x = torch.tensor([[[[math.log(3.0), 0.0]]], [[[0.0, 0.0]]]])  # q = (3/4, 1/4), (1/2, 1/2)
    target = torch.tensor([[0.5, 0.5], [0.5, 0.5]])
    kl, grads = distill_loss_and_grad(e.context, params, x, target)
    # mean KL(t ‖ q): row 0: ½ ln(½ / ¾) + ½ ln(½ / ¼) = ½ ln(4/3); row 1: 0
    assert kl == pytest.approx(0.25 * math.log(4.0 / 3.0), rel=1e-6)
    # ∂/∂logits = (q − t) / rows: row 0 (1/8, −1/8), row 1 (0, 0)
    torch.testing.assert_close(grads[B], torch.tensor([0.125, -0.125]))
    torch.testing.assert_close(grads[W], torch.tensor([[0.125 * math.log(3.0), 0.0],
                                                       [-0.125 * math.log(3.0), 0.0]]))
    assert params[W].grad is None and not params[W].requires_grad  # inputs untouched


def test_agreeing_target_has_zero_kl_and_zero_gradient() -> None:
    e = make_engine()
    params = e.init_params()
    x = e.data.x[:3]
    target = e.probs(params, x)
    kl, grads = distill_loss_and_grad(e.context, params, x, target)
    assert kl == pytest.approx(0.0, abs=1e-6)
    for g in grads.values():
        torch.testing.assert_close(g, torch.zeros_like(g), atol=1e-6, rtol=0)


def test_distill_cross_by_hand_and_padding_ignored() -> None:
    # −Σ t log q per row over the real rows / count: row 0 of the KL test above,
    # q = (3/4, 1/4), t = (1/2, 1/2): ½ ln(4/3) + ½ ln 4 = ½ ln(16/3); a padded row
    # (mask 0, any target) adds nothing
    e = make_engine()
    params = {W: torch.tensor([[1.0, 0.0], [0.0, 1.0]]), B: torch.tensor([0.0, 0.0])}
    x = torch.tensor([[[[math.log(3.0), 0.0]]], [[[5.0, -5.0]]]])
    target = torch.tensor([[0.5, 0.5], [0.0, 1.0]])
    got = distill_cross(e.model, params, x, target, torch.tensor([1.0, 0.0]), torch.tensor(1.0))
    assert float(got) == pytest.approx(0.5 * math.log(16.0 / 3.0), rel=1e-6)
