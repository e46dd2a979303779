"""Reading a text output of the workflow (a table, a report page) that a job reads again.

A table the workflow wrote carries a digest record (:func:`pflrepro.store.io.digest_path`);
a job that reads it (the report page of a table) checks what it is before opening it,
as :func:`pflrepro.store.io.read_verified` does for the stored Parquet files.
"""

from __future__ import annotations

import os
from pathlib import Path

from pflrepro.store.damage import set_aside
from pflrepro.store.io import (
    CorruptFileError,
    DamagedRecord,
    WrongFileError,
    read_record,
    record_label,
    results_project,
    sha256_file,
)
from pflrepro.store.targets import entry_problem

#: What a damaged text output's message says to do.
REBUILD = "rerun snakemake: the file is missing now, so Snakemake builds it again"


def read_recorded_text(path: str | os.PathLike[str]) -> str:
    """The text of ``path``, after checking it is the file its writer wrote.

    An entry that is no regular file (a folder, FIFO, socket, device, or a link out of
    the project) is never opened: inside a ``results`` tree it is set aside
    (``.corrupt-N``) so that the next ``snakemake`` builds it again, and
    :class:`CorruptFileError` says so; elsewhere :class:`WrongFileError` refuses it and
    nothing changes. A file with a digest record must match it (else it is set aside
    the same way inside a results tree); one without a record (a table written by
    hand) is read as it is. A missing file raises ``FileNotFoundError``.
    """
    path = Path(path)
    if not os.path.lexists(path):
        raise FileNotFoundError(2, "not found", str(path))
    project = results_project(path)
    problem = entry_problem(path, project or Path.cwd())
    if problem is None:
        try:
            record = read_record(path)
        except DamagedRecord as err:
            record, problem = None, f"its digest record is damaged: {err}"
    if problem is None:
        if record is None:
            return path.read_text(encoding="utf-8")
        expected, name = record
        if name == path.name and sha256_file(path) == expected:
            return path.read_text(encoding="utf-8")
        problem = f"it does not match its digest record {record_label(path)}"
    if project is None:
        raise WrongFileError(f"{path} is not a file to read: {problem}; nothing was changed")
    raise CorruptFileError(path, problem, set_aside(path), REBUILD, moved=True)
