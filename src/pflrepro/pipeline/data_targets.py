"""The prepared data sets' arrays as targets of the workflow's default rule.

``x.npy`` and ``y.npy`` are outputs of ``prepare_data`` that no job declares as an
input (the jobs declare ``meta.json``): Snakemake reruns a job for a missing output
only when some job needs that file, so a damaged array set aside (or ``x.npy`` removed
for a damaged ``meta.json``) would stay missing, and the next ``snakemake`` would say
"Nothing to be done". Named by the target rule ``all`` instead, the missing array
makes Snakemake prepare the set again, and everything made from it follows (its
``meta.json`` is newer). Declaring them as inputs of ``partition`` would do the same
but change every partition job's recorded inputs, which Snakemake's ``input`` rerun
trigger answers by rebuilding every partition and run once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pflrepro.store.paths import DATA_DIR

if TYPE_CHECKING:
    from pflrepro.config import WorkflowConfig

#: The arrays of a prepared data set (its ``meta.json`` is the jobs' input).
ARRAYS = ("x.npy", "y.npy")


def prepared_arrays(cfg: WorkflowConfig, experiments: list[str]) -> list[str]:
    """``x.npy`` and ``y.npy`` of every data set ``experiments`` train or distill on."""
    sets: dict[str, None] = {}
    for name in experiments:
        exp = cfg.experiments[name]
        sets[exp.dataset] = None
        if exp.public is not None:
            sets[exp.public.dataset] = None
    return [f"{DATA_DIR.format(dataset=s)}/{a}" for s in sets for a in ARRAYS]
