"""One job of a dry run, and the paths that mark its training and tuning runs.

Below :mod:`pflrepro.inspect.plan` (which parses dry runs into these) and
:mod:`pflrepro.pipeline.plan_cost` (which prices them), so neither imports the other
for it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pflrepro.pipeline.workflow.tuning import TUNE_RUN
from pflrepro.store.paths import RUN


def path_regex(template: str) -> re.Pattern[str]:
    """A regex of the paths of a pattern, matched at a path's end.

    Each ``{field}`` is a named group of one path part (``split`` and ``seed``: digits).
    """
    parts = re.split(r"\{(\w+)\}", template)
    body = "".join(re.escape(part) if i % 2 == 0
                   else f"(?P<{part}>\\d+)" if part in ("split", "seed")
                   else f"(?P<{part}>[^/]+)" for i, part in enumerate(parts))
    return re.compile(f"(?:^|/){body}$")


#: Paths of a training run's and a tuning run's table (what marks a job as training).
RUN_PATH = path_regex(RUN)
TUNE_RUN_PATH = path_regex(TUNE_RUN)


@dataclass
class PlannedJob:
    """One job of a dry run."""

    rule: str
    wildcards: dict[str, str] = field(default_factory=dict)
    outputs: list[str] = field(default_factory=list)
    #: The kinds of reason, lower case, without their file lists.
    reasons: list[str] = field(default_factory=list)
    #: The parameters whose value changed (:func:`changed_params`), from the reason.
    changed: list[str] = field(default_factory=list)

    def runs(self, kind: str = "train") -> list[tuple[str, str]]:
        """(experiment, method) of each run of ``kind`` this job trains.

        Its outputs at a training run's path (``kind`` ``"train"``) or at a tuning run's
        path (``"tune"``).
        """
        regex = RUN_PATH if kind == "train" else TUNE_RUN_PATH
        return [(m["experiment"], m["method"]) for o in self.outputs
                if (m := regex.search(o)) is not None]

    @property
    def training_runs(self) -> int:
        """Training runs this job trains (0 for a job that trains none)."""
        return len(self.runs("train"))

    @property
    def tuning_runs(self) -> int:
        """Tuning runs this job trains (0 for a job that trains none)."""
        return len(self.runs("tune"))
