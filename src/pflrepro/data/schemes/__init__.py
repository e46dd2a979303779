"""Partition schemes; importing this package registers every scheme."""

from pflrepro.data.schemes import (
    dirichlet,
    domains,
    iid,
    label_groups,
    label_permutation,
    natural,
    pathological,
    practical,
    rotation,
)

__all__ = ["dirichlet", "domains", "iid", "label_groups", "label_permutation", "natural",
           "pathological", "practical", "rotation"]
