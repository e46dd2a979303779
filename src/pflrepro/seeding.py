"""Derivation of every random stream from (seed, round, client, purpose).

No code in this package draws from a global random state: each random choice asks
:func:`derive_seed` for a 63-bit integer built from the experiment seed, the round,
the client and a short purpose tag, and seeds a fresh generator with it. A run
resumed at round ``t`` therefore sees exactly the draws an uninterrupted run sees.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # imported where used: partitioning and the config need no torch
    import torch

#: Round value used for draws that happen before the first round (initialisation).
SETUP_ROUND = -1
#: Client value used for draws that belong to no single client (server, global model).
NO_CLIENT = -1


def derive_seed(seed: int, round_: int, client: int, purpose: str) -> int:
    """Return a 63-bit seed that depends only on its four arguments.

    >>> derive_seed(0, 1, 2, "batches") == derive_seed(0, 1, 2, "batches")
    True
    >>> derive_seed(0, 1, 2, "batches") != derive_seed(0, 1, 3, "batches")
    True
    """
    key = f"{int(seed)}|{int(round_)}|{int(client)}|{purpose}".encode()
    digest = hashlib.blake2b(key, digest_size=8).digest()
    return int.from_bytes(digest, "little") & ((1 << 63) - 1)


def torch_generator(seed: int, round_: int, client: int, purpose: str) -> torch.Generator:
    """Return a CPU ``torch.Generator`` seeded by :func:`derive_seed`."""
    import torch

    gen = torch.Generator(device="cpu")
    gen.manual_seed(derive_seed(seed, round_, client, purpose))
    return gen


def numpy_generator(seed: int, round_: int, client: int, purpose: str) -> np.random.Generator:
    """Return a NumPy ``Generator`` (PCG64) seeded by :func:`derive_seed`."""
    return np.random.default_rng(derive_seed(seed, round_, client, purpose))
