"""The prepared data sets' files as targets of the workflow's default rule.

``x.npy`` and ``y.npy`` are outputs of ``prepare_data`` that no job declares as an
input (the jobs declare ``meta.json``), and a job whose outputs exist is not looked at
for a missing input: Snakemake reruns a job for a missing file only when a job it
schedules needs that file. So a damaged array set aside (or ``x.npy`` removed for a
damaged ``meta.json``), or a deleted ``meta.json``, would stay missing, and the next
``snakemake`` would say "Nothing to be done". Named by the target rule ``all``
instead, the missing file makes Snakemake prepare the set again, and everything made
from it follows (its ``meta.json`` is newer). Declaring the arrays as inputs of
``partition`` would do the same but change every partition job's recorded inputs,
which Snakemake's ``input`` rerun trigger answers by rebuilding every partition and run
once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pflrepro.store.paths import DATA_DIR

if TYPE_CHECKING:
    from pflrepro.config import WorkflowConfig

#: The files of a prepared data set (``meta.json`` is the jobs' input).
PREPARED_FILES = ("meta.json", "x.npy", "y.npy")


def prepared_files(cfg: WorkflowConfig, experiments: list[str]) -> list[str]:
    """The files (:data:`PREPARED_FILES`) of the data sets ``experiments`` use."""
    sets: dict[str, None] = {}
    for name in experiments:
        exp = cfg.experiments[name]
        sets[exp.dataset] = None
        if exp.public is not None:
            sets[exp.public.dataset] = None
    return [f"{DATA_DIR.format(dataset=s)}/{a}" for s in sets for a in PREPARED_FILES]
