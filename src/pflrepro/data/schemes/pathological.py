"""Pathological non-IID partition: label-sorted shards (McMahan et al. 2017).

McMahan et al. (2017, FedAvg) sort the training samples by label, cut them into
``2 * clients`` shards and give every client two shards, so most clients see only
two labels; FedAMP (Huang et al. 2021) uses this as its "pathological non-IID"
setting. Here:

1. Samples are shuffled by a seeded generator and then stably sorted by label, so
   each shard is a random subset of its label(s), not a run of the file order.
2. The sorted samples are cut into ``clients * classes_per_client`` shards whose
   sizes differ by at most one.
3. A seeded permutation of the shards is dealt out, ``classes_per_client`` shards
   per client.
4. A bounded repair pass: for every shard of a client that shares a label with
   another of its shards, the first shard (in the permuted order) of another client
   whose swap removes the clash on both sides is swapped in. A swap never creates a
   clash, so each swap lowers the number of clashes; when no such swap exists the
   client keeps fewer distinct labels. Hence every client holds exactly
   ``classes_per_client`` labels whenever one swap per clash suffices (always in
   practice with single-label shards and enough labels), which the raw random draw
   does not ensure.

Shards can straddle two labels when label counts are not multiples of the shard
size; a client then holds more labels. The group column is ``-1``: the scheme
defines no distributions shared by clients.
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
class PathologicalPartitioner(Partitioner):
    """Label-sorted shards, ``classes_per_client`` per client, drawn by a seeded permutation."""

    scheme: ClassVar[str] = "pathological"
    docs: ClassVar[Mapping[str, str]] = {
        "classes_per_client": "Shards (hence labels, typically) per client; "
                              "the data is cut into clients * classes_per_client shards.",
    }

    label_bounded: ClassVar[tuple[str, ...]] = ("classes_per_client",)

    classes_per_client: int = 2

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.classes_per_client < 1:
            raise ValueError(f"pathological: classes_per_client must be >= 1, "
                             f"got {self.classes_per_client}")

    def assign(self, labels: np.ndarray, num_classes: int, seed: int, *,
               extras: Mapping[str, np.ndarray] | None = None) -> Assignment:
        """Cut label-sorted samples into shards and deal them to clients."""
        if self.classes_per_client > num_classes:
            raise ValueError(f"pathological: classes_per_client ({self.classes_per_client}) "
                             f"exceeds the number of labels ({num_classes})")
        n_shards = self.clients * self.classes_per_client
        if self.classes_per_client * (len(labels) // n_shards) < 2:
            raise ValueError(f"pathological: {len(labels)} samples in {n_shards} shards leave "
                             f"some client with fewer than 2 samples")
        rng = numpy_generator(seed, SETUP_ROUND, NO_CLIENT, "partition:pathological")
        order = rng.permutation(len(labels))
        order = order[np.argsort(labels[order], kind="stable")]
        shards = np.array_split(order, n_shards)
        shard_labels = [frozenset(np.unique(labels[s]).tolist()) for s in shards]
        deal = rng.permutation(n_shards).reshape(self.clients, self.classes_per_client)
        separate_labels(deal, shard_labels)
        indices = [np.sort(np.concatenate([shards[s] for s in row])) for row in deal]
        return Assignment(indices=indices, groups=[-1] * self.clients)


def _clashes(row: np.ndarray, pos: int, shard_labels: list[frozenset[int]],
             shard: int | None = None) -> bool:
    """Whether ``shard`` (default ``row[pos]``) shares a label with the other shards of ``row``."""
    own = shard_labels[row[pos] if shard is None else shard]
    return any(own & shard_labels[s] for i, s in enumerate(row) if i != pos)


def separate_labels(deal: np.ndarray, shard_labels: list[frozenset[int]]) -> None:
    """Swap shards between rows of ``deal`` (in place) so rows' shards share no label.

    One pass over all (row, position) pairs, each trying every other shard once:
    at most ``n_shards ** 2`` checks, no retry loop.
    """
    rows, width = deal.shape
    for r in range(rows):
        for p in range(width):
            if not _clashes(deal[r], p, shard_labels):
                continue
            for r2 in range(rows):
                if r2 == r:
                    continue
                p2 = next((q for q in range(width)
                           if not _clashes(deal[r], p, shard_labels, deal[r2, q])
                           and not _clashes(deal[r2], q, shard_labels, deal[r, p])), None)
                if p2 is not None:
                    deal[r, p], deal[r2, p2] = deal[r2, p2], deal[r, p]
                    break
