"""One row of a paper-numbers file (:mod:`pflrepro.reporting.paper` reads and checks them).

Below :mod:`pflrepro.reporting.paper` and :mod:`pflrepro.reporting.paper_settings`,
which both use it, so neither imports the other for it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PaperCell:
    """One row of a numbers file (see the module docstring)."""

    id: str
    paper: str
    table: str
    table_id: str
    setting: str
    paper_method: str
    quantity: str
    value: float | None
    unit: str
    where: str
    metric: str
    experiment: str
    partition: str
    method: str
    cpu_experiment: str
    cpu_partition: str
    planned: bool
    note: str

    def experiment_at(self, scale: str) -> str:
        """Our experiment of this cell at ``scale`` (``""``: none)."""
        return self.experiment if scale == "paper" else self.cpu_experiment

    def partition_at(self, scale: str) -> str:
        """Our partition label at ``scale`` (``""``: the experiment's only one)."""
        return self.partition if scale == "paper" else self.cpu_partition
