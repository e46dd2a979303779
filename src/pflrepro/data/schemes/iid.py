"""IID partition: a seeded shuffle cut into near-equal parts.

The usual homogeneous baseline of federated learning papers (e.g. McMahan et al.
2017, "IID" setting): every client sees the same label distribution up to sampling
noise, and client sizes differ by at most one sample.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from pflrepro.data.partition import Assignment, Partitioner, register_partitioner
from pflrepro.seeding import NO_CLIENT, SETUP_ROUND, numpy_generator


@register_partitioner
@dataclass(frozen=True)
class IIDPartitioner(Partitioner):
    """Shuffle all samples with a seeded generator and cut them into ``clients`` parts.

    Part sizes differ by at most one. No client has a distribution id (group ``-1``).
    Needs at least two samples per client, so each client gets a train and a test sample.
    """

    scheme: ClassVar[str] = "iid"

    def assign(self, labels: np.ndarray, num_classes: int, seed: int, *,
               extras: Mapping[str, np.ndarray] | None = None) -> Assignment:
        """Return near-equal random parts of ``range(len(labels))``."""
        n = len(labels)
        if n < 2 * self.clients:
            raise ValueError(f"iid: {n} samples cannot give {self.clients} clients "
                             f"two samples each")
        rng = numpy_generator(seed, SETUP_ROUND, NO_CLIENT, "partition:iid")
        parts = np.array_split(rng.permutation(n), self.clients)
        return Assignment(indices=[np.sort(p) for p in parts], groups=[-1] * self.clients)
