"""Natural partition: every client is one writer of FEMNIST (LEAF).

LEAF (Caldas et al. 2018) partitions FEMNIST by writer, about 3 500 of them, and
FedMix (Reisser et al. 2021) uses these writers as its clients: the data are
non-i.i.d. by nature (each writer's style and character mix). The data set must
carry a per-sample writer index, ``extras["writer"]`` (``writer.npy`` of the
prepared ``femnist``). Here:

1. Writers with at least ``min_samples`` samples are eligible (LEAF's ``-k``
   option; at least two so the shared split gives every client a train and a test
   sample).
2. ``clients`` of them are drawn uniformly without replacement by a seeded
   generator, like LEAF's own user sampling (``-s niid``: shuffle the users, take
   them in turn until the wanted amount of data is reached). A random sample keeps
   the spread of writer sizes; taking the largest writers instead would favour
   prolific writers and give every client more data than a typical one has. With
   ``clients`` equal to the number of eligible writers every one of them is used,
   whatever the seed.
3. The chosen writers, in increasing writer index, become clients ``0 ..
   clients-1``; each holds all samples of its writer, split train/test by the shared
   per-client split (``test_fraction``; a per-writer split like LEAF's ``-t sample``).

The group column is ``-1``: every writer is its own distribution.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from pflrepro.data.partition import (
    Assignment,
    Partitioner,
    register_partitioner,
    require_extra,
)
from pflrepro.seeding import NO_CLIENT, SETUP_ROUND, numpy_generator

MISSING_WRITERS = "scheme natural needs a data set with writer ids, e.g. femnist"


@register_partitioner
@dataclass(frozen=True, kw_only=True)
class NaturalPartitioner(Partitioner):
    """``clients`` writers drawn at random; each writer's samples form one client."""

    scheme: ClassVar[str] = "natural"
    docs: ClassVar[Mapping[str, str]] = {
        "min_samples": "Writers with fewer samples are never drawn (>= 2, LEAF's -k).",
    }

    min_samples: int = 2

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.min_samples < 2:
            raise ValueError(f"natural: min_samples must be >= 2 (one train and one test "
                             f"sample), got {self.min_samples}")

    def assign(self, labels: np.ndarray, num_classes: int, seed: int, *,
               extras: Mapping[str, np.ndarray] | None = None) -> Assignment:
        """Draw ``clients`` eligible writers and give each client its writer's samples."""
        writer = require_extra(extras, "writer", len(labels), MISSING_WRITERS)
        if writer.size and writer.min() < 0:
            raise ValueError("natural: writer ids must be >= 0")
        sizes = np.bincount(writer)
        eligible = np.flatnonzero(sizes >= self.min_samples)
        if self.clients > len(eligible):
            raise ValueError(f"natural: {self.clients} clients requested, but only "
                             f"{len(eligible)} writers have >= {self.min_samples} samples")
        rng = numpy_generator(seed, SETUP_ROUND, NO_CLIENT, "partition:natural:writers")
        chosen = np.sort(rng.choice(eligible, size=self.clients, replace=False))
        order = np.argsort(writer, kind="stable")  # samples grouped by writer, in file order
        ends = np.cumsum(sizes)
        indices = [order[ends[w] - sizes[w]:ends[w]].astype(np.int64) for w in chosen]
        return Assignment(indices=indices, groups=[-1] * self.clients)
