"""Federated algorithms, one module each, registered by name in :data:`ALGORITHMS`."""

from pflrepro.algorithms import (  # noqa: F401 (importing registers each algorithm)
    apfl,
    clustered_fl,
    fedamp,
    fedavg,
    fedavg_plus,
    fedem,
    federico,
    fedfomo,
    fedprox,
    fedprox_ft,
    heurfedamp,
    local,
    scaffold,
)
from pflrepro.algorithms.base import ALGORITHMS, Algorithm, get_algorithm

__all__ = ["ALGORITHMS", "Algorithm", "get_algorithm"]
