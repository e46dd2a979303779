"""Small image classifiers used across the experiments."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn


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
