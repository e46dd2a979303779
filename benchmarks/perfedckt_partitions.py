"""PerFed-CKT's partition readings: Dirichlet splits the text could mean (perfedckt_readings.py).

The text: "We partition data heterogeneously amongst clients using the Dirichlet
distribution Dir_K(α) [52], smaller α leads to higher data size imbalance and degree
of label skew across clients. We set α=0.01". It gives neither the client count, nor
how clients left empty by the draw are handled, nor its code. Each reading below
builds one partition of a label vector (the clients' sample rows) from a split seed;
:mod:`perfedckt_readings` splits each client's rows into train/test with the shared
split of :class:`pflrepro.data.partition.Partitioner` and scores the majority rule.

Draws (``K`` clients, ``C`` classes):

* **per class** (the dirichlet scheme; PFNM/FedMA's "hetero-dir", FedDF): for each
  class, shares over the ``K`` clients ~ Dir_K(α); the class is dealt by them. Client
  sizes follow the draw, so they are unequal.
* **per client** (Hsu, Qi and Brown 2019): every client holds ``N / K`` samples; its
  label mix ~ Dir(α p) over the classes, ``p`` the data set's class shares. A class
  that runs out is left out of the later clients' mixes (a client short of samples
  draws a fresh mix over the classes still available for the rest), so the draw
  ends after at most ``C`` extra mixes per client.

Handling of clients the per-class draw leaves small (under ``min_samples``):

* ``top_up``: the dirichlet scheme's draw and top-up to ``min_samples`` 5 (the same
  partition as its own split, tests/unit/test_perfedckt_partitions.py);
* ``resample``: redraw the whole table until every client holds ``min_samples``,
  at most ``attempts`` draws (the first draw is the scheme's own);
* ``drop``: the scheme's single draw, clients under ``min_samples`` removed with
  their samples (the federation is the clients kept);
* ``hetero_dir``: PFNM/FedMA/NIID-Bench's loop: per class, clients already holding
  ``N / K`` samples get no share (the "balance" cap), redrawn until every client
  holds 10 samples;
* ``feddf``: FedDF's reference partition: the shuffled rows cut into groups of 10
  clients, in each group the capped per-class draw redrawn until every client holds
  half the group's mean, then the clients' rows (each client's class by class),
  concatenated and cut into ``K`` equal consecutive pieces of ``int(N / K)`` rows
  (its ``partition_sizes`` are ``1/K`` each), so a piece can straddle two drawn
  clients and every client has the same size.

Shares are apportioned by largest remainders (the scheme's ``apportion``), where the
libraries floor cumulative sums: counts differ by at most one sample per client and
class. A redraw loop is bounded by ``attempts``; a reading none of whose draws pass
returns ``None`` with the pass count (0 of ``attempts``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from pflrepro.data.partition import Assignment, Partitioner
from pflrepro.data.schemes.dirichlet import DirichletPartitioner, apportion, top_up
from pflrepro.seeding import NO_CLIENT, SETUP_ROUND, numpy_generator

#: The scheme's streams (dirichlet.py): the first draw of ``resample``, ``drop`` and
#: ``hetero_dir`` uses the scheme's draw stream, and all readings but ``feddf`` deal
#: samples with its sample stream.
DRAW_STREAM = "partition:dirichlet:draw"
SAMPLE_STREAM = "partition:dirichlet:samples"
MIN_SAMPLES = 5
HETERO_DIR_MIN = 10  # PFNM/FedMA/NIID-Bench: ``while min_size < 10``
FEDDF_GROUP = 10  # FedDF: ``n_auxi_workers = 10``
#: Client counts measured (the text does not state K).
CLIENT_COUNTS = (20, 50, 100)


@dataclass(frozen=True)
class Built:
    """One reading's partition: each client's rows (``None``: no draw passed)."""

    indices: list[np.ndarray] | None
    passes: int = 1  # draws that passed the reading's minimum
    attempts: int = 1  # draws made


@dataclass(frozen=True, kw_only=True)
class GivenPartitioner(Partitioner):
    """A partition fixed in advance, split into train/test by the shared split."""

    scheme: ClassVar[str] = "given"
    rows: tuple[np.ndarray, ...] = field(default=(), compare=False)

    def assign(self, labels, num_classes, seed, *, extras=None) -> Assignment:
        """Return the given rows (``clients`` must equal their count)."""
        return Assignment(indices=list(self.rows), groups=[-1] * self.clients)


def given(built: Built) -> GivenPartitioner:
    """The partitioner of a built partition (its clients, test fraction 0.2)."""
    return GivenPartitioner(clients=len(built.indices), rows=tuple(built.indices))


# ----------------------------------------------------------------------- draws
def per_class_draw(class_sizes: np.ndarray, clients: int, alpha: float,
                   rng: np.random.Generator, *, cap: bool = False) -> np.ndarray:
    """``clients x classes`` counts: each class's shares over the clients ~ Dir_K(alpha).

    Without ``cap`` this is the dirichlet scheme's ``draw_counts`` given its generator.
    With ``cap`` a client already holding ``N / K`` samples gets no share of the later
    classes (the shares renormalised over the others). A degenerate draw (all zero or
    not finite) puts the class on one open client chosen uniformly (its α -> 0 limit).
    """
    table = np.zeros((clients, len(class_sizes)), dtype=np.int64)
    mean = class_sizes.sum() / clients
    for c, n_c in enumerate(class_sizes):
        p = rng.dirichlet(np.full(clients, float(alpha)))
        open_ = table.sum(axis=1) < mean if cap else np.ones(clients, dtype=bool)
        p = p * open_
        if not (np.all(np.isfinite(p)) and p.sum() > 0):
            p = np.zeros(clients)
            choices = np.flatnonzero(open_)
            p[choices[rng.integers(len(choices))]] = 1.0
        table[:, c] = apportion(int(n_c), p / p.sum())
    return table


def per_client_table(class_sizes: np.ndarray, clients: int, alpha: float,
                     rng: np.random.Generator) -> np.ndarray:
    """Hsu et al.'s draw: equal client sizes, each client's mix ~ Dir(alpha * p)."""
    prior = class_sizes / class_sizes.sum()
    sizes = apportion(int(class_sizes.sum()), np.full(clients, 1.0 / clients))
    left = class_sizes.astype(np.int64).copy()
    table = np.zeros((clients, len(class_sizes)), dtype=np.int64)
    for k in range(clients):
        need = int(sizes[k])
        while need > 0:
            avail = np.flatnonzero(left > 0)
            q = np.zeros(len(class_sizes))
            q[avail] = rng.dirichlet(alpha * prior[avail])
            if not (np.all(np.isfinite(q)) and q.sum() > 0):
                q = np.zeros(len(class_sizes))
                q[avail[rng.integers(len(avail))]] = 1.0
            take = np.minimum(apportion(need, q / q.sum()), left)
            table[k] += take
            left -= take
            need -= int(take.sum())
    return table


def deal(labels: np.ndarray, table: np.ndarray, rng: np.random.Generator,
         rows: np.ndarray | None = None, *, ordered: bool = True) -> list[np.ndarray]:
    """Each client's rows: every class's rows, in a seeded order, cut by ``table``.

    ``rows`` (default: all) are the rows of ``labels`` dealt. Each client's rows are
    returned sorted, or (``ordered=False``) class by class, as FedDF's lists hold them.
    With the scheme's sample generator this is the scheme's own dealing.
    """
    rows = np.arange(len(labels)) if rows is None else rows
    parts: list[list[np.ndarray]] = [[] for _ in range(len(table))]
    for c in range(table.shape[1]):
        pool = rng.permutation(rows[labels[rows] == c])
        for client, chunk in enumerate(np.split(pool, np.cumsum(table[:, c])[:-1])):
            parts[client].append(chunk)
    joined = [np.concatenate(p).astype(np.int64) for p in parts]
    return [np.sort(j) for j in joined] if ordered else joined


def redraw(draw: Callable[[int], np.ndarray], minimum: int, attempts: int
           ) -> tuple[np.ndarray | None, int]:
    """The first of ``draw(0), draw(1), ...`` whose smallest client holds ``minimum``.

    Makes all ``attempts`` draws and returns (the first passing table or ``None``, the
    number that passed): the pass rate is the reading's chance of ending per draw.
    """
    first, passes = None, 0
    for a in range(attempts):
        table = draw(a)
        if table.sum(axis=1).min() >= minimum:
            passes += 1
            first = table if first is None else first
    return first, passes


# ----------------------------------------------------------------------- readings
def _stream(seed: int, name: str, attempt: int) -> np.random.Generator:
    """Attempt 0 of a per-class reading uses the scheme's draw stream."""
    purpose = DRAW_STREAM if attempt == 0 else f"perfedckt-readings:{name}:{attempt}"
    return numpy_generator(seed, SETUP_ROUND, NO_CLIENT, purpose)


