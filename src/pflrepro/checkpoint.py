"""Checkpoints of a training run, for resuming after preemption or a time limit.

A checkpoint holds the last finished round, the algorithm's state (a dict of
tensors and numbers), the metric rows logged so far and a fingerprint of the run's
spec. Every random draw of a run derives from (seed, round, client, purpose), so no
generator state is needed: a run resumed after round ``t`` continues exactly as an
uninterrupted one would, and on CPU its results are bit-identical.

Files are written atomically (temporary file, then rename) and read back with
``torch.load(weights_only=True)``; a checkpoint whose fingerprint differs from the
run's (its spec changed since) is ignored and replaced.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pflrepro.io import atomic_path
from pflrepro.results import MetricLog

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)

FORMAT = 1


class Interrupted(RuntimeError):
    """A run stopped on request (SIGTERM) at the end of a round."""


@dataclass(frozen=True)
class Checkpointer:
    """Saves every ``every`` rounds to ``path``; ``fingerprint`` identifies the run."""

    path: Path
    fingerprint: str
    every: int = 10

    def __post_init__(self) -> None:
        if self.every < 1:
            raise ValueError(f"checkpoint interval must be >= 1 round, got {self.every}")

    def due(self, rnd: int) -> bool:
        """Whether round ``rnd`` ends with a checkpoint."""
        return rnd % self.every == 0

    def save(self, rnd: int, state: dict[str, Any], metrics: MetricLog) -> None:
        """Write the checkpoint of the state after round ``rnd``, atomically."""
        payload = {
            "format": FORMAT, "fingerprint": self.fingerprint, "round": int(rnd),
            "state": state,
            "metrics": {"rounds": metrics.rounds, "clients": metrics.clients,
                        "peers": metrics.peers, "metrics": metrics.metrics,
                        "values": metrics.values},
        }
        import torch

        with atomic_path(self.path) as tmp:
            torch.save(payload, tmp)
        log.info("checkpoint after round %d -> %s", rnd, self.path)

    def load(self, device: torch.device) -> tuple[int, dict[str, Any], MetricLog] | None:
        """The saved (round, state, metrics), or None when there is no usable checkpoint."""
        if not self.path.exists():
            return None
        import torch

        payload = torch.load(self.path, map_location=device, weights_only=True)
        if payload.get("format") != FORMAT or payload.get("fingerprint") != self.fingerprint:
            log.warning("ignoring %s: it belongs to another run spec", self.path)
            return None
        m = payload["metrics"]
        metrics = MetricLog(rounds=list(m["rounds"]), clients=list(m["clients"]),
                            peers=list(m["peers"]), metrics=list(m["metrics"]),
                            values=list(m["values"]))
        log.info("resuming after round %d from %s", payload["round"], self.path)
        return int(payload["round"]), payload["state"], metrics

    def remove(self) -> None:
        """Delete the checkpoint (once the run's results are written)."""
        self.path.unlink(missing_ok=True)
