"""Federated algorithms, one module each, registered by name in :data:`ALGORITHMS`."""

from pflrepro.algorithms import fedavg, fedavg_plus, federico, local  # noqa: F401 (register)
from pflrepro.algorithms.base import ALGORITHMS, Algorithm, get_algorithm

__all__ = ["ALGORITHMS", "Algorithm", "get_algorithm"]
