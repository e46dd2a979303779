"""Small image classifiers used across the experiments."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from pflrepro.models.shapes import check_input_shape


class MLP(nn.Module):
    """Fully connected network: flatten, ``hidden`` ReLU layers, linear output."""

    def __init__(self, in_shape: tuple[int, int, int], num_classes: int,
                 hidden: Sequence[int] = (64,)) -> None:
        super().__init__()
        layers: list[nn.Module] = [nn.Flatten()]
        width = in_shape[0] * in_shape[1] * in_shape[2]
        for h in hidden:
            layers += [nn.Linear(width, int(h)), nn.ReLU()]
            width = int(h)
        layers.append(nn.Linear(width, num_classes))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return logits of shape (batch, num_classes)."""
        return self.net(x)


class CNN(nn.Module):
    """Two 5×5 conv + max-pool blocks, then two linear layers (McMahan et al. 2017 style).

    Padding keeps the spatial size through each convolution, so the same network
    serves 8×8 digits, 28×28 MNIST-like and 32×32 CIFAR-like inputs.
    """

    def __init__(self, in_shape: tuple[int, int, int], num_classes: int,
                 channels: Sequence[int] = (32, 64), hidden: int = 512,
                 kernel_size: int = 5) -> None:
        super().__init__()
        c, h, w = in_shape
        c1, c2 = (int(v) for v in channels)
        pad = kernel_size // 2
        self.features = nn.Sequential(
            nn.Conv2d(c, c1, kernel_size, padding=pad), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(c1, c2, kernel_size, padding=pad), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(),
        )
        flat = c2 * (h // 4) * (w // 4)
        self.head = nn.Sequential(nn.Linear(flat, hidden), nn.ReLU(),
                                  nn.Linear(hidden, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return logits of shape (batch, num_classes)."""
        return self.head(self.features(x))


#: The model name of each VGG configuration (torchvision's letters).
VGG_NAMES = {"A": "vgg11", "B": "vgg13"}


class VGG(nn.Module):
    """VGG (Simonyan & Zisserman 2015) for small images: torchvision's conv stack, one linear head.

    The convolution stack is torchvision's (``torchvision.models.vgg.make_layers`` of the
    configuration ``cfg``: "A" = VGG11, "B" = VGG13), without batch norm: models here are
    parameter-only (``build_model`` rejects buffers such as batch norm's running
    statistics), because every method moves, averages, stacks (vmap) and checkpoints
    models as parameter dicts, which would leave those statistics behind. PerFed-CKT's
    text ("VGG11 is deployed for all clients"; VGG13/VGG11/CNN) does not mention batch
    norm.
    Adapted to 32×32 inputs as CIFAR codebases do: the five 2×2 max-pools take 32×32 to
    1×1, so the 512 features feed one linear layer (no 4096-wide classifier, no dropout,
    no adaptive pooling). Inputs must be at least 32×32. No pretrained weights.
    """

    def __init__(self, in_shape: tuple[int, int, int], num_classes: int, cfg: str = "A",
                 ) -> None:
        super().__init__()
        from torchvision.models.vgg import cfgs, make_layers

        c, h, w = in_shape
        check_input_shape(VGG_NAMES[cfg], in_shape)  # five 2x2 max-pools: 32x32 at least
        layers = list(cfgs[cfg])
        stack = make_layers(layers, batch_norm=False)
        if c != 3:  # torchvision's stack reads RGB; rebuild its first convolution
            first = stack[0]
            assert isinstance(first, nn.Conv2d)
            stack[0] = nn.Conv2d(c, first.out_channels, 3, padding=1)
        for m in stack.modules():  # in-place ReLUs do not mix with functional_call + vmap
            if isinstance(m, nn.ReLU):
                m.inplace = False
        self.features = stack
        flat = 512 * (h // 32) * (w // 32)
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(flat, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return logits of shape (batch, num_classes)."""
        return self.head(self.features(x))


def vgg11(in_shape: tuple[int, int, int], num_classes: int) -> VGG:
    """VGG11 (configuration "A": 8 conv layers) for 32×32 inputs."""
    return VGG(in_shape, num_classes, "A")


def vgg13(in_shape: tuple[int, int, int], num_classes: int) -> VGG:
    """VGG13 (configuration "B": 10 conv layers) for 32×32 inputs."""
    return VGG(in_shape, num_classes, "B")
