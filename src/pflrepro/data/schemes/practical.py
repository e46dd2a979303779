"""Practical non-IID partition: client groups with dominant classes (FedAMP).

FedAMP (Huang et al. 2021) calls this its "practical non-IID" setting: clients form
groups, each group has its own set of dominant classes, disjoint from the other
groups', and each client takes most of its data (80 % there) from its group's
dominant classes and the rest from the remaining classes. Here:

1. Clients are assigned to groups by a seeded permutation of
   ``[k % groups for k in range(clients)]`` (group sizes differ by at most one).
2. The classes are shuffled by a seeded generator and cut into ``groups`` disjoint
   dominant sets whose sizes differ by at most one.
3. Every client gets the same number ``n`` of samples: ``d = round(dominant_share *
   n)`` spread evenly over its group's dominant classes and ``n - d`` spread evenly
   over all other classes. The leftover units of these uneven splits go, client by
   client, to the classes with the most samples to spare (after all even parts and
   the expected leftovers of later clients), which keeps the demand balanced. With
   ``samples_per_client = 0``, ``n`` is found by bisection as the largest size whose
   demand every class can meet (demand grows with ``n`` up to that rounding, and the
   chosen ``n`` always fits). With CIFAR-10, 20 clients, 5 groups and 0.8 that is
   2 500: the whole data set.
4. Each class's samples are shuffled by a seeded generator and handed out in client
   order, so every sample is used at most once.

The group column is the client's group id.
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
class PracticalPartitioner(Partitioner):
    """Groups of clients, each with disjoint dominant classes giving ``dominant_share`` of data."""

    scheme: ClassVar[str] = "practical"
    docs: ClassVar[Mapping[str, str]] = {
        "groups": "Number of client groups, each with its own disjoint dominant classes (>= 2).",
        "dominant_share": "Share of each client's samples from its group's dominant classes.",
        "samples_per_client": "Samples per client; 0 means as many as the data allows, equally.",
    }

    label_bounded: ClassVar[tuple[str, ...]] = ("groups",)

    groups: int
    dominant_share: float = 0.8
    samples_per_client: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.groups < 2:
            raise ValueError(f"practical: groups must be >= 2 (so that every group has "
                             f"non-dominant classes), got {self.groups}")
        if self.groups > self.clients:
            raise ValueError(f"practical: more groups ({self.groups}) than clients "
                             f"({self.clients})")
        if not 0.0 < self.dominant_share <= 1.0:
            raise ValueError(f"practical: dominant_share must lie in (0, 1], "
                             f"got {self.dominant_share}")
        if self.samples_per_client != 0 and self.samples_per_client < 2:
            raise ValueError(f"practical: samples_per_client must be 0 (as many as possible) "
                             f"or >= 2, got {self.samples_per_client}")

    def assign(self, labels: np.ndarray, num_classes: int, seed: int, *,
               extras: Mapping[str, np.ndarray] | None = None) -> Assignment:
        """Pick groups and dominant classes, size the clients, then hand out samples."""
        if self.groups > num_classes:
            raise ValueError(f"practical: more groups ({self.groups}) than classes "
                             f"({num_classes})")
        if labels.size and not 0 <= labels.min() <= labels.max() < num_classes:
            raise ValueError(f"practical: labels must lie in 0..{num_classes - 1}")
        rng = numpy_generator(seed, SETUP_ROUND, NO_CLIENT, "partition:practical")
        client_group = rng.permutation(np.arange(self.clients) % self.groups)
        dominant = np.array_split(rng.permutation(num_classes), self.groups)
        is_dominant = np.zeros((self.groups, num_classes), dtype=bool)
        for g, classes in enumerate(dominant):
            is_dominant[g, classes] = True
        masks = is_dominant[client_group]  # clients x classes

        available = np.bincount(labels, minlength=num_classes)
        n = self.samples_per_client or self._largest_n(masks, available)
        table = self._demand(masks, n, available)
        if n < 2 or np.any(table.sum(axis=0) > available):
            raise ValueError(f"practical: the data cannot give {self.clients} clients "
                             f"{n} samples each with dominant_share {self.dominant_share} "
                             f"(largest possible: {self._largest_n(masks, available)})")

        sample_rng = numpy_generator(seed, SETUP_ROUND, NO_CLIENT, "partition:practical:samples")
        parts: list[list[np.ndarray]] = [[] for _ in range(self.clients)]
        for c in range(num_classes):
            pool = sample_rng.permutation(np.flatnonzero(labels == c))
            ends = np.cumsum(table[:, c])
            for client in range(self.clients):
                parts[client].append(pool[ends[client] - table[client, c]:ends[client]])
        indices = [np.sort(np.concatenate(p)) for p in parts]
        return Assignment(indices=indices, groups=[int(g) for g in client_group])

    def _demand(self, masks: np.ndarray, n: int, available: np.ndarray) -> np.ndarray:
        """Clients x classes counts when every client gets ``n`` samples."""
        d = int(np.floor(self.dominant_share * n + 0.5))
        parts = [(np.flatnonzero(mask), d) for mask in masks]
        parts += [(np.flatnonzero(~mask), n - d) for mask in masks]
        table = np.zeros(masks.shape, dtype=np.int64)
        for i, (classes, total) in enumerate(parts):  # even base counts first
            table[i % len(masks), classes] += total // len(classes)
        # Then the leftover units, each to the classes with the most samples to spare
        # after the expected leftover claims of the parts not yet served.
        spare = (available - table.sum(axis=0)).astype(float)
        for classes, total in parts:
            spare[classes] -= (total % len(classes)) / len(classes)
        for i, (classes, total) in enumerate(parts):
            spare[classes] += (total % len(classes)) / len(classes)
            extra = classes[np.argsort(-spare[classes], kind="stable")[:total % len(classes)]]
            table[i % len(masks), extra] += 1
            spare[extra] -= 1
        return table

    def _largest_n(self, masks: np.ndarray, available: np.ndarray) -> int:
        """Largest ``n`` whose demand fits ``available`` (0 if none), by bisection."""
        lo, hi = 0, int(available.sum()) // len(masks)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if np.all(self._demand(masks, mid, available).sum(axis=0) <= available):
                lo = mid
            else:
                hi = mid - 1
        return lo

