"""What each client sends and receives per round, counted in numbers (float scalars).

Every method reports its traffic as it runs a round: model parameters, logits,
losses, control variates, mixing weights, whatever crosses the network, counted as
the number of scalars, per client and direction: *up* is what the client sends (to
the server or to its peers), *down* what it receives. The engine logs the counts of
every round as the run metrics ``comm_up`` and ``comm_down`` (one row per client and
round, zeros included, so a method that communicates nothing shows zeros rather than
missing rows), and the reports sum them. Scalars rather than bytes: the papers count
parameters, and a float's width is the implementation's choice.

Peer-to-peer methods count a model sent from client j to client i once as j's *up*
and once as i's *down*.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from pflrepro.store import results as R

__all__ = ["Traffic", "size"]


def size(params: Mapping[str, object]) -> int:
    """Scalars in one (unstacked) parameter dict: what sending that model costs."""
    total = 0
    for value in params.values():
        numel = getattr(value, "numel", None)
        total += int(numel()) if callable(numel) else int(np.size(value))
    return total


class Traffic:
    """Per-round counters of the scalars each client sends (up) and receives (down)."""

    def __init__(self, clients: int) -> None:
        self.up = np.zeros(clients, dtype=np.float64)
        self.down = np.zeros(clients, dtype=np.float64)

    def send_up(self, clients: int | Iterable[int], numbers: float) -> None:
        """``clients`` (one or several) each send ``numbers`` scalars this round."""
        for k in _many(clients):
            self.up[k] += numbers

    def send_down(self, clients: int | Iterable[int], numbers: float) -> None:
        """``clients`` (one or several) each receive ``numbers`` scalars this round."""
        for k in _many(clients):
            self.down[k] += numbers

    def exchange(self, clients: int | Iterable[int], up: float, down: float) -> None:
        """Both directions at once (the usual server round: download, then upload)."""
        self.send_up(clients, up)
        self.send_down(clients, down)

    def flush(self, rnd: int, log: R.MetricLog) -> None:
        """Log round ``rnd``'s counts (every client, both directions) and reset them."""
        log.add_per_client(rnd, R.COMM_UP, self.up.tolist())
        log.add_per_client(rnd, R.COMM_DOWN, self.down.tolist())
        self.up[:] = 0.0
        self.down[:] = 0.0


def _many(clients: int | Iterable[int]) -> list[int]:
    if isinstance(clients, (int, np.integer)):
        return [int(clients)]
    return [int(k) for k in clients]
