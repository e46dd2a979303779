"""Federated algorithms, one module each, registered by name in :data:`ALGORITHMS`."""

from pflrepro.algorithms import (  # noqa: F401 (importing registers each algorithm)
    fedavg,
    fedavg_plus,
    fedem,
    federico,
    local,
)
from pflrepro.algorithms.base import ALGORITHMS, Algorithm, get_algorithm

__all__ = ["ALGORITHMS", "Algorithm", "get_algorithm"]
