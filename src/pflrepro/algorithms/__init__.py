"""Federated algorithms, one module each, registered by name in :data:`ALGORITHMS`."""

from pflrepro.algorithms import (  # noqa: F401 (importing registers each algorithm)
    clustered_fl,
    fedavg,
    fedavg_plus,
    fedem,
    federico,
    fedfomo,
    local,
)
from pflrepro.algorithms.base import ALGORITHMS, Algorithm, get_algorithm

__all__ = ["ALGORITHMS", "Algorithm", "get_algorithm"]
