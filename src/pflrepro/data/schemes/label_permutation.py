"""Label-permutation partition: client groups that map the same images to permuted labels.

FedMix (Reisser et al. 2021, experiments) tests differences in ``p(y|x, s)`` with
label permutation on CIFAR-10, following Sattler et al. (2019, Clustered FL): clients
in different groups see the same kind of images but name the classes differently,
so no single model fits all groups. Here:

1. Clients are assigned to groups by a seeded permutation of
   ``[k % groups for k in range(clients)]`` (group sizes differ by at most one, every
   group has a client).
2. Group 0 keeps the labels (identity); group ``g >= 1`` gets a permutation
   ``perm_g`` of ``0 .. num_classes-1``, uniformly random from its own seeded stream
   and redrawn (from the same stream, at most :data:`MAX_DRAWS` times) while it
   equals the permutation of an earlier group, so the groups' mappings are distinct.
   ``groups`` may not exceed ``num_classes!``; with 10 classes a redraw is almost never
   needed.
3. All samples are shuffled by a seeded generator and cut into ``clients`` parts
   whose sizes differ by at most one (an IID split, as :mod:`.iid`).
4. Every row of a client in group ``g`` gets ``target = perm_g[label]`` (``int64``);
   the engine trains and evaluates on ``target`` instead of the label, on both the
   client's train and test rows.

The group column is the client's group id.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from pflrepro.data.partition import Assignment, Partitioner, register_partitioner
from pflrepro.seeding import NO_CLIENT, SETUP_ROUND, numpy_generator

#: Draws per group before giving up on a permutation distinct from earlier groups'.
MAX_DRAWS = 1000


@register_partitioner
@dataclass(frozen=True, kw_only=True)
class LabelPermutationPartitioner(Partitioner):
    """IID samples; each client group relabels them by its own permutation of the labels."""

    scheme: ClassVar[str] = "label_permutation"
    docs: ClassVar[Mapping[str, str]] = {
        "groups": "Number of client groups, each with its own label permutation (group 0: "
                  "identity); <= clients.",
    }

    groups: int

    def group_names(self) -> tuple[str, ...]:
        """Group 0 keeps the labels, group g >= 1 is permutation g."""
        return ("labels as given", *(f"label permutation {g}" for g in range(1, self.groups)))

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.groups < 1:
            raise ValueError(f"label_permutation: groups must be >= 1, got {self.groups}")
        if self.groups > self.clients:
            raise ValueError(f"label_permutation: more groups ({self.groups}) than clients "
                             f"({self.clients}); every group needs a client")

    def assign(self, labels: np.ndarray, num_classes: int, seed: int, *,
               extras: Mapping[str, np.ndarray] | None = None) -> Assignment:
        """Draw the groups' permutations, split samples IID, and relabel each client's rows."""
        n = len(labels)
        if labels.size and not 0 <= labels.min() <= labels.max() < num_classes:
            raise ValueError(f"label_permutation: labels must lie in 0..{num_classes - 1}")
        if n < 2 * self.clients:
            raise ValueError(f"label_permutation: {n} samples cannot give {self.clients} "
                             f"clients two samples each")
        perms = self.permutations(num_classes, seed)
        client_rng = numpy_generator(seed, SETUP_ROUND, NO_CLIENT,
                                     "partition:label_permutation:clients")
        client_group = client_rng.permutation(np.arange(self.clients) % self.groups)
        rng = numpy_generator(seed, SETUP_ROUND, NO_CLIENT, "partition:label_permutation:samples")
        indices = [np.sort(p) for p in np.array_split(rng.permutation(n), self.clients)]
        target = [perms[g][np.asarray(labels[idx], dtype=np.int64)]
                  for idx, g in zip(indices, client_group, strict=True)]
        return Assignment(indices=indices, groups=[int(g) for g in client_group],
                          columns={"target": target})

    def permutations(self, num_classes: int, seed: int) -> np.ndarray:
        """``groups x num_classes`` array: row ``g`` maps a label to group ``g``'s target."""
        if num_classes < 1 or self.groups > math.factorial(num_classes):
            raise ValueError(f"label_permutation: {num_classes} labels have "
                             f"{math.factorial(max(num_classes, 0))} permutations, fewer than "
                             f"{self.groups} groups")
        perms = [np.arange(num_classes, dtype=np.int64)]
        seen = {perms[0].tobytes()}
        for g in range(1, self.groups):
            rng = numpy_generator(seed, SETUP_ROUND, g, "partition:label_permutation:labels")
            for _ in range(MAX_DRAWS):
                perm = rng.permutation(num_classes).astype(np.int64)
                if perm.tobytes() not in seen:
                    break
            else:
                raise ValueError(f"label_permutation: no permutation distinct from the "
                                 f"earlier groups' found for group {g} in {MAX_DRAWS} draws "
                                 f"({self.groups} groups, {num_classes} labels)")
            seen.add(perm.tobytes())
            perms.append(perm)
        return np.stack(perms)
