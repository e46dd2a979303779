"""Model registry: name -> builder ``(in_shape, num_classes, **options) -> nn.Module``.

Models here have parameters but no buffers (no batch norm), so a model is fully
described by its parameter dict and clients can hold stacked parameters.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch import nn

from pflrepro.models.nets import CNN, MLP

Builder = Callable[..., nn.Module]

MODELS: dict[str, Builder] = {
    "mlp": MLP,
    "cnn": CNN,
}


def build_model(name: str, in_shape: tuple[int, int, int], num_classes: int,
                **options: Any) -> nn.Module:
    """Build model ``name`` for inputs of shape ``in_shape`` (C, H, W)."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; known: {sorted(MODELS)}")
    model = MODELS[name](in_shape=in_shape, num_classes=num_classes, **options)
    if any(True for _ in model.buffers()):
        raise ValueError(f"model {name!r} has buffers; models must be parameter-only")
    return model
