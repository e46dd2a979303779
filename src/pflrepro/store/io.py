"""Atomic file writing: every output appears whole or not at all; digests checked on read.

Outputs that later jobs read back (run tables, aggregates, partitions, public sets)
are written with :func:`atomic_digested_path`: a ``.digests/<file>.sha256`` record beside the
file, in ``sha256sum`` format, holds the SHA-256 of the file's bytes and its name. A
reader goes through :func:`read_verified`, which checks the file against its record
and what the file says it is (:func:`stored_identity`) against what the reader and
the file's place in the workflow's layout (:func:`expected_identity`) expect, before
parsing it. A file that has no record (a single flipped bit often still parses, so
"it parses" is no check; files written before records existed are adopted once,
knowingly, with ``pflrepro verify --adopt``), does not match it, or is another file
than its path says (a run of another method, a run where a partition belongs) is
damaged (:func:`mark_damaged`): a copy is kept as ``<file>.corrupt-<n>``, the file
is dated 1970-01-01, older than the inputs of the job that made it, and Snakemake's
record of it is removed (:func:`forget_snakemake_record`), so Snakemake's next run
rebuilds it and everything made from it; the error names the file, why,
and that fix. The file stays in place: other jobs of the same Snakemake run that
take it as an input then fail one by one, naming it, instead of Snakemake aborting
the whole run (and ``--keep-going``'s partial tables) because a declared input
vanished.

The record is replaced around the file's rename: the old record is removed before
the new file is renamed into place, the new record written after. A crash in between
leaves a complete file with no record, which a reader treats as damaged (rebuilt),
never a file beside a stale record.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from pflrepro.store.damage import (  # noqa: F401 (part of this module's interface)
    DAMAGED_MTIME,
    forget_snakemake_record,
    mark_damaged,
    set_aside,
)
from pflrepro.store.targets import check_output_target, entry_problem

if TYPE_CHECKING:  # only annotations: importing this module needs no pandas
    import pandas as pd


def _read_umask() -> int:
    """The process's umask (read once, at import, by setting and restoring it)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


#: Outputs get the permissions a plain ``open(path, "w")`` would give them.
FILE_MODE = 0o666 & ~_read_umask()
#: Suffix of an output's digest record (``<file>.sha256``).
DIGEST_SUFFIX = ".sha256"
#: The hidden folder beside outputs that holds their digest records, so that a folder
#: people read lists only what they read: ``<folder>/.digests/<file>.sha256``.
DIGESTS_DIR = ".digests"
#: What to do about a damaged output: its producer reruns once it is missing.
RERUN_FIX = ("rerun snakemake: the file is now older than the inputs it was made from, so "
             "Snakemake rebuilds it and everything made from it")
#: Parquet key-value metadata naming what an aggregate is (JSON: kind, experiment,
#: method); runs say what they are in their config columns, partitions and public
#: sets in their own metadata.
KIND_KEY = b"pflrepro.kind"
#: The Parquet metadata keys of a partition table (:mod:`pflrepro.data.partition`) and
#: of a public set (:mod:`pflrepro.data.public`): here, so that telling a stored file
#: by its metadata needs neither module (they import this one).
PARTITION_KEY = b"pflrepro.partition"
PUBLIC_KEY = b"pflrepro.public"
#: The kinds of stored Parquet file, and the fields of each that say which one it is
#: (named as the wildcards of the workflow's paths).
IDENTITY_FIELDS = {
    "run": ("experiment", "partition", "method", "split", "seed"),
    "method_aggregate": ("experiment", "method"),
    "experiment_aggregate": ("experiment",),
    "aggregate": (),
    "partition": ("dataset", "partition", "split"),
    "public": ("split", "set"),  # set: the source data set's name and the size, as in
}                                # the path (``digits100``: the two cannot be told apart)
#: What :func:`pflrepro.store.results.read_table` accepts: a run or any aggregate.
TABLE_KINDS = ("run", "method_aggregate", "experiment_aggregate", "aggregate")

