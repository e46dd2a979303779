"""Pathological non-IID partition: two labels per client by label shards (McMahan et al. 2017).

McMahan et al. (2017, FedAvg) sort the training samples by label, cut them into
``2 * clients`` shards and give every client two shards, "so most clients will only
have examples of two digits"; FedAMP (Huang et al. 2021) names this its "pathological
non-IID" setting, and this project's FedAMP experiments state it as 2 classes per
client. The stored FedAMP text names the setting and defines no construction, so the
number of labels per client is what the setting says; the shards are McMahan's means
to it on MNIST (10 labels, 200 shards), where every shard holds one label. With more
labels than shards (EMNIST-balanced's 47 or CIFAR-100's 100 labels, 20 clients, 40
shards) shards of the label-sorted data straddle labels and a client gets 4-6 labels.
``shards`` names the two readings:

* ``"per_label"`` (default): shards are cut within labels, so every shard holds one
  label and every client holds exactly ``classes_per_client`` labels. The
  ``clients * classes_per_client`` shards are apportioned to the labels in proportion
  to their sample counts by largest remainders (:func:`shard_counts`; ties in a seeded
  random order), at most ``clients`` and at most its sample count per label; a label's
  samples are split into its shards in near-equal parts. With fewer shards than labels
  (the cases above) the labels without a shard are left out, their samples unused.
  When every label has the same count and each label's count divides into its share of
  shards (MNIST-like balanced labels, e.g. 600 samples of 10 labels, 40 shards), the
  shards and hence the partition equal ``"label_sorted"``'s.
* ``"label_sorted"``: McMahan's cut: the label-sorted samples are cut into
  ``clients * classes_per_client`` shards whose sizes differ by at most one, so a shard
  can straddle two or more labels and a client then holds more labels.

Both then:

1. shuffle the samples by a seeded generator and stably sort them by label, so each
   shard is a random subset of its label(s), not a run of the file order;
2. deal a seeded permutation of the shards, ``classes_per_client`` per client;
3. run a bounded repair pass: for every shard of a client that shares a label with
   another of its shards, the first shard (in the permuted order) of another client
   whose swap removes the clash on both sides is swapped in. A swap never creates a
   clash, so each swap lowers the number of clashes; with ``"label_sorted"``, when no
   such swap exists, the client keeps fewer distinct labels. With ``"per_label"`` a deal
   the pass leaves with a clash is replaced by the column-wise deal of the label-sorted
   shards (:func:`column_deal`), which has none because no label has more shards than
   there are clients, with its clients in a seeded random order.

The group column is ``-1``: the scheme defines no distributions shared by clients.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from pflrepro.choices import require_choice
from pflrepro.data.partition import Assignment, Partitioner, register_partitioner
from pflrepro.seeding import NO_CLIENT, SETUP_ROUND, numpy_generator

#: Values of :attr:`PathologicalPartitioner.shards`.
SHARDS = ("per_label", "label_sorted")


@register_partitioner
@dataclass(frozen=True, kw_only=True)
class PathologicalPartitioner(Partitioner):
    """Label shards, ``classes_per_client`` per client, drawn by a seeded permutation."""

    scheme: ClassVar[str] = "pathological"
    docs: ClassVar[Mapping[str, str]] = {
        "classes_per_client": "Shards per client; the data is cut into "
                              "clients * classes_per_client shards. Labels per client "
                              "with shards 'per_label' (exactly), at least this many "
                              "with 'label_sorted' when shards straddle labels.",
        "shards": "'per_label' (default: shards cut within labels, so every client holds "
                  "exactly classes_per_client labels, the setting's two classes per "
                  "client; labels without a shard are left out) or 'label_sorted' "
                  "(McMahan et al.'s cut of the label-sorted data; shards straddle labels "
                  "when there are more labels than shards).",
    }

    label_bounded: ClassVar[tuple[str, ...]] = ("classes_per_client",)

    classes_per_client: int = 2
    shards: str = "per_label"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.classes_per_client < 1:
            raise ValueError(f"pathological: classes_per_client must be >= 1, "
                             f"got {self.classes_per_client}")
        require_choice(self.shards, SHARDS, "pathological: shards")

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
        if self.shards == "label_sorted":
            shards = np.array_split(order, n_shards)
        else:
            rank = numpy_generator(seed, SETUP_ROUND, NO_CLIENT,
                                   "partition:pathological:labels").permutation(num_classes)
            counts = np.bincount(labels, minlength=num_classes)
            per_label = shard_counts(counts, n_shards, self.clients, rank)
            starts = np.concatenate([[0], np.cumsum(counts)])
            shards = [part for label in range(num_classes) if per_label[label]
                      for part in np.array_split(order[starts[label]:starts[label + 1]],
                                                 per_label[label])]
        shard_labels = [frozenset(np.unique(labels[s]).tolist()) for s in shards]
        deal = rng.permutation(n_shards).reshape(self.clients, self.classes_per_client)
        separate_labels(deal, shard_labels)
        if self.shards == "per_label" and any(
                _clashes(row, p, shard_labels) for row in deal for p in range(len(row))):
            deal = column_deal(self.clients, self.classes_per_client)[
                rng.permutation(self.clients)]
        indices = [np.sort(np.concatenate([shards[s] for s in row])) for row in deal]
        if min(len(i) for i in indices) < 2:
            raise ValueError(f"pathological: {len(labels)} samples in {n_shards} single-label "
                             f"shards leave some client with fewer than 2 samples")
        return Assignment(indices=indices, groups=[-1] * self.clients)


def shard_counts(counts: np.ndarray, n_shards: int, cap: int, rank: np.ndarray) -> np.ndarray:
    """Shards per label: ``n_shards`` apportioned to ``counts`` by largest remainders.

    Label ``l``'s quota is ``n_shards * counts[l] / counts.sum()``; each label first gets
    the floor of its quota, then the remaining shards go one at a time to the label whose
    quota exceeds its shards the most (ties: lowest ``rank[l]``). No label gets more
    than ``cap`` (a client holds a label at most once) or more than ``counts[l]`` shards
    (a shard holds a sample at least). Integer arithmetic: quotas are compared as
    ``n_shards * counts[l] - shards[l] * counts.sum()``.
    """
    counts = np.asarray(counts, dtype=np.int64)
    total = int(counts.sum())
    limit = np.minimum(counts, cap)
    if int(limit.sum()) < n_shards:
        raise ValueError(f"pathological: the labels allow at most {int(limit.sum())} "
                         f"single-label shards (at most {cap} per label, one sample each), "
                         f"{n_shards} needed")
    got = np.minimum(n_shards * counts // total, limit)
    while got.sum() < n_shards:
        open_ = np.flatnonzero(got < limit)
        excess = n_shards * counts[open_] - got[open_] * total
        got[open_[np.lexsort((rank[open_], -excess))[0]]] += 1
    return got


def column_deal(clients: int, width: int) -> np.ndarray:
    """Shard ``j`` to client ``j % clients``: consecutive shards go to distinct clients.

    Shards numbered in label order with at most ``clients`` per label never meet a shard
    of their label at one client.
    """
    return np.arange(clients * width).reshape(width, clients).T


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
