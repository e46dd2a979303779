"""Domain partition: every client draws its data from one domain of a multi-domain set.

Office-Home (Venkateswara et al. 2017) has four domains, Art, Clipart, Product and
Real World, that share the 65 classes but differ in style: taking each domain as
one distribution gives a shift in ``p(x)`` between client groups. (FedeRiCo, Find
Your Friends Sec. 4, reports Office-Home "with 4 different data distributions", but
its text says that for every data set the distributions are disjoint *label*
groups, i.e. scheme ``label_groups``; this scheme is the domain reading.) The data
set must carry a per-sample domain index, ``extras["domain"]`` (``domain.npy`` of
the prepared ``officehome``). Here:

1. The domains are the distinct values of ``extras["domain"]`` (``D`` of them).
2. Clients are assigned to domains by a seeded permutation of
   ``[k % D for k in range(clients)]``, so every domain has a client and the
   numbers of clients per domain differ by at most one (8 clients, 4 domains: 2
   each). This needs ``clients >= D``.
3. Each domain's samples are shuffled by a seeded generator and cut into equal
   shares (sizes differ by at most one) for the domain's clients, so every sample
   is used once and the label mix of every client follows its domain's.

The group column is the client's domain id (the value in ``extras["domain"]``, for
Office-Home an index into :data:`pflrepro.data.sources.officehome.OFFICEHOME_DOMAINS`).
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

MISSING_DOMAINS = "scheme domains needs a data set with domain ids, e.g. officehome"


@register_partitioner
@dataclass(frozen=True, kw_only=True)
class DomainsPartitioner(Partitioner):
    """Clients spread evenly over the domains; each takes an equal share of its domain."""

    scheme: ClassVar[str] = "domains"

    def assign(self, labels: np.ndarray, num_classes: int, seed: int, *,
               extras: Mapping[str, np.ndarray] | None = None) -> Assignment:
        """Assign clients to domains, then split each domain's samples among its clients."""
        domain = require_extra(extras, "domain", len(labels), MISSING_DOMAINS)
        if domain.size and domain.min() < 0:
            raise ValueError("domains: domain ids must be >= 0")
        ids = np.unique(domain)
        if self.clients < len(ids):
            raise ValueError(f"domains: {len(ids)} domains need at least {len(ids)} clients, "
                             f"got {self.clients}")
        client_rng = numpy_generator(seed, SETUP_ROUND, NO_CLIENT, "partition:domains:clients")
        client_domain = ids[client_rng.permutation(np.arange(self.clients) % len(ids))]

        indices: list[np.ndarray] = [np.empty(0, dtype=np.int64)] * self.clients
        for d in ids:
            members = np.flatnonzero(client_domain == d)
            pool = np.flatnonzero(domain == d)
            if len(pool) < 2 * len(members):
                raise ValueError(f"domains: domain {d} has {len(pool)} samples, too few for "
                                 f"{len(members)} clients with 2 each")
            rng = numpy_generator(seed, SETUP_ROUND, int(d), "partition:domains:samples")
            for client, part in zip(members, np.array_split(rng.permutation(pool), len(members)),
                                    strict=True):
                indices[client] = np.sort(part)
        return Assignment(indices=indices, groups=[int(d) for d in client_domain])