T = TypeVar("T")


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` on success.

    On an exception the temporary file is removed and ``path`` is left untouched,
    so a failing job never leaves a half-written output behind. The output gets the
    mode a plain ``open`` would give it (:data:`FILE_MODE`), not ``mkstemp``'s 0600,
    so others on a shared cluster can read the results as usual. The target must be a
    regular file, a link (replaced, not followed) or absent (:func:`check_output_target`).
    """
    target = Path(path)
    check_output_target(target)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.chmod(tmp_path, FILE_MODE)
        os.replace(tmp_path, target)
    except BaseException:
        tmp_path.unlink(missing_ok=True)
        raise


def write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` to ``path`` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_parquet(frame: pd.DataFrame, path: str | os.PathLike[str]) -> None:
    """Write ``frame`` to Parquet atomically, without the pandas index, with its digest.

    Read it back with :func:`read_verified` (``pflrepro.store.results.read_table``).
    """
    with atomic_digested_path(path) as tmp:
        frame.to_parquet(tmp, index=False, engine="pyarrow")


def write_csv(frame: pd.DataFrame, path: str | os.PathLike[str]) -> None:
    """Write ``frame`` to CSV atomically, without the index."""
    with atomic_path(path) as tmp:
        frame.to_csv(tmp, index=False)


def sha256_file(path: str | os.PathLike[str]) -> str:
    """SHA-256 (hex) of a file's bytes, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# ------------------------------------------------------------------ digests on read
class CorruptFileError(ValueError):
    """A stored file that failed its digest or is not what it should be.

    Marked (``aside`` names the copy) when it lies in the workflow's results tree;
    ``owned=False``: left as it is, since it is not the workflow's to change.
    """

    def __init__(self, path: Path, reason: str, aside: Path | None, fix: str,
                 owned: bool = True, moved: bool = False) -> None:
        if not owned:
            where = ("left as it is (it lies outside the workflow's results tree, so "
                     "nothing was changed)")
            fix = "replace it with a whole copy, or give the file the workflow wrote"
        elif moved and aside is not None:
            where = f"set aside as {aside.name}"
        elif aside is not None:
            where = f"a copy kept as {aside.name}, the file dated 1970-01-01"
        else:
            where = "already removed by another job"
        super().__init__(f"{path} is damaged: {reason}; {where}. Fix: {fix}")
        self.path = path
        self.aside = aside


class WrongFileError(ValueError):
    """A whole file given where another kind of file belongs; nothing was changed."""


class DamagedRecord(ValueError):
    """A digest record ``<file>.sha256`` that does not hold a SHA-256 and a file name."""


def digest_path(path: str | os.PathLike[str]) -> Path:
    """The digest record of ``path``: ``.digests/<name>.sha256`` in its folder."""
    target = Path(path)
    return target.parent / DIGESTS_DIR / (target.name + DIGEST_SUFFIX)


def record_label(path: str | os.PathLike[str]) -> str:
    """The record of ``path`` as a message names it: ``.digests/<name>.sha256``."""
    return f"{DIGESTS_DIR}/{Path(path).name}{DIGEST_SUFFIX}"


def legacy_digest_path(path: str | os.PathLike[str]) -> Path:
    """Where a record of ``path`` lay before records moved out of sight: ``<path>.sha256``."""
    target = Path(path)
    return target.with_name(target.name + DIGEST_SUFFIX)


def _records_folder(target: Path) -> Path:
    """The records folder beside ``target``, refused when it is a link or no folder."""
    folder = target.parent / DIGESTS_DIR
    if folder.is_symlink() or (os.path.lexists(folder) and not folder.is_dir()):
        raise DamagedRecord(f"{folder} is not a folder of digest records (a link or a file): "
                            "move it away and rerun")
    return folder


def adopt_legacy_record(path: str | os.PathLike[str]) -> bool:
    """Move ``path``'s record from beside it into ``.digests/``; True when one moved.

    A project built before records moved keeps every record this way: nothing is
    rebuilt, the first read (or ``pflrepro verify``) moves it. Only a regular file
    moves, never over a record already in place.
    """
    target = Path(path)
    legacy, record = legacy_digest_path(target), digest_path(target)
    if (legacy.is_symlink() or not legacy.is_file() or os.path.lexists(record)
            or not os.path.lexists(target)):
        return False
    _records_folder(target).mkdir(exist_ok=True)
    os.replace(legacy, record)
    return True


def write_digest(path: str | os.PathLike[str]) -> str:
    """Write the digest record of ``path`` as it is now (atomically); return the digest."""
    target = Path(path)
    digest = sha256_file(target)
    _records_folder(target)
    write_text(digest_path(target), f"{digest}  {target.name}\n")
    legacy_digest_path(target).unlink(missing_ok=True)
    return digest


@contextlib.contextmanager
def atomic_digested_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """:func:`atomic_path` that also records the file's SHA-256 (:func:`digest_path`).

    The old record is removed before the new file is renamed into place and the new
    one written after it, so a record never describes another version of the file.
    """
    target = Path(path)
    record = digest_path(target)
    _records_folder(target)
    with atomic_path(target) as tmp:
        yield tmp
        digest = sha256_file(tmp)  # read back from the page cache
        record.unlink(missing_ok=True)
        legacy_digest_path(target).unlink(missing_ok=True)
    write_text(record, f"{digest}  {target.name}\n")


def results_project(path: str | os.PathLike[str]) -> Path | None:
    """The folder above ``path``'s ``results`` tree (its project), or None outside one."""
    for folder in Path(os.path.abspath(path)).parents:
        if folder.name == "results":
            return folder.parent
    return None


