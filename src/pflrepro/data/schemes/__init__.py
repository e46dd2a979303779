"""Partition schemes; importing this package registers every scheme."""

from pflrepro.data.schemes import dirichlet, iid, label_groups, pathological, practical

__all__ = ["dirichlet", "iid", "label_groups", "pathological", "practical"]
