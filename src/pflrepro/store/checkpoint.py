"""Checkpoints of a training run, for resuming after preemption or a time limit.

A checkpoint holds the last finished round, the algorithm's state (a dict of
tensors and numbers), the metric rows logged so far and a fingerprint of the run's
spec. Every random draw of a run derives from (seed, round, client, purpose), so no
generator state is needed: a run resumed after round ``t`` continues exactly as an
uninterrupted one would, and on CPU its results are bit-identical.

Files are written atomically (temporary file, then rename) and end in a fixed-size
trailer, :data:`MAGIC` followed by the SHA-256 of everything before it. The digest
lives inside the checkpoint file rather than in a second file beside it, so the pair
is replaced by one rename: a crash can never leave a checkpoint next to a stale or
missing digest. On loading, the trailer is checked before ``torch.load`` sees a byte,
and the payload is read with ``torch.load(weights_only=True)``.

A checkpoint that does not verify (no trailer: truncated, or written before
checkpoints carried digests; a wrong digest; a payload ``weights_only`` refuses or
that lacks the expected fields) would otherwise fail every rerun the same way. It is
set aside as ``<checkpoint>.corrupt-<n>``, a warning names it and why, and the run
starts again from round 0, which gives the same results as an uninterrupted run. Only
inside a ``results`` folder: a file elsewhere is the user's, and the run stops, naming
it, with nothing moved.
A checkpoint whose fingerprint differs from the run's (its spec changed since) is
ignored and replaced.
"""

from __future__ import annotations

import hashlib
import io
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pflrepro.store.io import atomic_path, set_aside, sha256_file
from pflrepro.store.results import MetricLog

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)

FORMAT = 1
#: Start of the trailer that ends every checkpoint file; the SHA-256 digest follows.
MAGIC = b"PFLCKPT\x01"
#: Bytes in the trailer: the magic and a raw SHA-256 digest.
TRAILER = len(MAGIC) + hashlib.sha256().digest_size


class Interrupted(RuntimeError):
    """A run stopped on request (SIGTERM) at the end of a round."""


class CorruptCheckpoint(ValueError):
    """A checkpoint file that cannot be trusted or read (the message says why)."""


def write_checkpoint_file(path: Path, payload: Any) -> None:
    """``torch.save`` ``payload`` to ``path`` with its digest trailer, atomically."""
    import torch

    with atomic_path(path) as tmp:
        torch.save(payload, tmp)
        digest = bytes.fromhex(sha256_file(tmp))  # the payload is read back from the page cache
        with tmp.open("ab") as fh:
            fh.write(MAGIC + digest)


def read_checkpoint_file(path: Path, device: torch.device | str = "cpu") -> Any:
    """The payload of a checkpoint file, verified against its trailer first.

    Raises :class:`CorruptCheckpoint` when the trailer is missing, the digest does
    not match or ``torch.load(weights_only=True)`` refuses or cannot read the
    payload; an ``OSError`` (the file cannot be opened) passes through.
    """
    payload = verified_payload(path)
    import torch

    try:  # BytesIO shares the bytes object's buffer: no second copy
        return torch.load(io.BytesIO(payload), map_location=device, weights_only=True)
    except Exception as exc:  # unpickling refused, bad archive: not a usable checkpoint
        first_line = (str(exc).strip().splitlines() or [""])[0]
        raise CorruptCheckpoint(f"torch.load(weights_only=True) cannot read it "
                                f"({type(exc).__name__}: {first_line})") from exc


def verified_payload(path: Path) -> bytes:
    """The bytes of a checkpoint file before its trailer, checked against the trailer.

    :class:`CorruptCheckpoint` when the trailer is missing or its digest does not
    match (``pflrepro verify`` checks checkpoints with this, without torch).
    """
    with path.open("rb") as fh:  # read once: what is verified is what is loaded
        size = fh.seek(0, io.SEEK_END)
        fh.seek(max(size - TRAILER, 0))
        trailer = fh.read()
        fh.seek(0)
        payload = fh.read(max(size - TRAILER, 0))
    if size < TRAILER or not trailer.startswith(MAGIC):
        raise CorruptCheckpoint("it has no checksum trailer (truncated, or written before "
                                "checkpoints carried checksums), so it cannot be verified")
    expected, actual = trailer[len(MAGIC):], hashlib.sha256(payload).digest()
    if actual != expected:
        raise CorruptCheckpoint(f"its sha256 is {actual.hex()}, not the {expected.hex()} "
                                "recorded in its trailer")
    return payload


def _in_results(path: Path) -> bool:
    """Whether ``path`` lies in a ``results`` folder (the workflow's, which it may tidy)."""
    return "results" in Path(path).resolve().parent.parts


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
        write_checkpoint_file(self.path, payload)
        log.info("checkpoint after round %d -> %s", rnd, self.path)

    def load(self, device: torch.device) -> tuple[int, dict[str, Any], MetricLog] | None:
        """The saved (round, state, metrics), or None when there is no usable checkpoint.

        A checkpoint that does not verify or cannot be read is set aside as
        ``<path>.corrupt-<n>`` with a warning, and None is returned: the run starts
        again from round 0.
        """
        if not self.path.exists():
            return None
        try:
            payload = read_checkpoint_file(self.path, device)
            if not isinstance(payload, dict):
                raise CorruptCheckpoint(f"it holds a {type(payload).__name__}, not a dict")
            if payload.get("format") != FORMAT or payload.get("fingerprint") != self.fingerprint:
                log.warning("ignoring %s: it belongs to another run spec", self.path)
                return None
            rnd, state, m = int(payload["round"]), payload["state"], payload["metrics"]
            metrics = MetricLog(rounds=list(m["rounds"]), clients=list(m["clients"]),
                                peers=list(m["peers"]), metrics=list(m["metrics"]),
                                values=list(m["values"]))
        except (KeyError, TypeError, ValueError) as exc:  # CorruptCheckpoint is a ValueError
            why = str(exc) if isinstance(exc, CorruptCheckpoint) else (
                f"its payload is malformed ({type(exc).__name__}: {exc})")
            if not _in_results(self.path):  # a file of the user's: never moved nor replaced
                raise CorruptCheckpoint(
                    f"{self.path} is no usable checkpoint ({why}); it lies outside a results "
                    "folder, so nothing was changed: name another --checkpoint file, or "
                    "delete this one") from None
            aside = set_aside(self.path)
            log.warning("checkpoint %s is unusable: %s. Moved it to %s; starting the run "
                        "again from round 0", self.path, why, aside)
            return None
        log.info("resuming after round %d from %s", rnd, self.path)
        return rnd, state, metrics

    def remove(self) -> None:
        """Delete the checkpoint (once the run's results are written)."""
        self.path.unlink(missing_ok=True)