def _project_of(path: Path) -> Path:
    """The project of a stored file (:func:`results_project`), else the working folder."""
    return results_project(path) or Path.cwd()


def read_record(path: str | os.PathLike[str]) -> tuple[str, str] | None:
    """(SHA-256, file name) recorded for ``path``; None when it has no record.

    :class:`DamagedRecord`, naming the record, when it is not UTF-8 text or does not
    hold a 64-digit hex SHA-256 and a name.
    """
    adopt_legacy_record(path)
    record = digest_path(path)
    if not os.path.lexists(record):
        return None
    _records_folder(Path(path))
    problem = entry_problem(record, _project_of(record))
    if problem is not None:  # never read through it (a FIFO, a link to another's file)
        raise DamagedRecord(f"the record {record} is not a digest record: {problem}")
    try:
        raw = record.read_bytes()
    except FileNotFoundError:
        return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DamagedRecord(f"the record {digest_path(path)} is not UTF-8 text (byte "
                            f"{exc.start})") from None
    fields = text.split(maxsplit=1)
    digest = fields[0].lower() if fields else ""
    name = fields[1].strip().lstrip("*") if len(fields) > 1 else ""
    if not re.fullmatch(r"[0-9a-f]{64}", digest) or not name:  # its text is not quoted
        raise DamagedRecord(f"the record {digest_path(path)} does not hold a SHA-256 and a "
                            f"file name ({len(raw)} bytes)")
    return digest, name


def recorded_digest(path: str | os.PathLike[str]) -> str | None:
    """The SHA-256 recorded for ``path`` (None when it has no record)."""
    record = read_record(path)
    return None if record is None else record[0]