def build(reading: str, labels: np.ndarray, clients: int, alpha: float, seed: int,
          attempts: int = 1000) -> Built:
    """The partition of ``labels`` under ``reading`` (see the module docstring)."""
    sizes = np.bincount(labels, minlength=int(labels.max()) + 1)
    samples = numpy_generator(seed, SETUP_ROUND, NO_CLIENT, SAMPLE_STREAM)
    if reading == "top_up":
        spec = DirichletPartitioner(clients=clients, alpha=alpha, min_samples=MIN_SAMPLES)
        table = spec.draw_counts(sizes, seed)
        top_up(table, MIN_SAMPLES)
        return Built(deal(labels, table, samples))
    if reading == "drop":
        table = per_class_draw(sizes, clients, alpha, _stream(seed, reading, 0))
        kept = table.sum(axis=1) >= MIN_SAMPLES
        return Built([rows for rows, k in zip(deal(labels, table, samples), kept,
                                              strict=True) if k])
    if reading in ("resample", "hetero_dir"):
        cap = reading == "hetero_dir"
        minimum = HETERO_DIR_MIN if cap else MIN_SAMPLES
        table, passes = redraw(lambda a: per_class_draw(
            sizes, clients, alpha, _stream(seed, reading, a), cap=cap), minimum, attempts)
        rows = None if table is None else deal(labels, table, samples)
        return Built(rows, passes, attempts)
    if reading == "per_client":
        rng = numpy_generator(seed, SETUP_ROUND, NO_CLIENT, "perfedckt-readings:per_client")
        return Built(deal(labels, per_client_table(sizes, clients, alpha, rng), samples))
    if reading == "feddf":
        return feddf(labels, clients, alpha, seed, attempts)
    raise ValueError(f"unknown partition reading {reading!r}; known: {READINGS}")


