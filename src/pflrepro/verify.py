"""``pflrepro verify``: check every stored file of a results directory for bit rot.

Snakemake decides what to rebuild by modification times, so bytes that change in
place (bit rot, a bad disk, a copy gone wrong) with the mtime unchanged are found
only when a job reads the file. :func:`verify` reads them all now:

* run tables, partitions, public sets and aggregates (``results/{runs,partitions,
  public,aggregate}/**/*.parquet``): the digest record ``<file>.sha256`` and what the
  file says it is against its path (:func:`pflrepro.io.read_verified`);
* prepared data sets (``results/data/*/meta.json``): both arrays and every extra
  array against the sums in ``meta.json`` (:func:`pflrepro.data.store.load_dataset`);
* checkpoints (``**/*.ckpt``): the digest trailer (:func:`pflrepro.checkpoint.verified_payload`).

A damaged file is handled as the job that reads it would: a Parquet file is copied
aside and dated 1970 so that the next ``snakemake`` rebuilds exactly it and what is
made from it; a data set's damaged array is set aside (its preparation reruns); a
checkpoint is set aside (its run restarts from round 0). Files without a digest
record (written before files carried them) are reported and left alone; with
``adopt`` their records are written, which trusts them as they are now: only for
files one knows to be whole. Temporary files, running jobs' progress tables
(``.partial.parquet``) and ``.corrupt-<n>`` copies are not checked; tables and figures
carry no digests.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pflrepro.io import (
    IDENTITY_FIELDS,
    CorruptFileError,
    identity_mismatch,
    mark_damaged,
    read_record,
    read_verified,
    set_aside,
    write_digest,
)
from pflrepro.progress import PROGRESS_TABLE_SUFFIX

#: Folders under the results directory that hold digested Parquet files.
PARQUET_DIRS = ("runs", "partitions", "public", "aggregate")


@dataclass(frozen=True)
class Finding:
    """One file that is not as stored: ``damaged``, ``undigested`` or ``adopted``."""

    status: str
    path: Path
    detail: str

    def __str__(self) -> str:
        return f"{self.status}: {self.path}: {self.detail}"


def _skipped(path: Path) -> bool:
    name = path.name
    return (name.startswith(".") or ".corrupt-" in name or name.endswith(PROGRESS_TABLE_SUFFIX)
            or not path.is_file())


def stored_parquet(results: Path) -> list[Path]:
    """The digested Parquet files under ``results`` (sorted)."""
    return sorted(p for d in PARQUET_DIRS for p in (results / d).rglob("*.parquet")
                  if not _skipped(p))


def _check_parquet(path: Path, adopt: bool) -> Finding | None:
    if read_record(path) is None:
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
        return Finding("adopted", path, f"wrote {path.name}.sha256")
    try:
        read_verified(path, lambda p: None, kinds=tuple(IDENTITY_FIELDS))
    except CorruptFileError as err:
        return Finding("damaged", path, str(err).removeprefix(f"{path} is damaged: "))
    return None


def _check_dataset(meta: Path) -> Finding | None:
    from pflrepro.data.store import CorruptDataset, load_dataset, load_extras

    try:
        load_dataset(meta)
        load_extras(meta)
    except CorruptDataset as err:
        return Finding("damaged", meta.parent, str(err))
    return None


def _check_checkpoint(path: Path) -> Finding | None:
    from pflrepro.checkpoint import CorruptCheckpoint, verified_payload

    try:
        verified_payload(path)
    except CorruptCheckpoint as err:
        aside = set_aside(path)
        return Finding("damaged", path, f"{err}; set aside as {aside.name} (its run "
                                        f"starts again from round 0)")
    return None


def verify(results: str | Path = "results", *, adopt: bool = False) -> tuple[int, list[Finding]]:
    """Check every stored file under ``results``; (files checked, findings).

    Damaged files are handled as described in the module docstring; with ``adopt``
    files without a digest record get one.
    """
    results = Path(results)
    if not results.is_dir():
        raise FileNotFoundError(f"{results} is not a directory (--results DIR)")
    findings: list[Finding] = []
    checked = 0
    for path in stored_parquet(results):
        checked += 1
        if (finding := _check_parquet(path, adopt)) is not None:
            findings.append(finding)
    for meta in sorted((results / "data").glob("*/meta.json")):
        checked += 1
        if (finding := _check_dataset(meta)) is not None:
            findings.append(finding)
    for path in sorted(results.rglob("*.ckpt")):
        if _skipped(path):
            continue
        checked += 1
        if (finding := _check_checkpoint(path)) is not None:
            findings.append(finding)
    return checked, findings
