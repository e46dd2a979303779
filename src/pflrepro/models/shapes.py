"""The image sizes each model can take.

No torch: the config check reads it, and so do the networks themselves.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

#: The smallest image side each model takes: the CNN's two 2x2 max-pools need 4, VGG's
#: five need 32 (its 512 features then feed the head); the MLP takes any.
MIN_INPUT_SIDE: Mapping[str, int] = {"mlp": 1, "cnn": 4, "vgg11": 32, "vgg13": 32}


def check_input_shape(name: str, shape: Sequence[int]) -> None:
    """Raise ValueError when model ``name`` cannot take images of ``shape`` (C, H, W).

    Images smaller than :data:`MIN_INPUT_SIDE` on a side are refused.
    """
    side = MIN_INPUT_SIDE.get(name, 1)
    _, h, w = shape
    if h < side or w < side:
        fits = sorted(m for m, s in MIN_INPUT_SIDE.items() if s <= min(h, w))
        raise ValueError(f"model {name!r} needs images of at least {side}x{side}, these are "
                         f"{h}x{w}; models that take them: {', '.join(fits)}")
