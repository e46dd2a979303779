"""``pflrepro verify``: check every stored file of a results directory for bit rot.

Snakemake decides what to rebuild by modification times, so bytes that change in
place (bit rot, a bad disk, a copy gone wrong) with the mtime unchanged are found
only when a job reads the file. :func:`verify` reads every file the workflow writes
under the results directory now:

* run tables, partitions, public sets and aggregates (``results/{runs,partitions,
  public,aggregate,tuning}/**/*.parquet``): the digest record ``.digests/<file>.sha256`` and
  what the file says it is against its path (:func:`pflrepro.store.io.read_verified`);
* prepared data sets (``results/data/*/``): ``meta.json`` (normalisation constants,
  class count) against ``.digests/meta.json.sha256``, both arrays and every extra array
  against the sums in ``meta.json`` (:func:`pflrepro.data.store.load_dataset`), and
  a folder whose ``meta.json`` is gone;
* tables, partition reports, tuning selections and report pages (:data:`RECORDED`):
  their digest records (:mod:`pflrepro.store.records`);
* figures (``figures/**/*.{pdf,png}``, beside the results directory): their digest
  records, written with each file (:func:`pflrepro.reporting.figures.common.save_figure`);
* benchmark records (``results/benchmarks/**/*.tsv``): their digest records, written
  by the first reader (Snakemake writes the files);
* checkpoints (``**/*.ckpt``): the digest trailer
  (:func:`pflrepro.store.checkpoint.verified_payload`).

A damaged file is handled as the job that reads it would: a Parquet file, table,
report or figure is copied aside and dated 1970 so that the next ``snakemake`` rebuilds exactly
it and what is made from it; a data set's damaged array or ``meta.json`` has its
``x.npy`` set aside (its preparation reruns); a checkpoint is set aside (its run
restarts from round 0); a benchmark record is set aside (the cost table names it
missing). Files without a digest record (written before files carried them) are
reported and left alone; with ``adopt`` their records are written, which trusts them
as they are now: only for files one knows to be whole. Temporary files, running jobs'
progress tables (``.partial.parquet``) and ``.corrupt-<n>`` copies are not checked. A
file that cannot be checked (an unreadable record, no permission) is reported and the
others are still checked.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from pflrepro.store.io import (
    DIGEST_SUFFIX,
    IDENTITY_FIELDS,
    CorruptFileError,
    DamagedRecord,
    WrongFileError,
    digest_path,
    identity_mismatch,
    mark_damaged,
    read_record,
    read_verified,
    record_label,
    set_aside,
    write_digest,
)
from pflrepro.store.progress import PROGRESS_TABLE_SUFFIX
from pflrepro.store.records import benchmark_problem, record_problem
from pflrepro.store.targets import entry_problem

#: Folders under the results directory that hold digested Parquet files.
PARQUET_DIRS = ("runs", "partitions", "public", "aggregate", "tuning")
#: The other files the workflow's jobs write with a digest record
#: (:data:`pflrepro.cli.support.OUTPUT_ARGS`): folder under the results directory, names.
RECORDED = (("tables", "*"), ("partitions", "*-clients.csv"), ("partitions", "*-summary.md"),
            ("tuning", "*.json"), ("tuning", "*.md"), ("tuning", "*.csv"),
            ("report", "*.html"))
#: Where Snakemake writes the training jobs' benchmark records.
BENCHMARK_DIR = "benchmarks"
#: The figures' files (:data:`pflrepro.pipeline.workflow.patterns.FIGURE`, partition
#: figures and tuning figures below the same folder), each with its digest record.
FIGURE_NAMES = ("*.pdf", "*.png")


def default_figures(results: str | Path) -> Path:
    """The workflow's figures folder of ``results``: ``figures`` beside it.

    The rules write ``results/...`` and ``figures/...`` relative to one working
    directory (:mod:`pflrepro.pipeline.workflow.patterns`).
    """
    return Path(results).parent / "figures"


@dataclass(frozen=True)
class Finding:
    """One file that is not as stored: ``damaged``, ``undigested`` or ``adopted``."""

    status: str
    path: Path
    detail: str

    def __str__(self) -> str:
        return f"{self.status}: {self.path}: {self.detail}"


def _skipped(path: Path) -> bool:
    """Whether ``path`` is named as no stored file (a temporary file, a copy, a record).

    Entries named as stored files that are no regular files are not skipped: they are
    damaged (:func:`_not_regular`).
    """
    name = path.name
    return (name.startswith(".") or ".corrupt-" in name or name.endswith(PROGRESS_TABLE_SUFFIX)
            or name.endswith(DIGEST_SUFFIX))


def _not_regular(path: Path, project: Path) -> Finding | None:
    """A stored file's name held by a folder, FIFO, socket or a link out of the project.

    Never opened (a FIFO would wait forever): set aside, so that the next snakemake
    finds the output missing and builds it again.
    """
    problem = entry_problem(path, project)
    if problem is None:
        return None
    aside = set_aside(path)
    return Finding("damaged", path, f"{problem}; set aside as {aside.name}, so that the next "
                                    "snakemake builds it again")


def stored_parquet(results: Path) -> list[Path]:
    """The digested Parquet files under ``results`` (sorted)."""
    return sorted(p for d in PARQUET_DIRS for p in (results / d).rglob("*.parquet")
                  if not _skipped(p))


def _check_parquet(path: Path, adopt: bool) -> Finding | None:
    try:
        record = read_record(path)
    except DamagedRecord:
        record = ("", "")  # read_verified names the damaged record and marks the file
    if record is None:
        if not adopt:
            return Finding("undigested", path, "no digest record (written before files "
                           "carried one?): a job reading it treats it as damaged; "
                           "`pflrepro verify --adopt` trusts it as it is")
        try:
            reason = identity_mismatch(path, tuple(IDENTITY_FIELDS))
        except Exception as exc:  # noqa: BLE001 (any parse error: not a whole Parquet file)
            reason = f"it cannot be read ({type(exc).__name__}: {exc})"
        if reason is not None:
            return Finding("damaged", path, f"{reason}; not adopted, a copy kept as "
                           f"{mark_damaged(path).name}, the file dated 1970-01-01 so that "
                           f"the next snakemake rebuilds it")
        write_digest(path)
        return Finding("adopted", path, f"wrote {record_label(path)}")
    try:
        read_verified(path, lambda p: None, kinds=tuple(IDENTITY_FIELDS))
    except CorruptFileError as err:
        return Finding("damaged", path, str(err).removeprefix(f"{path} is damaged: "))
    except WrongFileError as err:
        return Finding("damaged", path, str(err).removeprefix(f"{path} "))
    return None


def _check_dataset(folder: Path, adopt: bool) -> Finding | None:
    from pflrepro.data.store import CorruptDataset, load_dataset, load_extras

    meta = folder / "meta.json"
    if not any(folder.iterdir()):
        return None
    if not meta.exists():
        return Finding("damaged", folder, "meta.json is missing (deleted?); the next "
                       "snakemake prepares the data set again (its jobs need it)")
    adopted = False
    if not digest_path(meta).exists():
        if not adopt:
            return Finding("undigested", folder, "meta.json has no digest record (prepared "
                           "before meta.json carried one?): a job reading it prepares the "
                           "set again; `pflrepro verify --adopt` checks the arrays against "
                           "it and trusts it as it is")
        write_digest(meta)  # trusted now; the arrays are checked against it below
        adopted = True
    try:
        load_dataset(meta)
        load_extras(meta)
        if adopted:
            return Finding("adopted", folder, f"wrote {record_label(folder / 'meta.json')} "
                                              "(the arrays match it)")
    except CorruptDataset as err:
        return Finding("damaged", folder, str(err))
    except ValueError as err:  # another format version: prepared again by its jobs
        return Finding("damaged", folder, str(err))
    return None


def _check_recorded(path: Path, adopt: bool) -> Finding | None:
    """A table, report, tuning selection or figure against its digest record."""
    problem = record_problem(path)
    if problem is None:
        return None
    if problem == "no digest record":
        if adopt:
            write_digest(path)
            return Finding("adopted", path, f"wrote {record_label(path)}")
        return Finding("undigested", path, "no digest record (written before files carried "
                       "one?): delete it so that snakemake writes it again, or trust it "
                       "as it is with `pflrepro verify --adopt`")
    return Finding("damaged", path, f"{problem}; a copy kept as {mark_damaged(path).name}, "
                   f"the file dated 1970-01-01 so that the next snakemake rebuilds it")


def _check_benchmark(path: Path) -> Finding | None:
    """A benchmark record: recorded when it has no digest yet, set aside when damaged."""
    problem = benchmark_problem(path)
    if problem is None:
        return None
    if problem == "no digest record":  # Snakemake writes them without one
        write_digest(path)
        return Finding("recorded", path, f"wrote {record_label(path)} (Snakemake writes "
                       "benchmark records without one, again when their job reruns)")
    return Finding("damaged", path, f"{problem}; set aside as {set_aside(path).name} (the "
                   "job's cost table names it missing; delete its run to measure it again)")


def _guarded(check: Callable[[], Finding | None], path: Path) -> Finding | None:
    """``check()``, or a finding naming ``path`` when it cannot be checked at all."""
    try:
        return check()
    except OSError as err:
        return Finding("damaged", path, f"cannot be checked ({type(err).__name__}: "
                       f"{err.strerror or err})")


def _check_checkpoint(path: Path) -> Finding | None:
    from pflrepro.store.checkpoint import CorruptCheckpoint, verified_payload

    try:
        verified_payload(path)
    except CorruptCheckpoint as err:
        aside = set_aside(path)
        return Finding("damaged", path, f"{err}; set aside as {aside.name} (its run "
                                        f"starts again from round 0)")
    return None


def verify(results: str | Path = "results", *, adopt: bool = False,
           figures: str | Path | None = None) -> tuple[int, list[Finding]]:
    """Check every stored file under ``results`` and ``figures``; (files checked, findings).

    ``figures`` defaults to :func:`default_figures` (a missing folder holds no figures).
    Damaged files are handled as described in the module docstring; with ``adopt``
    files without a digest record get one.
    """
    results = Path(results)
    if not results.is_dir():
        raise FileNotFoundError(f"{results} is not a directory (--results DIR)")
    figures = default_figures(results) if figures is None else Path(figures)
    checks: list[tuple[Path, Callable[[], Finding | None]]] = []
    for path in stored_parquet(results):
        checks.append((path, partial(_check_parquet, path, adopt)))
    folders = [(folder, partial(_check_dataset, folder, adopt))
               for folder in sorted(p for p in (results / "data").glob("*") if p.is_dir())]
    recorded = sorted({p for folder, names in RECORDED for p in (results / folder).rglob(names)
                       if not _skipped(p) and p.suffix != ".parquet"})
    recorded += sorted({p for names in FIGURE_NAMES for p in figures.rglob(names)
                        if not _skipped(p)})
    for path in recorded:
        checks.append((path, partial(_check_recorded, path, adopt)))
    for path in sorted((results / BENCHMARK_DIR).rglob("*.tsv")):
        if not _skipped(path):
            checks.append((path, partial(_check_benchmark, path)))
    for path in sorted(results.rglob("*.ckpt")):
        if not _skipped(path):
            checks.append((path, partial(_check_checkpoint, path)))
    project = results.resolve().parent
    findings = [f for path, check in folders if (f := _guarded(check, path)) is not None]
    findings += [f for path, check in checks
                 if (f := _guarded(lambda p=path, c=check: _not_regular(p, project) or c(), path))
                 is not None]
    return len(folders) + len(checks), findings