def read_verified(path: str | os.PathLike[str], read: Callable[[Path], T], *,
                  kinds: Sequence[str] | None = None, fix: str = RERUN_FIX) -> T:
    """``read(path)`` after checking ``path``: its digest record, then what it is.

    The file is damaged when it has no record (:func:`digest_path`; one flipped bit of a
    Parquet file often still parses; adopt files from before records with
    ``pflrepro verify --adopt``), its record is damaged or names another file, its
    SHA-256 differs from the record, or it is not the file its place in the
    workflow's layout says (:func:`expected_identity`). A damaged file in the
    workflow's results tree is marked (:func:`mark_damaged`: copied aside, dated
    1970, rebuilt by the next ``snakemake``) and :class:`CorruptFileError` names the
    file, why, the copy and ``fix``; one elsewhere is named and left alone. A whole
    file of another kind than ``kinds`` (a run given where a partition belongs), or a
    file outside the results tree without a record, is no damage:
    :class:`WrongFileError` says what it is and nothing changes. A file that passes
    is what its writer wrote: an error reading it passes through (it is not damage).
    A missing file raises ``FileNotFoundError`` ("not found"); one that cannot be
    opened (permissions) raises as usual.
    """
    path = Path(path)
    if not os.path.lexists(path):
        raise FileNotFoundError(errno.ENOENT, "not found", str(path))
    owned = expected_identity(path) is not None
    special = entry_problem(path, _project_of(path))
    if special is not None:  # never opened: set aside whole, so that it is built again
        if not owned:
            raise WrongFileError(f"{path} is not a stored file: {special}; nothing was changed")
        aside = set_aside(path)
        raise CorruptFileError(path, special, aside, "rerun snakemake: the file is missing "
                                                     "now, so Snakemake builds it again",
                               moved=True)
    wanted = " or ".join(dict.fromkeys("aggregate" if k.endswith("aggregate") else k
                                       for k in kinds)) if kinds else "stored"
    record_name = record_label(path)
    try:
        record = read_record(path)
    except DamagedRecord as err:
        raise _damaged(path, f"its digest record is damaged: {err}", fix, owned) from None
    if record is None:
        if not owned:
            raise WrongFileError(
                f"{path} is not a {wanted} file written by the workflow: it has no digest "
                f"record {record_name}; nothing was changed")
        raise _damaged(path, f"it has no digest record {record_name} (written before "
                             f"files carried one, or the record was lost), so it cannot be "
                             f"trusted. Either delete {path} so that snakemake rebuilds "
                             f"it, or trust it as it is with `pflrepro verify --adopt`",
                       fix, owned)
    expected, name = record
    if name != path.name:
        raise _damaged(path, f"its record {record_name} is that of another file "
                             f"({name!r})", fix, owned)
    if sha256_file(path) != expected:
        raise _damaged(path, f"its SHA-256 differs from the one recorded in {record_name}",
                       fix, owned)
    if kinds is not None:
        try:
            stored = stored_identity(path)
        except Exception as exc:  # noqa: BLE001 (whole by its digest, yet no Parquet file)
            raise WrongFileError(f"{path} is not a {wanted} file: it is no Parquet file "
                                 f"({type(exc).__name__}); nothing was changed") from None
        reason = _layout_mismatch(path, stored)
        if reason is not None:
            raise _damaged(path, reason, fix, owned)
        if stored["kind"] not in kinds:
            raise WrongFileError(f"{path} is not a {wanted} file: it holds a "
                                 f"{describe(stored)}; nothing was changed")
    return read(path)


def _damaged(path: Path, reason: str, fix: str, owned: bool = True) -> CorruptFileError:
    """Mark ``path`` damaged when it is the workflow's (another job may have removed it)."""
    if not owned:
        return CorruptFileError(path, reason, None, fix, owned=False)
    try:
        aside: Path | None = mark_damaged(path)
    except FileNotFoundError:
        aside = None
    return CorruptFileError(path, reason, aside, fix)


# ------------------------------------------------------------------ what a file is
def _layout() -> tuple[tuple[str, re.Pattern[str]], ...]:
    """(kind, regular expression of its path) for every stored Parquet kind."""
    from pflrepro.store import paths as P

    patterns = (("run", P.RUN), ("method_aggregate", P.METHOD_AGGREGATE),
                ("experiment_aggregate", P.AGGREGATE), ("partition", P.PARTITION),
                ("public", P.PUBLIC))
    return tuple((kind, _path_regex(pattern.replace("{source}{size}", "{set}")))
                 for kind, pattern in patterns)


def _path_regex(pattern: str) -> re.Pattern[str]:
    """A path pattern (``results/runs/{experiment}/...``) as a regular expression."""
    parts = re.split(r"\{(\w+)\}", pattern)
    out = ""
    for i, part in enumerate(parts):
        if i % 2 == 0:
            out += re.escape(part)
        elif part in ("split", "seed", "size"):
            out += rf"(?P<{part}>\d+)"
        else:
            out += rf"(?P<{part}>[^/]+?)"
    return re.compile(rf"(?:^|/){out}$")


