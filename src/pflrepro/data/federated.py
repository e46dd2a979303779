"""A run's data on the device: one normalised tensor, clients as index tensors into it.

The whole data set stays resident (no per-round disk reads). The partition table's
optional per-row columns transform rows as they are loaded: ``rotation`` turns
images, ``target`` relabels them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from pflrepro.data.store import ArrayDataset
from pflrepro.data.transforms import partition_labels, per_used_row
from pflrepro.models.surgery import to_channels_last

__all__ = ["FederatedData"]


@dataclass(frozen=True)
class FederatedData:
    """The data set on the device plus each client's train/test indices."""

    x: torch.Tensor  # (N, C, H, W) float32, normalised
    y: torch.Tensor  # (N,) int64
    train: tuple[torch.Tensor, ...]  # per client, indices into x
    test: tuple[torch.Tensor, ...]
    groups: tuple[int, ...]  # per client distribution id (-1: none)
    num_classes: int
    #: The unlabeled public set (distillation), normalised like ``x``; None without one.
    public: torch.Tensor | None = None

    @property
    def num_clients(self) -> int:
        """Number of clients K."""
        return len(self.train)

    @classmethod
    def build(cls, dataset: ArrayDataset, partition: pd.DataFrame, device: torch.device,
              public: np.ndarray | None = None) -> FederatedData:
        """Normalise the images and turn the partition table into index tensors.

        Optional per-row columns of the partition table transform their data-set row:
        ``rotation`` (degrees, a multiple of 90) turns the image counter-clockwise by
        ``rotation / 90`` quarter turns (``torch.rot90`` over H, W; square images only)
        and ``target`` replaces the row's label. A data-set row listed twice must carry
        the same values both times (partitioners use each row once).

        ``public`` (raw images of the unlabeled public set, any data set of the same
        image shape) is normalised with the clients' data set's statistics, as the
        clients' models see their own inputs.
        """
        meta = dataset.meta
        index = partition["index"].to_numpy()
        used, first, inverse = np.unique(index, return_index=True, return_inverse=True)
        x = _scaled(np.asarray(dataset.x[used]), meta.max_value)
        if "rotation" in partition:
            x = _rotate(x, per_used_row(partition, "rotation", first, inverse))
        x = _standardised(x, meta.mean, meta.std, device)
        public_x = None
        if public is not None:
            if tuple(public.shape[1:]) != tuple(dataset.x.shape[1:]):
                raise ValueError(f"the public set's images are {tuple(public.shape[1:])}, the "
                                 f"clients' {tuple(dataset.x.shape[1:])}: they must match")
            public_x = _standardised(_scaled(public, meta.max_value), meta.mean, meta.std,
                                     device)
        labels = partition_labels(dataset.y[:], partition, meta.num_classes)[used]
        y = torch.from_numpy(labels).to(device)
        # remap data set rows to rows of the resident tensor
        position = pd.Series(np.arange(len(used)), index=used)
        clients = int(partition["client"].max()) + 1
        train, test, groups = [], [], []
        for k in range(clients):
            rows = partition[partition["client"] == k]
            if rows.empty:
                raise ValueError(f"partition has no samples for client {k}")
            for split, out in (("train", train), ("test", test)):
                idx = position[rows.loc[rows["split"] == split, "index"].to_numpy()].to_numpy()
                out.append(torch.as_tensor(np.sort(idx), dtype=torch.long, device=device))
            groups.append(int(rows["group"].iloc[0]))
        return cls(x=x, y=y, train=tuple(train), test=tuple(test), groups=tuple(groups),
                   num_classes=meta.num_classes, public=public_x)


def _scaled(raw: np.ndarray, max_value: float) -> torch.Tensor:
    """One float32 copy of ``raw`` (channels-last for images) divided by ``max_value``."""
    source = torch.from_numpy(raw)
    x = torch.empty(source.shape, dtype=torch.float32,
                    memory_format=torch.channels_last if source.dim() == 4
                    else torch.contiguous_format)
    x.copy_(source)
    return x.div_(max_value)


def _standardised(x: torch.Tensor, mean: tuple[float, ...], std: tuple[float, ...],
                  device: torch.device) -> torch.Tensor:
    """``(x − mean) / std`` per channel, in place, then on ``device`` (channels-last)."""
    m = torch.tensor(mean, dtype=torch.float32).view(1, -1, 1, 1)
    s = torch.tensor(std, dtype=torch.float32).clamp_min(1e-6).view(1, -1, 1, 1)
    x.sub_(m).div_(s)
    return to_channels_last(x.to(device))


def _rotate(x: torch.Tensor, degrees: np.ndarray) -> torch.Tensor:
    """Turn each image ``x[i]`` counter-clockwise by ``degrees[i]`` (multiples of 90)."""
    degrees = degrees.astype(np.int64)
    if np.any(degrees % 90 != 0):
        raise ValueError("partition column 'rotation' must hold multiples of 90 degrees")
    quarters = torch.from_numpy((degrees // 90) % 4)
    if bool((quarters != 0).any()) and x.shape[-1] != x.shape[-2]:
        raise ValueError(f"rotation needs square images, got H x W = "
                         f"{x.shape[-2]} x {x.shape[-1]}")
    for q in (1, 2, 3):
        rows = (quarters == q).nonzero().flatten()
        if len(rows):
            x[rows] = torch.rot90(x[rows], q, dims=(2, 3))
    return x
