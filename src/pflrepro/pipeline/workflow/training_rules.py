"""The training rules, one family: final runs and tuning runs, one run or several per job.

A tuning run is a training run on validation rows: the same ``pflrepro train`` command
on a validation partition (:data:`~pflrepro.pipeline.workflow.tuning.TUNE_PARTITION`),
with a grid point in its spec, without a checkpoint or a progress table. Every training
rule is a :class:`TrainingRule`; :func:`training_rules` lists them for a config:

- ``train``: one final run per job (the experiments at ``runs_per_job`` 1);
- ``train_<runs>``: several final runs per job (:func:`~.jobs.train_batches`);
- ``tune_train``: one tuning run per job;
- ``tune_train_<method>_runs<i>to<j>of<n>``: several tuning runs per job
  (:func:`~.tuning.tune_batches`).

A rule of several runs names each run's table, log and checkpoint; the job's stderr goes
to a log of its own (:data:`~.jobs.BATCH_LOG`, :data:`~.tuning.TUNE_BATCH_LOG`). Each
rule's shell command is :func:`train_command` of its kind; the words of the commands and
their placeholders are the rules' own record (Snakemake reruns a job whose rule's
command text changes), so :func:`train_command` writes each kind's text exactly.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pflrepro.config import WorkflowConfig
from pflrepro.pipeline.workflow.figures import alternation
from pflrepro.pipeline.workflow.jobs import (
    BATCH_BENCHMARK,
    BATCH_LOG,
    member_wildcards,
    single_run_experiments,
    train_batches,
)
from pflrepro.pipeline.workflow.patterns import BENCHMARK, TRAIN_LOG, pattern
from pflrepro.pipeline.workflow.tuning import (
    TUNE_BATCH_BENCHMARK,
    TUNE_BATCH_LOG,
    TUNE_BENCHMARK,
    TUNE_LOG,
    TUNE_RUN,
    single_run_tune_experiments,
    tune_batches,
)
from pflrepro.store.paths import RUN

#: How every rule runs the package: this workflow's interpreter and source
#: (workflow/rules/preflight.smk), then a ``pflrepro`` subcommand.
CLI = "{params.python:q} -m pflrepro --require-source {params.source:q}"


def cli(arguments: str) -> str:
    """A rule's shell command: :data:`CLI`, then ``arguments`` (led by a space)."""
    return CLI + arguments

#: A member of a job of several runs: (grid point id or None, split seed, training seed).
Member = tuple[str | None, int, int]


def train_command(tuning: bool, several: bool) -> str:
    """The shell command of a training rule: tuning runs or final ones, one or several.

    Final runs keep a checkpoint and a progress table; a job of several runs takes each
    run's partition, checkpoint and log as lists and writes its own stderr to ``log.job``.
    """
    partition = "{params.partitions:q}" if several else "{input.partition:q}"
    words = [f" train --spec {{params.spec:q}} --data {{input.meta:q}} --partition {partition}"]
    if not tuning:
        words.append(" --checkpoint {params.checkpoints:q}" if several
                     else " --checkpoint {output:q}.ckpt")
    if several:
        words.append(" --log {params.logs:q}")
    words.append(" {params.public:q} --threads {threads:q}")
    if not tuning:
        words.append(" --progress-table")
    words.append(" --out {output:q} > " + ("{log.job:q}" if several else "{log:q}") + " 2>&1")
    return cli("".join(words))


@dataclass(frozen=True)
class TrainingRule:
    """One rule that trains runs: its name, kind, members and the experiments it serves.

    ``members`` empty: one run per job, the run the job's wildcards name. Otherwise the
    runs one job trains, for each experiment of ``experiments``, on any partition (and,
    for tuning, of ``method`` only).
    """

    name: str
    tuning: bool
    experiments: tuple[str, ...]
    members: tuple[Member, ...] = ()
    method: str | None = None
    #: The runs as a name part of the job's log and benchmark (several runs per job).
    label: str = ""

    @property
    def several(self) -> bool:
        """Whether one job trains several runs (a list of them in one process)."""
        return bool(self.members)

    def _fields(self, member: Member) -> dict[str, Any]:
        point, split, seed = member
        return {"split": split, "seed": seed, **({"point": point} if self.tuning else {})}

    def member_paths(self, template: str) -> list[str]:
        """``template`` with each member's seeds (and grid point) filled in, in order."""
        return [pattern(template, **self._fields(m)) for m in self.members]

    @property
    def outputs(self) -> list[str]:
        """The run tables the rule writes."""
        run = TUNE_RUN if self.tuning else RUN
        return self.member_paths(run) if self.several else [run]

    @property
    def logs(self) -> dict[str, Any]:
        """``job``: the process's log; ``runs``: each run's own (several runs per job)."""
        run_log = TUNE_LOG if self.tuning else TRAIN_LOG
        if not self.several:
            return {"job": run_log}
        job_log = TUNE_BATCH_LOG if self.tuning else BATCH_LOG
        return {"job": pattern(job_log, runs=self.label), "runs": self.member_paths(run_log)}

    @property
    def benchmark(self) -> str:
        """The job's Snakemake benchmark record."""
        if not self.several:
            return TUNE_BENCHMARK if self.tuning else BENCHMARK
        return pattern(TUNE_BATCH_BENCHMARK if self.tuning else BATCH_BENCHMARK,
                       runs=self.label)

    @property
    def wildcard_constraints(self) -> dict[str, str]:
        """The experiments (and, for a tuning job of several runs, the method) it serves."""
        out = {"experiment": alternation(self.experiments)}
        if self.method is not None:
            out["method"] = alternation([self.method])
        return out

    @property
    def shell(self) -> str:
        """The rule's shell command (:func:`train_command`)."""
        return train_command(self.tuning, self.several)

    def runs(self, wildcards: Any) -> list[Any]:
        """Wildcards of each run of a job (``train``'s own for a job of one run)."""
        if not self.several:
            return [wildcards]
        return [member_wildcards(wildcards, split, seed, point=point)
                for point, split, seed in self.members]


def training_rules(cfg: WorkflowConfig, raw: Mapping[str, Any]) -> list[TrainingRule]:
    """Every training rule of the config: final runs, then tuning runs (see the module)."""
    out = [TrainingRule("train", False, tuple(single_run_experiments(cfg, raw)))]
    out += [TrainingRule(b.rule, False, b.experiments, tuple((None, s, t) for s, t in b.pairs),
                         label=b.label) for b in train_batches(cfg, raw)]
    out.append(TrainingRule("tune_train", True, tuple(single_run_tune_experiments(cfg, raw))))
    out += [TrainingRule(b.rule, True, b.experiments, b.trials, method=b.method, label=b.label)
            for b in tune_batches(cfg, raw)]
    return out