def feddf(labels: np.ndarray, clients: int, alpha: float, seed: int,
          attempts: int) -> Built:
    """FedDF's reference partition (module docstring); passes/attempts summed over groups."""
    n = len(labels)
    order = numpy_generator(seed, SETUP_ROUND, NO_CLIENT,
                            "perfedckt-readings:feddf:order").permutation(n)
    groups = -(-clients // FEDDF_GROUP)
    per_group = [FEDDF_GROUP] * (groups - 1) + [clients - FEDDF_GROUP * (groups - 1)]
    step = int(FEDDF_GROUP / clients * n)
    drawn: list[np.ndarray] = []
    passes = made = 0
    for g, k_g in enumerate(per_group):
        rows = order[g * step:(n if g == groups - 1 else (g + 1) * step)]
        sizes = np.bincount(labels[rows], minlength=int(labels.max()) + 1)
        table, ok = redraw(lambda a, g=g, k_g=k_g, sizes=sizes: per_class_draw(
            sizes, k_g, alpha, numpy_generator(seed, SETUP_ROUND, NO_CLIENT,
                                               f"perfedckt-readings:feddf:{g}:{a}"),
            cap=True), int(0.5 * len(rows) / k_g), attempts)
        passes, made = passes + ok, made + attempts
        if table is None:
            return Built(None, passes, made)
        rng = numpy_generator(seed, SETUP_ROUND, g, "perfedckt-readings:feddf:samples")
        drawn += deal(labels, table, rng, rows, ordered=False)
    flat = np.concatenate(drawn)
    size = int(n / clients)
    return Built([np.sort(flat[i * size:(i + 1) * size]) for i in range(clients)],
                 passes, made)


#: The readings, in table order; ``top_up`` is the dirichlet scheme.
READINGS = ("top_up", "resample", "drop", "hetero_dir", "per_client", "feddf")