def expected_identity(path: str | os.PathLike[str]) -> dict[str, str] | None:
    """What ``path``'s place in the workflow's layout says the file is (None: no place).

    ``{"kind": "run", "experiment": ..., "partition": ..., "method": ..., "split":
    ..., "seed": ...}`` for ``results/runs/...``, and so on for
    :data:`IDENTITY_FIELDS`' kinds.
    """
    text = Path(path).as_posix()
    for kind, regex in _layout():
        match = regex.search(text)
        if match:
            fields = match.groupdict()
            return {"kind": kind, **{k: fields[k] for k in IDENTITY_FIELDS[kind]}}
    return None


def stored_identity(path: str | os.PathLike[str]) -> dict[str, str]:
    """What a stored Parquet file says it is: kind and the fields of :data:`IDENTITY_FIELDS`.

    Aggregates say it in their :data:`KIND_KEY` metadata, partitions and public sets
    in theirs, runs in their config columns (one value each); rows of runs without an
    aggregate's metadata (tables made by hand, aggregates from before the metadata)
    are a plain ``aggregate``, which no workflow path accepts. ``{"kind": "unknown"}``
    for anything else.
    """
    import pyarrow.parquet as pq

    schema = pq.read_schema(path)
    meta = schema.metadata or {}
    if KIND_KEY in meta:
        return {k: str(v) for k, v in json.loads(meta[KIND_KEY]).items()}
    if PARTITION_KEY in meta:
        p = json.loads(meta[PARTITION_KEY])
        return {"kind": "partition", "dataset": str(p.get("dataset")),
                "partition": str(p.get("id")), "split": str(p.get("seed"))}
    if PUBLIC_KEY in meta:
        p = json.loads(meta[PUBLIC_KEY])
        return {"kind": "public", "split": str(p.get("seed")),
                "set": f"{p.get('dataset')}{p.get('size')}"}
    columns = {"experiment": "experiment", "partition": "partition", "method": "method",
               "split": "split_seed", "seed": "train_seed"}
    if set(columns.values()) <= set(schema.names):
        table = pq.read_table(path, columns=list(columns.values()))
        values = {k: table.column(c).unique().to_pylist() for k, c in columns.items()}
        if all(len(v) == 1 for v in values.values()):
            return {"kind": "run", **{k: str(v[0]) for k, v in values.items()}}
    if {"metric", "value"} <= set(schema.names):  # rows of runs, no aggregate's metadata
        return {"kind": "aggregate"}
    return {"kind": "unknown"}


def describe(identity: dict[str, str]) -> str:
    """``run (experiment=tiny, method=fedavg, ...)`` for messages."""
    fields = ", ".join(f"{k}={v}" for k, v in identity.items() if k != "kind")
    return f"{identity.get('kind', 'unknown').replace('_', ' ')}" + (
        f" ({fields})" if fields else "")


def identity_mismatch(path: str | os.PathLike[str], kinds: Sequence[str] | None = None
                      ) -> str | None:
    """Why ``path`` is not the file its reader (``kinds``) and its path expect; None if it is."""
    stored = stored_identity(path)
    if kinds is not None and stored["kind"] not in kinds:
        return (f"it holds a {describe(stored)}, not a "
                f"{' or '.join(k.replace('_', ' ') for k in kinds)}")
    return _layout_mismatch(path, stored)


def _layout_mismatch(path: str | os.PathLike[str], stored: dict[str, str]) -> str | None:
    """Why the file ``stored`` describes is not the one its place says (None: it is)."""
    expected = expected_identity(path)
    if expected is None:
        return None
    if stored["kind"] != expected["kind"] or any(
            stored.get(k) != v for k, v in expected.items()):
        article = "an" if expected["kind"][0] in "aeiou" else "a"
        return (f"it holds a {describe(stored)}, but its path is that of {article} "
                f"{describe(expected)}")
    return None
