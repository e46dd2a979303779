"""Damaged outputs: set aside, or kept in place dated 1970 so that Snakemake rebuilds them.

:func:`set_aside` moves a file (or whatever entry holds its name) to a free
``<file>.corrupt-<n>``; :func:`mark_damaged` keeps the file where it is for the jobs of
a running Snakemake, links a copy aside and dates the file older than any input; and
:func:`forget_snakemake_record` removes Snakemake's record of an output, without which
the date alone would not rerun its job. Used by :mod:`pflrepro.store.io`'s readers and
by ``pflrepro verify``.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

#: The modification time given to a damaged file: older than any input (1 s, not 0:
#: Snakemake skips its input-newer check for an output whose oldest mtime is 0).
DAMAGED_MTIME = 1


def set_aside(path: str | os.PathLike[str]) -> Path:
    """Rename ``path`` to the first free ``<path>.corrupt-<n>`` (n = 1, 2, ...); return it."""
    path = Path(path)
    n = 1
    while (aside := path.with_name(f"{path.name}.corrupt-{n}")).exists():
        n += 1
    path.rename(aside)
    return aside


def mark_damaged(path: str | os.PathLike[str]) -> Path:
    """Keep a copy of ``path`` as ``<path>.corrupt-<n>`` and date ``path`` 1970-01-01.

    The file stays where it is, so the jobs of a running Snakemake that take it as an
    input can start (and fail, naming it); dated older than every input of the job
    that made it, it is rebuilt by the next ``snakemake``, with everything made from
    it. The copy is a hard link (a plain copy where links are not supported); a file
    already linked as some ``.corrupt-<n>`` (another job found it first) is not
    linked twice. Returns the copy. ``FileNotFoundError`` when ``path`` is gone.

    A symbolic link is handled as itself, never through its target: the copy links
    the link, and the link's own date is set (Snakemake dates an output link by the
    link), so the next ``snakemake`` replaces the link and the file it points to
    stays as it is.
    """
    path = Path(path)
    link = path.is_symlink()
    n = 1
    while os.path.lexists(aside := path.with_name(f"{path.name}.corrupt-{n}")):
        if _same_entry(aside, path):
            break
        n += 1
    else:
        try:
            os.link(path, aside, follow_symlinks=False)
        except FileExistsError:  # another job linked it in between
            return mark_damaged(path)
        except OSError:  # no hard links here
            shutil.copy2(path, aside, follow_symlinks=False)
    os.utime(path, (DAMAGED_MTIME, DAMAGED_MTIME), follow_symlinks=not link)
    forget_snakemake_record(path)
    return aside


def _same_entry(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` are one directory entry's inode (links not followed)."""
    sa, sb = os.lstat(a), os.lstat(b)
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def forget_snakemake_record(path: str | os.PathLike[str]) -> bool:
    """Remove Snakemake's metadata record of the output ``path``, if there is one.

    Snakemake records, per output, the checksums of its job's small inputs, and an
    input newer than the output does not rerun the job when its checksum is the one
    recorded: a damaged file dated 1970 would not be rebuilt. Without the record the
    job reruns. The record is ``.snakemake/metadata/<urlsafe base64 of the path as
    the rule names it>`` in the working directory (Snakemake 8-9's file persistence;
    names over the file system's limit split into ``@``-prefixed folders); ``path``
    is taken relative to the working directory, as the rules name their outputs.
    Returns whether a record was removed.
    """
    import base64

    target = Path(os.path.abspath(path))
    try:
        rel = target.relative_to(Path.cwd()).as_posix()
    except ValueError:
        return False
    metadata = Path(".snakemake") / "metadata"
    if not metadata.is_dir():
        return False
    b64 = base64.urlsafe_b64encode(rel.encode()).decode()
    limit = os.pathconf(metadata, "PC_NAME_MAX") or 255
    parts = [b64[i:i + limit - 1] for i in range(0, len(b64), limit - 1)]
    record = metadata.joinpath(*(["@" + part for part in parts[:-1]] + parts[-1:]))
    try:
        record.unlink()
    except FileNotFoundError:
        return False
    return True


#: Where :func:`set_aside_unreadable_records` moves Snakemake records it cannot read.
DAMAGED_RECORDS = Path(".snakemake") / "metadata-damaged"


def set_aside_unreadable_records(workdir: str | os.PathLike[str] = ".") -> list[Path]:
    """Move Snakemake's per-output records that are no JSON object out of its way.

    Snakemake reads ``.snakemake/metadata/<name>`` as JSON when it plans a job; bytes
    that are not (a disk error, a copy gone wrong) fail every later run with a
    traceback that names no file. Such a record is moved to
    ``.snakemake/metadata-damaged/`` (kept, not deleted); Snakemake then treats its
    output as one without a record (judged by dates). Returns where each one went.
    """
    import json

    root = Path(workdir)
    metadata = root / ".snakemake" / "metadata"
    moved = []
    for folder, _, names in os.walk(metadata):
        for name in names:
            path = Path(folder) / name
            try:
                if path.is_symlink() or not path.is_file():
                    raise ValueError("not a regular file")
                if not isinstance(json.loads(path.read_bytes().decode("utf-8")), dict):
                    raise ValueError("not a JSON object")
            except (ValueError, UnicodeDecodeError):
                target = root / DAMAGED_RECORDS / path.relative_to(metadata)
                target.parent.mkdir(parents=True, exist_ok=True)
                moved.append(set_aside_to(path, target))
            except OSError:
                continue  # unreadable for permissions: Snakemake says so itself
    return moved


def set_aside_to(path: Path, target: Path) -> Path:
    """Rename ``path`` to ``target``, or to the first free ``<target>.<n>``; return it."""
    n, free = 0, target
    while os.path.lexists(free):
        n += 1
        free = target.with_name(f"{target.name}.{n}")
    path.rename(free)
    return free
