"""Faster forms of a model with the same numbers: layer order, pooling, memory layout.

The engine applies these to the model it builds once per run; parameter names and
every computed value stay as they are (the tests compare bits).
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["PairMaxPool2d", "pair_max_pools", "pool_before_relu", "speed_up",
           "to_channels_last"]


def to_channels_last(x: torch.Tensor) -> torch.Tensor:
    """Images (N, C, H, W) in channels-last memory order; other tensors unchanged.

    Same shape and values; convolutions (oneDNN on CPU, cuDNN on GPU) run about twice
    as fast on NHWC-ordered inputs, and mini-batches gathered from the resident tensor
    keep its order.
    """
    return x.contiguous(memory_format=torch.channels_last) if x.dim() == 4 else x


def pool_before_relu(model: nn.Module) -> None:
    """Swap every ``ReLU, MaxPool2d`` pair of an ``nn.Sequential`` into ``MaxPool2d, ReLU``.

    ReLU is monotone, so ``relu(maxpool(x)) == maxpool(relu(x))`` exactly, and the
    gradients agree too (where a window's maximum is positive both route it to the same
    element; otherwise both give zero). The ReLU then runs on a quarter of the
    elements. Parameter-free modules trade places; parameter names do not change.
    """
    for seq in model.modules():
        if not isinstance(seq, nn.Sequential):
            continue
        names = list(seq._modules)
        i = 0
        while i + 1 < len(names):
            a, b = names[i], names[i + 1]
            if isinstance(seq._modules[a], nn.ReLU) and isinstance(seq._modules[b], nn.MaxPool2d):
                seq._modules[a], seq._modules[b] = seq._modules[b], seq._modules[a]
                i += 2
            else:
                i += 1


class PairMaxPool2d(nn.MaxPool2d):
    """``nn.MaxPool2d(2)`` whose no-grad forward is two elementwise maxima.

    ``max(max(x[2i, 2j], x[2i+1, 2j]), max(x[2i, 2j+1], x[2i+1, 2j+1]))`` over strided
    views: the same values bit for bit (NaNs propagate as in max-pooling), ~2x faster
    than ATen's pooling kernel on channels-last CPU tensors, which also builds the
    indices a backward pass would need. With autograd on it is ``nn.MaxPool2d`` itself,
    so gradients (ties included) do not change.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Pool ``x`` (N, C, H, W); odd trailing rows and columns are dropped, as in 2x2 pooling."""
        if torch.is_grad_enabled() or x.dim() != 4:
            return super().forward(x)
        h, w = x.shape[-2] // 2 * 2, x.shape[-1] // 2 * 2
        rows = torch.maximum(x[:, :, 0:h:2, :w], x[:, :, 1:h:2, :w])
        return torch.maximum(rows[:, :, :, 0::2], rows[:, :, :, 1::2])

    @staticmethod
    def fits(module: nn.Module) -> bool:
        """Whether ``module`` is a plain 2x2, stride-2 max-pooling layer."""
        def pair(v: object) -> tuple[object, object]:
            return v if isinstance(v, tuple) else (v, v)

        return (type(module) is nn.MaxPool2d and pair(module.kernel_size) == (2, 2)
                and pair(module.stride) == (2, 2) and pair(module.padding) == (0, 0)
                and pair(module.dilation) == (1, 1) and not module.ceil_mode
                and not module.return_indices)


def pair_max_pools(model: nn.Module) -> None:
    """Replace every plain 2x2 ``nn.MaxPool2d`` of ``model`` by :class:`PairMaxPool2d`."""
    for parent in model.modules():
        for name, child in list(parent.named_children()):
            if PairMaxPool2d.fits(child):
                setattr(parent, name, PairMaxPool2d(2))


def speed_up(model: nn.Module) -> None:
    """Every change of this module, in place: same parameters and outputs, less work.

    ``ReLU, MaxPool2d`` becomes ``MaxPool2d, ReLU``, 2x2 pools become
    :class:`PairMaxPool2d`, and ReLUs overwrite their input (the output of a conv,
    linear or pooling layer, whose backward does not need it: one memory pass instead
    of an allocation and two; autograd would raise if a model ever needed the input).
    """
    pool_before_relu(model)
    pair_max_pools(model)
    for module in model.modules():
        if isinstance(module, nn.ReLU):
            module.inplace = True
