"""Dirichlet label-skew partition with a bounded repair of too-small clients.

For each class, the clients' shares of that class come from a symmetric Dirichlet over
the K clients (Yurochkin et al. 2019, PFNM; Wang et al. 2020, FedMA; the text's
"Dir_K(alpha)"); PerFed-CKT uses this with ``alpha = 0.01`` on CIFAR-10. Small
``alpha`` makes both the label mix and the size of each client very unequal. (Hsu, Qi
and Brown 2019 draw per client over classes, with equal client sizes; the readings are
measured in docs/methods/perfedckt.md#partition-readings.)

Libraries (NIID-Bench, PFLlib, FL-bench, Flower) redraw the whole partition until
the smallest client reaches a threshold. At ``alpha = 0.01`` with more clients than
classes that almost never happens (on CIFAR-10 with 100 clients about 38 clients get
no sample at all in a typical draw), so those loops never end or give up. This
scheme draws once and then repairs, with bounded work:

* **Draw.** For each class ``c`` (in order), ``p ~ Dir(alpha * 1_K)`` over the ``K``
  clients. ``Dir`` with tiny ``alpha`` can return exact zeros, and in principle an
  all-zero or non-finite vector; such a degenerate draw is replaced by its
  ``alpha -> 0`` limit, all of the class on one client chosen uniformly. The class's
  ``n_c`` samples are apportioned by largest remainders (``floor(p * n_c)``, then the
  leftover samples to the largest fractional parts), so counts follow ``p`` exactly
  up to rounding.
* **Repair.** Each client with fewer than ``min_samples`` samples (in client order)
  receives exactly its shortfall, one donor class at a time: if it already holds
  a class, more of that class from the client holding the most of it; otherwise
  the donor's most abundant class from the largest client. A donor never falls
  below ``min_samples``. Each step moves at least one sample, and the total moved is
  the total shortfall (at most ``K * min_samples``): the fewest samples any repair can
  move. While a client is short, some other client holds more than ``min_samples``
  (as ``N >= K * min_samples``), so a donor always exists and the repair ends.

Effect: every one of the ``K`` clients is usable (``>= min_samples >= 2`` samples,
so the shared split gives it a train and a test sample); repaired clients get
``min_samples`` samples of a single class (the most extreme skew), and only a few
dozen of 50 000 samples move, so the size imbalance and label skew of the draw stay.
The group column is ``-1``. Raises :class:`ValueError` only if
``K * min_samples > N``.
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
class DirichletPartitioner(Partitioner):
    """Per-class ``Dir(alpha)`` shares over clients; short clients topped up from big ones."""

    scheme: ClassVar[str] = "dirichlet"
    docs: ClassVar[Mapping[str, str]] = {
        "alpha": "Dirichlet concentration (> 0); smaller means more label and size skew.",
        "min_samples": "Samples every client is topped up to (>= 2) after the single draw.",
    }

    alpha: float
    min_samples: int = 2

    def __post_init__(self) -> None:
        super().__post_init__()
        if not (np.isfinite(self.alpha) and self.alpha > 0.0):
            raise ValueError(f"dirichlet: alpha must be a finite number > 0, got {self.alpha}")
        if self.min_samples < 2:
            raise ValueError(f"dirichlet: min_samples must be >= 2 (one train and one test "
                             f"sample), got {self.min_samples}")

    def assign(self, labels: np.ndarray, num_classes: int, seed: int, *,
               extras: Mapping[str, np.ndarray] | None = None) -> Assignment:
        """Draw the client-by-class count table, repair it, then hand out samples."""
        if labels.size and not 0 <= labels.min() <= labels.max() < num_classes:
            raise ValueError(f"dirichlet: labels must lie in 0..{num_classes - 1}")
        if self.clients * self.min_samples > len(labels):
            raise ValueError(f"dirichlet: {len(labels)} samples cannot give {self.clients} "
                             f"clients {self.min_samples} samples each")
        class_sizes = np.bincount(labels, minlength=num_classes)
        table = self.draw_counts(class_sizes, seed)
        top_up(table, self.min_samples)

        rng = numpy_generator(seed, SETUP_ROUND, NO_CLIENT, "partition:dirichlet:samples")
        parts: list[list[np.ndarray]] = [[] for _ in range(self.clients)]
        for c in range(num_classes):
            pool = rng.permutation(np.flatnonzero(labels == c))
            for client, chunk in enumerate(np.split(pool, np.cumsum(table[:, c])[:-1])):
                parts[client].append(chunk)
        indices = [np.sort(np.concatenate(p)) for p in parts]
        return Assignment(indices=indices, groups=[-1] * self.clients)

    def draw_counts(self, class_sizes: np.ndarray, seed: int) -> np.ndarray:
        """Return the drawn ``clients x classes`` count table, before any repair."""
        rng = numpy_generator(seed, SETUP_ROUND, NO_CLIENT, "partition:dirichlet:draw")
        table = np.zeros((self.clients, len(class_sizes)), dtype=np.int64)
        for c, n_c in enumerate(class_sizes):
            p = rng.dirichlet(np.full(self.clients, float(self.alpha)))
            if not (np.all(np.isfinite(p)) and p.sum() > 0):
                p = np.zeros(self.clients)
                p[rng.integers(self.clients)] = 1.0
            table[:, c] = apportion(int(n_c), p / p.sum())
        return table


def apportion(n: int, p: np.ndarray) -> np.ndarray:
    """Split ``n`` into integer counts proportional to ``p`` (largest remainders)."""
    raw = n * p
    counts = np.floor(raw).astype(np.int64)
    leftover = n - int(counts.sum())
    counts[np.argsort(counts - raw, kind="stable")[:leftover]] += 1
    return counts


def top_up(table: np.ndarray, min_samples: int) -> None:
    """Move samples between rows of ``table`` (in place) until each row has ``min_samples``.

    Moves exactly the total shortfall; donors keep at least ``min_samples``.
    Requires ``table.sum() >= len(table) * min_samples``.
    """
    totals = table.sum(axis=1)
    for client in np.flatnonzero(totals < min_samples):
        while totals[client] < min_samples:
            donor, c = _donor(table, totals, client, min_samples)
            k = min(min_samples - totals[client], table[donor, c], totals[donor] - min_samples)
            table[donor, c] -= k
            table[client, c] += k
            totals[donor] -= k
            totals[client] += k


def _donor(table: np.ndarray, totals: np.ndarray, client: int,
           min_samples: int) -> tuple[int, int]:
    """Pick ``(donor, class)`` for one repair step of ``client``."""
    can_give = totals > min_samples
    can_give[client] = False
    if totals[client] > 0:
        c = int(np.argmax(table[client]))
        holders = np.where(can_give, table[:, c], 0)
        if holders.max() > 0:
            return int(np.argmax(holders)), c
    donor = int(np.argmax(np.where(can_give, totals, -1)))
    return donor, int(np.argmax(table[donor]))
