"""Where a writer may write: regular files only, folders created only inside the project.

A writer replaces its output by renaming a finished temporary file onto it
(:func:`pflrepro.store.io.atomic_path`). Renaming onto a device node replaces the node;
onto a FIFO, it hands nothing to whoever reads it; onto a folder, it fails late. So
every output path is checked first (:func:`check_output_target`); a link at the path is
replaced by the new file, never written through.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path


class NotRegularFileError(OSError):
    """An output path that exists and is no regular file (a device, FIFO, socket, folder)."""


#: What each non-regular kind of directory entry is called in messages.
_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO"),
          (stat.S_ISSOCK, "a socket"))


def entry_kind(path: str | os.PathLike[str]) -> str | None:
    """What ``path`` is when it exists and is neither a regular file nor a link, else None.

    Links are not followed: a link at ``path`` is replaced by a writer, never written
    through.
    """
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return None
    if stat.S_ISREG(mode) or stat.S_ISLNK(mode):
        return None
    return next((name for test, name in _KINDS if test(mode)), "no regular file")


def _inside(path: Path, root: Path) -> bool:
    return Path(os.path.abspath(path)).is_relative_to(Path(os.path.abspath(root)))


def check_output_target(target: Path) -> None:
    """Refuse an output path that is no regular file; create its missing folders.

    Every writer goes through here (:func:`pflrepro.store.io.atomic_path`): an
    existing device, FIFO, socket or folder at ``target`` is refused (renaming over it
    would replace the device node, or write nothing where a reader waits). The
    command line is stricter about folders (:func:`target_problem`, which
    :func:`pflrepro.cli.options.output_file` asks).
    """
    kind = entry_kind(target)
    if kind is not None:
        err = errno.EISDIR if kind == "a directory" else errno.EINVAL
        raise NotRegularFileError(err, f"is {kind}, not a regular file: pflrepro writes "
                                       "only regular files", str(target))
    parent = target.parent
    if os.path.lexists(parent) and not parent.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, "is not a folder", str(parent))
    parent.mkdir(parents=True, exist_ok=True)


def target_problem(target: str | os.PathLike[str]) -> str | None:
    """Why ``target`` cannot be an output (:func:`check_output_target`'s reasons), or None.

    Only looks: creates nothing.
    """
    path = Path(target)
    kind = entry_kind(path)
    if kind is not None:
        return f"{path} is {kind}, not a regular file: pflrepro writes only regular files"
    parent = path.parent
    if parent.is_dir():
        return None
    if os.path.lexists(parent):
        return f"{parent} is not a folder"
    if not _inside(parent, Path.cwd()):
        return (f"{parent}: no such folder (pflrepro creates missing folders only inside "
                "the working directory: create it first)")
    return None


def entry_problem(path: str | os.PathLike[str], root: str | os.PathLike[str]) -> str | None:
    """Why ``path`` is not a stored file to read, or None when it is a regular file.

    Not a regular file (a folder, FIFO, socket or device: opening a FIFO waits for a
    writer forever), or a link that leads out of ``root`` (the project) or to no
    regular file. A link inside the project to a regular file is read as usual.
    """
    kind = entry_kind(path)
    if kind is not None:
        return f"it is {kind}, not a regular file"
    if not os.path.islink(path):
        return None
    target = Path(os.path.realpath(path))
    if not _inside(target, Path(root)):
        return "it is a link that leads out of the project"
    if not target.is_file():
        return "it is a link to no regular file"
    return None
