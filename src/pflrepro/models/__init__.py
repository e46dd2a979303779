"""Model registry: name -> builder ``(in_shape, num_classes, **options) -> nn.Module``.

Models here have parameters but no buffers (no batch norm), so a model is fully
described by its parameter dict and clients can hold stacked parameters.

:data:`MODEL_OPTIONS` declares, without importing torch, the keyword options each
model's builder accepts (``training.model_options`` in the config), so the config is
checked when the workflow is parsed; :data:`MODELS` (the builders, which import
torch) is loaded on first use.

Layer (tests/unit/test_layers.py): the networks; they may import only
:mod:`pflrepro.store` and :mod:`pflrepro.seeding`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torch import nn

    Builder = Callable[..., nn.Module]


@dataclass(frozen=True)
class ModelOption:
    """One keyword option of a model builder.

    ``kind`` is ``"int"`` (one integer) or ``"ints"`` (a list of integers, of exactly
    ``length`` items when given); every integer must be >= ``minimum``.
    """

    kind: str
    doc: str
    minimum: int = 1
    length: int | None = None

    def check(self, value: Any) -> str | None:
        """None when ``value`` is valid, else what is wrong with it."""
        if self.kind == "int":
            return _int_problem(value, self.minimum)
        if not isinstance(value, list | tuple):
            return f"must be a list of integers >= {self.minimum}, got {value!r}"
        if self.length is not None and len(value) != self.length:
            return f"must list exactly {self.length} integers, got {value!r}"
        for item in value:
            problem = _int_problem(item, self.minimum)
            if problem:
                return f"items {problem} (in {value!r})"
        return None


def _int_problem(value: Any, minimum: int) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and math.isfinite(value) and value == int(value):
            value = int(value)
        else:
            return f"must be an integer >= {minimum}, got {value!r}"
    if value < minimum:
        return f"must be >= {minimum}, got {value!r}"
    return None


#: Per model, the options its builder takes besides ``in_shape`` and ``num_classes``
#: (``tests/unit/test_models.py`` checks these against the builders' signatures).
MODEL_OPTIONS: Mapping[str, Mapping[str, ModelOption]] = {
    "mlp": {
        "hidden": ModelOption("ints", "Widths of the hidden ReLU layers ([] = linear model)."),
    },
    "cnn": {
        "channels": ModelOption("ints", "Output channels of the two conv blocks.", length=2),
        "hidden": ModelOption("int", "Width of the hidden linear layer."),
        "kernel_size": ModelOption("int", "Side of the square conv kernels."),
    },
    "vgg11": {},  # torchvision's VGG11 conv stack, one linear head, 32x32 inputs
    "vgg13": {},  # torchvision's VGG13 conv stack, one linear head, 32x32 inputs
}


def check_model_options(name: str, options: Mapping[str, Any]) -> None:
    """Raise ValueError naming the option when ``options`` do not fit model ``name``."""
    if name not in MODEL_OPTIONS:
        raise ValueError(f"unknown model {name!r}; known: {sorted(MODEL_OPTIONS)}")
    if not isinstance(options, Mapping):
        raise ValueError(f"model_options must be a mapping, got {options!r}")
    declared = MODEL_OPTIONS[name]
    for key, value in options.items():
        if key not in declared:
            raise ValueError(f"model_options.{key}: model {name!r} has no option {key!r}; "
                             f"known: {sorted(declared)}")
        problem = declared[key].check(value)
        if problem:
            raise ValueError(f"model_options.{key} (model {name!r}): {problem}")


def _builders() -> dict[str, Builder]:
    from pflrepro.models.nets import CNN, MLP, vgg11, vgg13

    return {"mlp": MLP, "cnn": CNN, "vgg11": vgg11, "vgg13": vgg13}


def __getattr__(name: str) -> Any:
    if name == "MODELS":  # the builders, loaded (with torch) on first use
        models = _builders()
        globals()["MODELS"] = models
        return models
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def build_model(name: str, in_shape: tuple[int, int, int], num_classes: int,
                **options: Any) -> nn.Module:
    """Build model ``name`` for inputs of shape ``in_shape`` (C, H, W)."""
    models: dict[str, Builder] = globals().get("MODELS") or __getattr__("MODELS")
    if name not in models:
        raise ValueError(f"unknown model {name!r}; known: {sorted(models)}")
    model = models[name](in_shape=in_shape, num_classes=num_classes, **options)
    if any(True for _ in model.buffers()):
        raise ValueError(f"model {name!r} has buffers; models must be parameter-only")
    return model
