"""Live progress of a training job: a line per evaluated round, a progress table.

(``pflrepro status``, which reads those lines and tables back for a whole results
directory, is :mod:`pflrepro.inspect.status`.)

A training job (:meth:`pflrepro.training.engine.Engine.run`) reports each round to a
:class:`RoundProgress`. After every evaluated round it logs one line::

    round 12/30: mean acc 0.8123, weighted acc 0.8200, loss 0.5321, elapsed 0:00:14, left ~0:00:21

(mean and test-set-size-weighted client accuracy and the mean client test loss of that
round, the time since training started (data loaded, model built), and the time left
at the mean pace of the rounds this process has run). Every ``flush_every`` rounds it
hands the metrics so far to ``flush``: the workflow's jobs write them, the run's
*progress table*, to ``<run>.partial.parquet`` beside the run's output
(:func:`progress_table_path`), atomically, so the curve of a running job can be read
with ``pandas.read_parquet``; the job deletes it once the run's Parquet is written.
(The word "partial" names the tables of a failed workflow's finished runs,
:mod:`pflrepro.reporting.partial`; the progress table's file keeps the suffix it had
before the two got their own words, which ``pflrepro status`` and ``pflrepro verify``
look for.)
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pflrepro.store import results as R

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger(__name__)

#: Suffix of the progress table written beside a running job's output.
PROGRESS_TABLE_SUFFIX = ".partial.parquet"


def progress_table_path(out: str | Path) -> Path:
    """The progress table of the run written to ``out``: ``x.parquet`` -> ``x.partial.parquet``."""
    out = Path(out)
    stem = out.name[:-len(".parquet")] if out.name.endswith(".parquet") else out.name
    return out.with_name(stem + PROGRESS_TABLE_SUFFIX)


def format_duration(seconds: float) -> str:
    """``12.3s`` under a minute, else ``H:MM:SS`` (hours unbounded); ``?`` if not finite."""
    if not math.isfinite(seconds):
        return "?"
    if seconds < 59.95:
        return f"{max(seconds, 0.0):.1f}s"
    whole = max(int(round(seconds)), 0)
    return f"{whole // 3600}:{whole // 60 % 60:02d}:{whole % 60:02d}"


@dataclass(frozen=True)
class RoundSummary:
    """What one evaluated round's progress line says."""

    round: int
    rounds: int
    mean_accuracy: float
    weighted_accuracy: float
    mean_loss: float
    elapsed_s: float
    left_s: float

    def line(self) -> str:
        """The log line (see the module docstring)."""
        return (f"round {self.round}/{self.rounds}: mean acc {self.mean_accuracy:.4f}, "
                f"weighted acc {self.weighted_accuracy:.4f}, loss {self.mean_loss:.4f}, "
                f"elapsed {format_duration(self.elapsed_s)}, "
                f"left ~{format_duration(self.left_s)}")


def round_values(out: R.MetricLog, rnd: int, metric: str) -> dict[int, float]:
    """``client -> value`` of ``metric`` logged for round ``rnd`` (read from the log's end).

    Rows of a round are appended together at its end, so the scan stops at the first
    row of an earlier round.
    """
    found: dict[int, float] = {}
    for i in range(len(out.values) - 1, -1, -1):
        if out.rounds[i] != rnd:
            if out.rounds[i] < rnd:
                break
            continue
        if out.metrics[i] == metric and out.clients[i] >= 0:
            found[out.clients[i]] = out.values[i]
    return found


def client_test_sizes(out: R.MetricLog) -> dict[int, float]:
    """``client -> n_test`` from the round-0 rows at the start of a run's log."""
    sizes: dict[int, float] = {}
    for rnd, client, metric, value in zip(out.rounds, out.clients, out.metrics, out.values,
                                          strict=False):
        if rnd != 0:
            break
        if metric == R.N_TEST:
            sizes[client] = value
    return sizes


class RoundProgress:
    """Reports a run's rounds: a log line per evaluated round, a progress table now and then.

    ``flush`` (optional) is called with the run's metric log after every round that
    is a multiple of ``flush_every``; ``bar`` wraps the rounds in a tqdm bar (stderr).
    ``clock`` is for tests.
    """

    def __init__(self, rounds: int, name: str = "", *, bar: bool = False,
                 flush: Callable[[R.MetricLog], None] | None = None, flush_every: int = 10,
                 logger: logging.Logger | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if flush_every < 1:
            raise ValueError(f"flush_every must be >= 1 round, got {flush_every}")
        self.total = int(rounds)
        self.name = name
        self.bar = bar
        self.flush = flush
        self.flush_every = flush_every
        self.log = logger or log
        self.clock = clock
        self.started = clock()
        self.loop_started = self.started
        self.first = 1
        self._sizes: dict[int, float] | None = None
        #: The summaries logged so far (the last one is what ``status`` shows).
        self.summaries: list[RoundSummary] = []

    def rounds(self, first: int) -> Iterable[int]:
        """The rounds still to run, ``first .. total`` (a tqdm bar around them if asked)."""
        self.first = first
        self.loop_started = self.clock()
        todo: Iterable[int] = range(first, self.total + 1)
        if self.bar:
            from tqdm import tqdm

            todo = tqdm(todo, desc=self.name or None, mininterval=5.0)
        return todo

    def round_done(self, rnd: int, out: R.MetricLog) -> RoundSummary | None:
        """After round ``rnd``: log its line if it was evaluated, flush the progress table."""
        summary = self.summarise(rnd, out)
        if summary is not None:
            self.summaries.append(summary)
            self.log.info("%s", summary.line())
        if self.flush is not None and (rnd % self.flush_every == 0) and rnd < self.total:
            self.flush(out)
        return summary

    def summarise(self, rnd: int, out: R.MetricLog) -> RoundSummary | None:
        """Round ``rnd``'s summary, or None when it was not evaluated."""
        acc = round_values(out, rnd, R.TEST_ACCURACY)
        if not acc:
            return None
        loss = round_values(out, rnd, R.TEST_LOSS)
        if self._sizes is None:
            self._sizes = client_test_sizes(out)
        sizes = [self._sizes.get(k, 0.0) for k in acc]
        total = sum(sizes)
        weighted = (sum(a * n for a, n in zip(acc.values(), sizes, strict=True)) / total
                    if total > 0 else math.nan)
        now = self.clock()
        done = rnd - self.first + 1
        pace = (now - self.loop_started) / done if done > 0 else math.nan
        return RoundSummary(
            round=rnd, rounds=self.total,
            mean_accuracy=sum(acc.values()) / len(acc), weighted_accuracy=weighted,
            mean_loss=sum(loss.values()) / len(loss) if loss else math.nan,
            elapsed_s=now - self.started, left_s=pace * (self.total - rnd))


def write_progress_table(frame: pd.DataFrame, path: str | Path) -> None:
    """Write a running job's table so far to ``path`` atomically (no digest record)."""
    from pflrepro.store.io import atomic_path

    with atomic_path(path) as tmp:
        frame.to_parquet(tmp, index=False, engine="pyarrow")


def remove_progress_table(out: str | Path) -> None:
    """Delete the progress table of the run written to ``out`` (once that is written)."""
    progress_table_path(out).unlink(missing_ok=True)
