"""Which clients take part in a round (``training.client_selection``).

With ``training.client_fraction`` C < 1, m = max(1, round(C·K)) of the K clients train
in round t, drawn without replacement within the round, from the seeded stream
(seed, t, 'participants'). The papers with partial participation say "m clients are
selected with probability p_k without replacement" (PerFed-CKT) or "uniformly at
random" and leave p_k or the order across rounds open; each reading is one function:

* ``uniform``: every m-subset equally likely, rounds independent (p_k = 1/K);
* ``data_size``: m successive draws, each with probability proportional to the
  training-set size n_k among the clients not yet drawn (p_k = n_k / n, the data
  share, as Cho, Wang and Joshi's client-selection papers define p_k); rounds
  independent. Clients with little data rarely train;
* ``shuffled``: random reshuffling across rounds. A pass draws every client once in a
  fresh seeded order before any client is drawn again; a round that opens a pass
  takes the previous pass's last clients and fills up from the new pass, whose order
  puts those clients last (never a client twice in a round). Each client's chance
  per round is still m/K, but no client waits more than two passes, and every
  client has trained by round ceil(K / m). The round's choice depends only on
  (seed, rounds 1..t), so a resumed run draws the same clients.

Every function returns the participants sorted, and all K clients when C = 1.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from pflrepro.seeding import NO_CLIENT, torch_generator

__all__ = ["participants", "round_size"]


def round_size(fraction: float, clients: int) -> int:
    """The number m = max(1, round(C·K)) of clients taking part in a round."""
    return max(1, round(fraction * clients))


def participants(selection: str, fraction: float, sizes: Sequence[int], seed: int,
                 rnd: int) -> list[int]:
    """The clients of round ``rnd`` (1-based) under ``selection``, sorted.

    ``sizes``: each client's training-set size (read by ``data_size`` only).
    """
    k_all = len(sizes)
    if fraction >= 1.0:
        return list(range(k_all))
    m = round_size(fraction, k_all)
    if selection == "uniform":
        gen = torch_generator(seed, rnd, NO_CLIENT, "participants")
        return sorted(torch.randperm(k_all, generator=gen)[:m].tolist())
    if selection == "data_size":
        gen = torch_generator(seed, rnd, NO_CLIENT, "participants")
        weights = torch.tensor([float(n) for n in sizes], dtype=torch.float64)
        if not bool((weights > 0).all()):
            raise ValueError("client_selection data_size: every client needs a training "
                             "sample (a client without one is never drawn)")
        return sorted(torch.multinomial(weights, m, replacement=False,
                                        generator=gen).tolist())
    if selection == "shuffled":
        return shuffled(k_all, m, seed, rnd)
    raise ValueError(f"unknown client_selection {selection!r}")


def shuffled(clients: int, m: int, seed: int, rnd: int) -> list[int]:
    """Round ``rnd``'s m clients under random reshuffling (see the module docstring)."""
    if rnd < 1:
        raise ValueError(f"rounds are 1-based, got {rnd}")
    remaining: list[int] = []  # the current pass's clients not drawn yet, in its order
    chosen: list[int] = []
    for r in range(1, rnd + 1):
        chosen = []
        if len(remaining) < m:  # the pass ends: its last clients, then a new pass
            chosen = remaining
            gen = torch_generator(seed, r, NO_CLIENT, "participants")
            order = torch.randperm(clients, generator=gen).tolist()
            # the clients just taken go last in the new pass: not twice in one round
            remaining = ([k for k in order if k not in chosen]
                         + [k for k in order if k in chosen])
        need = m - len(chosen)
        chosen = chosen + remaining[:need]
        remaining = remaining[need:]
    return sorted(chosen)
