"""Rotation partition: clients in groups that see the images turned by the group's angle.

Ghosh et al. (2020, IFCA, "rotated MNIST") and FedMix (Reisser et al. 2021,
experiments: rotated MNIST for non-i.i.d.-ness in the input, a different ``p(x|s)``
per shard) give each client IID samples and rotate all of a client's images by one of a few
angles, so clients sharing an angle share a distribution. Here:

1. Clients are assigned to groups by a seeded permutation of
   ``[k % groups for k in range(clients)]``, so group sizes differ by at most one
   and every group has a client (20 clients, 4 groups: 5 clients per group).
2. All samples are shuffled by a seeded generator and cut into ``clients`` parts
   whose sizes differ by at most one (an IID split, as :mod:`.iid`).
3. Every row of client ``k`` gets ``rotation = angles[group of k]`` (``int16``
   degrees); the engine turns that row's image counter-clockwise by
   ``rotation / 90`` quarter turns (``torch.rot90`` over H, W).

Only multiples of 90 degrees in ``[0, 360)`` are allowed: quarter turns of a square
image are exact pixel permutations, with no interpolation or cropped corners. The
angles must be distinct (one distribution per group) and there is one per group.
The group column is the client's group id (index into ``angles``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from pflrepro.data.partition import Assignment, Partitioner, register_partitioner
from pflrepro.seeding import NO_CLIENT, SETUP_ROUND, numpy_generator


@register_partitioner
@dataclass(frozen=True, kw_only=True)
class RotationPartitioner(Partitioner):
    """IID samples; each client's images are rotated by its group's angle."""

    scheme: ClassVar[str] = "rotation"
    docs: ClassVar[Mapping[str, str]] = {
        "groups": "Number of angle groups (distributions); <= clients, one angle each.",
        "angles": "Rotation of each group in degrees: distinct multiples of 90 in [0, 360), "
                  "one per group.",
    }

    groups: int = 4
    angles: tuple[int, ...] = (0, 90, 180, 270)

    def group_names(self) -> tuple[str, ...]:
        """Each group's angle: ``rotated 90°``."""
        return tuple(f"rotated {a}°" for a in self.angles[:self.groups])

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "angles", _int_tuple(self.angles, "rotation: angles"))
        if self.groups < 1:
            raise ValueError(f"rotation: groups must be >= 1, got {self.groups}")
        if self.groups > self.clients:
            raise ValueError(f"rotation: more groups ({self.groups}) than clients "
                             f"({self.clients}); every group needs a client")
        bad = [a for a in self.angles if a % 90 != 0 or not 0 <= a < 360]
        if bad:
            raise ValueError(f"rotation: angles must be multiples of 90 in [0, 360) "
                             f"(0, 90, 180, 270), got {bad}")
        if len(set(self.angles)) != len(self.angles):
            raise ValueError(f"rotation: angles must be distinct, got {list(self.angles)}")
        if len(self.angles) != self.groups:
            raise ValueError(f"rotation: {self.groups} groups need {self.groups} angles, "
                             f"got {len(self.angles)} ({list(self.angles)})")

    def assign(self, labels: np.ndarray, num_classes: int, seed: int, *,
               extras: Mapping[str, np.ndarray] | None = None) -> Assignment:
        """Assign clients to angle groups and split the samples IID among clients."""
        n = len(labels)
        if n < 2 * self.clients:
            raise ValueError(f"rotation: {n} samples cannot give {self.clients} clients "
                             f"two samples each")
        client_rng = numpy_generator(seed, SETUP_ROUND, NO_CLIENT, "partition:rotation:clients")
        client_group = client_rng.permutation(np.arange(self.clients) % self.groups)
        rng = numpy_generator(seed, SETUP_ROUND, NO_CLIENT, "partition:rotation:samples")
        indices = [np.sort(p) for p in np.array_split(rng.permutation(n), self.clients)]
        rotation = [np.full(len(idx), self.angles[g], dtype=np.int16)
                    for idx, g in zip(indices, client_group, strict=True)]
        return Assignment(indices=indices, groups=[int(g) for g in client_group],
                          columns={"rotation": rotation})


def _int_tuple(values: object, what: str) -> tuple[int, ...]:
    """``values`` (a list or tuple from the config) as a tuple of Python ints."""
    if isinstance(values, (str, bytes)) or not isinstance(values, (list, tuple)):
        raise ValueError(f"{what} must be a list of integers, got {values!r}")
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise ValueError(f"{what} must be integers, got {v!r}")
        out.append(int(v))
    return tuple(out)
