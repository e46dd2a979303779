"""Label-group partition: clients share a distribution iff they share a label group.

FedeRiCo (Find Your Friends, Sec. 4) splits the labels into disjoint groups, treats
each group as one data distribution and lets each client sample its local data from
one group; FedEM (Marfoq et al. 2021) builds a similar split in which the clients'
shares of a group's samples follow a Dirichlet draw. This scheme implements both:

1. The label set ``0 .. num_classes-1`` is shuffled by a seeded generator and cut
   into ``groups`` contiguous runs whose sizes differ by at most one (10 labels, 3
   groups: 4/3/3).
2. Clients are assigned to groups (:func:`assign_clients`), by ``assignment``:

   * ``"random"`` (default): a seeded permutation of the clients gives its first
     ``groups`` clients one group each (client ``perm[g]`` to group ``g``), so every
     group has a client; each of the other ``clients - groups`` clients then joins a
     group drawn uniformly at random, independently. Group sizes vary between split
     seeds (8 clients, 4 groups: sizes such as 3/1/2/2 or 4/2/1/1), as in FedeRiCo's
     figures (Fig. 3: three clients of one distribution and one client alone; Fig. 4:
     five clients from two of four distributions), which its text calls a
     "particular random split".
   * ``"balanced"``: a seeded permutation of ``[k % groups for k in range(clients)]``,
     so group sizes differ by at most one (8 clients, 4 groups: 2 clients per group).

   Both draw from one generator derived from the split seed alone (purpose
   ``partition:label_groups:clients``), so a split seed gives the same assignment
   on every machine.
3. The samples of a group are shuffled and divided among its clients: with
   ``alpha == 0`` into near-equal parts; with ``alpha > 0`` every client first gets
   two samples (so the shared train/test split gives it one of each) and the other
   samples go to the group's clients by a multinomial draw with probabilities
   ``p ~ Dir(alpha)`` over the group's clients (FedEM's variant; sizes become
   unequal, labels stay within the group).

Client sizes, by ``sizes`` (the text does not state them; FedeRiCo Sec. 4 says only
that "each client samples from one distribution to form its local data"):

* ``"by_group"`` (default): every sample of a label in some group is used, so the whole
  data set is used and a client's size is its group's samples over its group's
  clients: sizes follow the random group sizes (CIFAR-10, 2 groups, 8 clients, split
  seeds 0-4: 3,428 to 24,000 training rows, up to 7 times apart within a split; one
  client can carry half of the size-weighted metric). This is FedEM's split (Marfoq et
  al. 2021, whose settings FedeRiCo follows: each cluster's "samples are partitioned
  across clients", the whole data set divided) with each label group's samples going
  to its own clients, and it agrees with the text weighting accuracies "by local
  dataset sizes" (measurements: docs/methods/federico.md).
* ``"equal"``: every client gets the same number of rows, ``min_g ⌊n_g / m_g⌋`` (n_g
  samples, m_g clients of group g), a random subset of its group's samples (alpha
  must be 0); the rest of the data set is left out.

The group column is the client's group id (index of its label run). A group's
samples must give each of its clients ``MIN_PER_CLIENT``; with ``"random"`` a group
can get many clients, and a split seed for which one has too few samples fails with
an error naming the group, its clients and the seed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from pflrepro.choices import require_choice
from pflrepro.data.partition import Assignment, Partitioner, register_partitioner
from pflrepro.seeding import NO_CLIENT, SETUP_ROUND, numpy_generator

#: Samples every client gets before the Dirichlet shares are drawn (alpha > 0).
MIN_PER_CLIENT = 2
#: Values of :attr:`LabelGroupsPartitioner.assignment`.
ASSIGNMENTS = ("random", "balanced")
#: Values of :attr:`LabelGroupsPartitioner.sizes`.
SIZES = ("by_group", "equal")


def assign_clients(clients: int, groups: int, assignment: str,
                   rng: np.random.Generator) -> np.ndarray:
    """Group id (``0 .. groups-1``) of each client; every group gets a client.

    ``"random"``: ``perm = rng.permutation(clients)``; client ``perm[g]`` joins group
    ``g`` for ``g < groups``, and clients ``perm[groups:]`` join groups
    ``rng.integers(groups, size=clients - groups)``. ``"balanced"``:
    ``rng.permutation(arange(clients) % groups)`` (sizes differ by at most one).
    """
    require_choice(assignment, ASSIGNMENTS, "label_groups: assignment")
    if not 1 <= groups <= clients:
        raise ValueError(f"label_groups: need 1 <= groups <= clients, got {groups} groups "
                         f"and {clients} clients")
    if assignment == "balanced":
        return rng.permutation(np.arange(clients) % groups)
    perm = rng.permutation(clients)
    client_group = np.empty(clients, dtype=np.int64)
    client_group[perm[:groups]] = np.arange(groups)
    client_group[perm[groups:]] = rng.integers(groups, size=clients - groups)
    return client_group


@register_partitioner
@dataclass(frozen=True, kw_only=True)
class LabelGroupsPartitioner(Partitioner):
    """``groups`` disjoint label groups; each client draws its data from one group."""

    scheme: ClassVar[str] = "label_groups"
    docs: ClassVar[Mapping[str, str]] = {
        "groups": "Number of disjoint label groups (data distributions); <= classes, clients.",
        "alpha": "0: equal shares of a group's samples; > 0: Dirichlet(alpha) shares "
                 "over the group's clients (FedEM).",
        "sizes": "Client sizes: 'by_group' (default; a group's samples divided among its "
                 "clients, the whole data set used, sizes follow the group sizes as in "
                 "FedEM's split) or 'equal' (every client min_g floor(n_g / m_g) rows of "
                 "its group's samples; alpha 0 only).",
        "assignment": "How clients join groups: 'random' (default; one random client per "
                      "group, the others to uniformly random groups, so group sizes vary "
                      "with the split seed, as in FedeRiCo's figures) or 'balanced' "
                      "(sizes differ by at most one).",
    }

    label_bounded: ClassVar[tuple[str, ...]] = ("groups",)
    #: ``sizes`` at its default adds nothing to the id: a ``by_group`` partition keeps
    #: the id (and the stored results) of a config that does not name it.
    omitted_at_default: ClassVar[Mapping[str, str]] = {"sizes": "by_group"}

    groups: int
    alpha: float = 0.0
    assignment: str = "random"
    sizes: str = "by_group"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.groups < 1:
            raise ValueError(f"label_groups: groups must be >= 1, got {self.groups}")
        if self.groups > self.clients:
            raise ValueError(f"label_groups: more groups ({self.groups}) than clients "
                             f"({self.clients}); every group needs a client")
        if not (np.isfinite(self.alpha) and self.alpha >= 0.0):
            raise ValueError(f"label_groups: alpha must be 0 (equal shares) or > 0, "
                             f"got {self.alpha}")
        require_choice(self.assignment, ASSIGNMENTS, "label_groups: assignment")
        require_choice(self.sizes, SIZES, "label_groups: sizes")
        if self.sizes == "equal" and self.alpha != 0.0:
            raise ValueError("label_groups: sizes 'equal' needs alpha 0 (Dirichlet shares "
                             "are unequal by design)")

    def assign(self, labels: np.ndarray, num_classes: int, seed: int, *,
               extras: Mapping[str, np.ndarray] | None = None) -> Assignment:
        """Split labels into groups, clients into groups, then each group's samples."""
        if self.groups > num_classes:
            raise ValueError(f"label_groups: more groups ({self.groups}) than labels "
                             f"({num_classes})")
        if labels.size and not 0 <= labels.min() <= labels.max() < num_classes:
            raise ValueError(f"label_groups: labels must lie in 0..{num_classes - 1}")
        label_rng = numpy_generator(seed, SETUP_ROUND, NO_CLIENT, "partition:label_groups:labels")
        label_sets = np.array_split(label_rng.permutation(num_classes), self.groups)
        client_rng = numpy_generator(seed, SETUP_ROUND, NO_CLIENT, "partition:label_groups:clients")
        client_group = assign_clients(self.clients, self.groups, self.assignment, client_rng)

        indices: list[np.ndarray] = [np.empty(0, dtype=np.int64)] * self.clients
        pools = [np.flatnonzero(np.isin(labels, label_set)) for label_set in label_sets]
        per_client = min(len(pool) // max(1, int((client_group == g).sum()))
                         for g, pool in enumerate(pools))
        for g, (label_set, pool) in enumerate(zip(label_sets, pools, strict=True)):
            members = np.flatnonzero(client_group == g)
            if len(pool) < MIN_PER_CLIENT * len(members):
                raise ValueError(
                    f"label_groups: group {g} (labels {sorted(label_set.tolist())}) has "
                    f"{len(pool)} samples, too few for its {len(members)} of {self.clients} "
                    f"clients with {MIN_PER_CLIENT} each (assignment {self.assignment!r}, "
                    f"split seed {seed}); use more samples (max_samples), fewer clients "
                    f"or groups, or assignment 'balanced'")
            rng = numpy_generator(seed, SETUP_ROUND, g, "partition:label_groups:samples")
            pool = rng.permutation(pool)
            if self.sizes == "equal":
                pool = pool[:per_client * len(members)]
            sizes = self._sizes(len(pool), len(members), rng)
            for client, part in zip(members, np.split(pool, np.cumsum(sizes)[:-1]), strict=True):
                indices[client] = np.sort(part)
        return Assignment(indices=indices, groups=[int(g) for g in client_group])

    def _sizes(self, n: int, m: int, rng: np.random.Generator) -> np.ndarray:
        """Sizes of ``m`` clients sharing ``n`` samples (equal, or Dirichlet shares)."""
        if self.alpha == 0.0:
            return np.array([len(p) for p in np.array_split(np.arange(n), m)])
        p = np.nan_to_num(rng.dirichlet(np.full(m, self.alpha)), nan=0.0)
        p = p / p.sum() if p.sum() > 0 else np.full(m, 1.0 / m)
        return MIN_PER_CLIENT + rng.multinomial(n - MIN_PER_CLIENT * m, p)
