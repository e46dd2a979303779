"""The workflow's data jobs: ``pflrepro partition`` and ``pflrepro public``.

:func:`make_partition` splits a prepared data set into a partition file, and
:func:`make_public` draws a public set (rows no client holds when it comes from the
clients' own data set). The workflow's ``partition`` and ``public`` rules run them
through the CLI; ``pflrepro run`` (:mod:`pflrepro.pipeline.single`) calls them directly.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def make_partition(data: str | Path, dataset: str, spec: Mapping[str, Any], seed: int,
                   out: str | Path) -> None:
    """``pflrepro partition``: split the prepared data set by ``spec``, write ``out``."""
    from pflrepro.data.partition import from_spec, write_partition
    from pflrepro.data.stats import partition_stats, summary_stats
    from pflrepro.data.store import load_dataset, load_extras

    prepared = load_dataset(data)
    partitioner = from_spec(spec)
    labels = prepared.y[:]
    frame = partitioner.split(labels, prepared.meta.num_classes, seed,
                              extras=load_extras(data))
    write_partition(frame, str(out), partitioner=partitioner, dataset=dataset, seed=seed)
    summary = summary_stats(partition_stats(frame, labels, prepared.meta.num_classes))
    log.info("partition %s (split seed %d): %s", partitioner.id, seed, summary)


def make_public(data: str | Path, size: int, seed: int, out: str | Path,
                exclude_partition: str | Path | None = None) -> None:
    """``pflrepro public``: draw ``size`` unlabeled rows of ``data`` (not the clients')."""
    from pflrepro.data.partition import read_partition
    from pflrepro.data.public import public_split, write_public
    from pflrepro.data.store import load_dataset

    source = load_dataset(data)
    exclude = None
    if exclude_partition:  # public rows from the clients' own data set
        frame, _ = read_partition(str(exclude_partition))
        exclude = frame["index"].to_numpy()
    rows = public_split(source.meta.size, size, seed, exclude=exclude)
    write_public(rows, str(out), dataset=source.meta.name, seed=seed)
    log.info("public set: %d rows of %s (seed %d)", len(rows), source.meta.name, seed)
