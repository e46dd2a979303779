"""Digest records of the stored files that are not Parquet: tables, reports, benchmarks.

Run tables, aggregates, partitions and public sets carry a ``.digests/<file>.sha256`` record
written with the file (:func:`pflrepro.store.io.atomic_digested_path`), prepared data sets
one for ``meta.json`` (:mod:`pflrepro.data.store`). The other files a job writes get
theirs here, once the command that wrote them has finished (:func:`record_outputs`):
the tables (Markdown, LaTeX, CSV), partition reports, cost tables and projections,
claims tables, tuning selections and report pages. A crash between a file and its record leaves a
file without a record, which ``pflrepro verify`` reports (it is rebuilt or adopted),
never a record of another version.

Benchmark records are written by Snakemake after a training job ends, so no job of
ours writes them: the first reader records the digest of the file as Snakemake left it
(:func:`checked_benchmark`) and every later reader and ``pflrepro verify`` checks it.
A job that reruns gets its benchmark file written again, newer than the record of the
earlier one: such a record is replaced, not taken as damage (:func:`benchmark_problem`;
bit rot keeps the file's modification time).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from pathlib import Path

from pflrepro.store.io import (
    DamagedRecord,
    digest_path,
    read_record,
    record_label,
    set_aside,
    sha256_file,
    write_digest,
)

log = logging.getLogger(__name__)

def record_outputs(paths: Iterable[str | os.PathLike[str] | None]) -> list[Path]:
    """Write the digest record of each of ``paths`` that is a file; the paths recorded.

    ``paths``: a finished command's output files (:data:`pflrepro.cli.support.OUTPUT_ARGS`
    names them per command); ``None`` (an output option not given) and a path with no
    file (an optional output not written) are passed over.
    """
    written = []
    for value in paths:
        if value and Path(value).is_file():
            write_digest(value)
            written.append(Path(value))
    return written


def record_problem(path: Path) -> str | None:
    """Why ``path`` does not match its digest record; None when it does.

    ``FileNotFoundError`` from :func:`pflrepro.store.io.read_record` is not raised: a
    missing record is reported as ``"no digest record"``.
    """
    try:
        record = read_record(path)
    except DamagedRecord as err:
        return f"its digest record is damaged: {err}"
    if record is None:
        return "no digest record"
    if record[1] != path.name:
        return f"its record {record_label(path)} is that of another file ({record[1]!r})"
    if sha256_file(path) != record[0]:
        return f"its SHA-256 differs from the one recorded in {record_label(path)}"
    return None


def benchmark_problem(path: Path) -> str | None:
    """:func:`record_problem` of a benchmark file, ``"no digest record"`` when rewritten.

    A record older than its file describes the file of an earlier run of the job
    (Snakemake wrote the file again when the job reran): it is as good as none.
    """
    problem = record_problem(path)
    if problem is not None and problem != "no digest record":
        try:
            if digest_path(path).stat().st_mtime_ns < path.stat().st_mtime_ns:
                return "no digest record"
        except FileNotFoundError:
            pass
    return problem


def checked_benchmark(path: str | Path) -> Path | None:
    """``path`` when it is a whole benchmark record; None when it is missing or damaged.

    A record without a digest is trusted as Snakemake wrote it and its digest written
    (the first reader); a damaged one is set aside as ``.corrupt-<n>`` (its job's
    measurement is lost; backdating it would retrain the run). Both cases are logged,
    naming the file.
    """
    path = Path(path)
    if not path.is_file():
        log.warning("%s: no benchmark record (the job was killed before Snakemake wrote "
                    "it, or it was set aside as damaged): its wall time, CPU time and "
                    "memory are unknown", path)
        return None
    problem = benchmark_problem(path)
    if problem == "no digest record":
        write_digest(path)
        return path
    if problem is not None:
        aside = set_aside(path)
        log.warning("%s is damaged: %s; set aside as %s, its wall time, CPU time and "
                    "memory are unknown", path, problem, aside.name)
        return None
    return path
