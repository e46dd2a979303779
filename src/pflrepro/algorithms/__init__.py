"""Federated algorithms, one module each, registered by name in :data:`ALGORITHMS`.

Importing this package imports no algorithm module (and so no torch). Names,
summaries and hyperparameters come from :mod:`pflrepro.algorithms.registry`, which
reads them from the methods' source on its first read
(:mod:`pflrepro.algorithms.declarations`); :func:`get_algorithm` imports one
algorithm's module when its class is needed.

Layer (tests/unit/test_layers.py): the methods, on the training core; they may
import :mod:`pflrepro.training`, :mod:`pflrepro.data`, :mod:`pflrepro.models` and
:mod:`pflrepro.store`, nothing above.
"""

from pflrepro.algorithms.base import ALGORITHMS, Algorithm, get_algorithm
from pflrepro.algorithms.registry import INFOS, algorithm_info

__all__ = ["ALGORITHMS", "INFOS", "Algorithm", "algorithm_info", "get_algorithm"]
