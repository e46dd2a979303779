"""What the workflow builds: every experiment's, partition's, claim's and table's targets.

Also the targets of the stored data and partitions, the partial reports of a build
that stopped early, and the labels and methods a table is given.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pflrepro.config import WorkflowConfig, canonical_json
from pflrepro.pipeline.workflow.figures import figure_paths
from pflrepro.pipeline.workflow.jobs import method_aggregate_paths, run_paths
from pflrepro.pipeline.workflow.patterns import (
    CLAIMS_TABLE,
    CLAIMS_TABLES,
    COMBINED_TABLE,
    COMMUNICATION_TABLE,
    COST_TABLE,
    PARTIAL_REPORT,
    PARTITION_FIGURE,
    PARTITION_STATS,
    TABLE,
    TRAIN_LOG,
)
from pflrepro.store.paths import AGGREGATE, PARTITION, PUBLIC, RUN

if TYPE_CHECKING:
    from pflrepro.reporting.claims.parse import Claim


def experiment_targets(cfg: WorkflowConfig, experiment: str) -> list[str]:
    """Table files and figures of one experiment."""
    out = [TABLE.format(experiment=experiment, ext=ext) for ext in ("md", "tex", "csv")]
    out += [COMMUNICATION_TABLE.format(experiment=experiment, ext=ext) for ext in ("md", "csv")]
    out += cost_targets(experiment)
    return out + figure_paths(cfg, experiment)


def partition_targets(cfg: WorkflowConfig, experiments: Iterable[str]) -> list[str]:
    """Statistics tables and label-distribution figures of the experiments' partitions."""
    out: list[str] = []
    for name in experiments:
        exp = cfg.experiments[name]
        for p in exp.partitions:
            for split in exp.split_seeds:
                keys = {"dataset": exp.dataset, "partition": p.id, "split": split}
                out += [PARTITION_STATS.format(**keys, kind=k)
                        for k in ("clients.csv", "summary.md")]
                out += [PARTITION_FIGURE.format(**keys, ext=ext) for ext in ("pdf", "png")]
                if exp.public is not None:
                    out.append(PUBLIC.format(**keys, source=exp.public.dataset,
                                             size=exp.public.size))
    return list(dict.fromkeys(out))


def stored_targets(cfg: WorkflowConfig, experiments: Iterable[str]) -> list[str]:
    """The files behind the experiments' tables: partitions, runs and aggregates.

    They are targets of ``all`` as well as inputs. A job that finds one damaged sets
    it aside (:func:`pflrepro.store.io.read_verified`), and a missing target is rebuilt, with
    everything made from it; a file that is only an input is not rebuilt while the
    outputs made from it exist (Snakemake would say "Nothing to be done").
    """
    out: list[str] = []
    for name in experiments:
        exp = cfg.experiments[name]
        out += [PARTITION.format(dataset=exp.dataset, partition=p.id, split=split)
                for p in exp.partitions for split in exp.split_seeds]
        out += [path for method in exp.methods for path in run_paths(cfg, name, method)]
        out += method_aggregate_paths(cfg, name) + [AGGREGATE.format(experiment=name)]
    return list(dict.fromkeys(out))


def chosen_experiments(cfg: WorkflowConfig) -> list[str]:
    """The experiments of the selected scale."""
    return [n for n, e in cfg.experiments.items() if e.scale == cfg.scale]


def drop_local_rate_limiter(workflow: Any) -> bool:
    """Switch off Snakemake's job-rate limiter for a run on the local executor.

    Called from the Snakefile's ``onstart`` (after Snakemake made its scheduler, before
    the first job). The limiter (``--max-jobs-per-timespan``, CLI default 100/1s; the
    Python API's default is none) arms a one-second timer after every pass of the
    scheduler loop, and every finished job starts one more such chain
    (snakemake/snakemake PR #3744): the loop runs about once a second per job finished
    so far, and each pass looks at every waiting job (a profile of the demo: 13,327
    passes for 100 jobs). On the CPU scale (about 700 jobs, 2 cores) Snakemake's own
    process used a third of a core for the whole build (15.7 of 66 CPU-min).
    Locally at most ``--cores`` jobs run at once, so there is nothing to limit; a cluster
    executor (SLURM) keeps its limiter. Returns whether it was switched off (False where
    this Snakemake names things otherwise: then nothing changes).
    """
    plugin = getattr(workflow, "executor_plugin", None)
    scheduler = getattr(workflow, "scheduler", None)
    if (getattr(plugin, "name", None) != "local"
            or getattr(scheduler, "job_rate_limiter", None) is None):
        return False
    scheduler.job_rate_limiter = None
    return True


def runs_here(workflow: Any) -> bool:
    """Whether Snakemake runs its jobs on this machine (the local executor).

    Known from the Snakefile's ``onstart`` on (the executor is set after parsing).
    """
    return getattr(getattr(workflow, "executor_plugin", None), "name", None) == "local"


def write_partial_reports(cfg: WorkflowConfig) -> list[str]:
    """After a failed workflow: partial tables of the experiments missing some runs.

    Returns the reports written (see :mod:`pflrepro.reporting.partial`).
    """
    from pflrepro.reporting.partial import PartialRun, write_partial_report

    written = []
    for name in chosen_experiments(cfg):
        runs = []
        for method in cfg.experiments[name].methods:
            for k in cfg.runs(name, method):
                where = dict(experiment=k.experiment, partition=k.partition, method=k.method,
                             split=k.split, seed=k.seed)
                runs.append(PartialRun(RUN.format(**where), TRAIN_LOG.format(**where),
                                       f"{k.method}, {k.partition}, split {k.split}, "
                                       f"seed {k.seed}"))
        md = PARTIAL_REPORT.format(experiment=name, ext="md")
        present, missing = write_partial_report(
            name, runs, md, PARTIAL_REPORT.format(experiment=name, ext="csv"))
        if present and missing:
            written.append(md)
    return written


def clear_partial_reports(cfg: WorkflowConfig) -> list[str]:
    """After a successful workflow: remove the partial tables of complete experiments.

    A partial table (:func:`write_partial_reports`) stands for runs that failed; once
    every run of its experiment exists, the experiment's real table replaces it, and a
    stale partial one beside it would say otherwise. Returns the files removed.
    """
    removed = []
    for name in chosen_experiments(cfg):
        if not all(Path(RUN.format(experiment=k.experiment, partition=k.partition,
                                   method=k.method, split=k.split, seed=k.seed)).is_file()
                   for method in cfg.experiments[name].methods for k in cfg.runs(name, method)):
            continue
        for ext in ("md", "csv"):
            path = Path(PARTIAL_REPORT.format(experiment=name, ext=ext))
            if path.is_file():
                path.unlink()
                removed.append(str(path))
    return removed


def all_targets(cfg: WorkflowConfig, claims: Sequence[Claim] | None = None) -> list[str]:
    """Everything of the selected scale.

    That is the experiments' tables and figures, the combined tables, every
    partition's report, the files they are made from (:func:`stored_targets`), and
    the claims table (:func:`claims_targets`) when ``claims`` are given.
    """
    chosen = chosen_experiments(cfg)
    out = [t for name in chosen for t in experiment_targets(cfg, name)]
    for name, table in cfg.tables.items():
        if table.scale == cfg.scale:
            out += [COMBINED_TABLE.format(table=name, ext=ext) for ext in ("md", "tex", "csv")]
    out += partition_targets(cfg, chosen)
    out += stored_targets(cfg, chosen)
    return out + (claims_targets(cfg, claims) if claims is not None else [])


def claims_scale(name: str) -> str:
    """The scale whose claims table is ``name`` (the ``claims`` wildcard)."""
    for scale, table in CLAIMS_TABLES.items():
        if table == name:
            return scale
    raise ValueError(f"unknown claims table {name!r}; expected one of "
                     f"{sorted(CLAIMS_TABLES.values())}")


def claims_experiments(cfg: WorkflowConfig, claims: Sequence[Claim], name: str) -> list[str]:
    """Experiments of the config that the claims table ``name`` reads (others: missing)."""
    from pflrepro.reporting.claims.parse import claim_experiments

    return [e for e in claim_experiments(claims, claims_scale(name)) if e in cfg.experiments]


def claims_inputs(cfg: WorkflowConfig, claims: Sequence[Claim], name: str) -> list[str]:
    """Aggregates of the experiments the claims table ``name`` reads."""
    return [AGGREGATE.format(experiment=e) for e in claims_experiments(cfg, claims, name)]


def claims_targets(cfg: WorkflowConfig, claims: Sequence[Claim]) -> list[str]:
    """The claims table of the selected scale, if the config has an experiment it reads.

    Raises ``ValueError`` when an experiment or table is named like a claims table
    (their outputs would collide).
    """
    clash = sorted(set(CLAIMS_TABLES.values()) & (set(cfg.experiments) | set(cfg.tables)))
    if clash:
        raise ValueError(f"experiment or table name(s) {clash} are reserved for the claims "
                         "tables; rename them")
    name = CLAIMS_TABLES[cfg.scale]
    if not claims_experiments(cfg, claims, name):
        return []
    return [CLAIMS_TABLE.format(claims=name, ext=ext) for ext in ("md", "csv")]


def cost_targets(experiment: str) -> list[str]:
    """The cost table (Markdown, CSV) of one experiment."""
    return [COST_TABLE.format(experiment=experiment, kind="cost", ext=ext) for ext in ("md", "csv")]


def table_inputs(cfg: WorkflowConfig, table: str) -> list[str]:
    """Experiment aggregates a combined table reads."""
    return [AGGREGATE.format(experiment=e) for e in cfg.tables[table].experiments]


def partitions_by_dataset(cfg: WorkflowConfig) -> dict[str, list[str]]:
    """Data set -> the ids of the partitions its experiments use (any scale), in order."""
    out: dict[str, list[str]] = {}
    for exp in cfg.experiments.values():
        ids = out.setdefault(exp.dataset, [])
        ids += [p.id for p in exp.partitions if p.id not in ids]
    return out


def partition_title(cfg: WorkflowConfig, dataset: str, partition: str, split: int | str
                    ) -> str:
    """A partition figure's title: its data set, its label (else its id) and split."""
    labels = {exp.partition_labels[partition] for exp in cfg.experiments.values()
              if exp.dataset == dataset and partition in exp.partition_labels}
    shown = " / ".join(sorted(labels)) if labels else partition
    return f"{dataset}: {shown}, split {split}"


def display_labels(cfg: WorkflowConfig, experiments: Iterable[str]) -> str:
    """JSON of display labels of partitions, experiments and methods (id -> label each).

    ``methods`` holds only the variants whose config gives a ``label``, ``groups`` the
    partitions whose scheme names its groups (a rotation's angles).
    """
    names = list(experiments)
    partitions: dict[str, str] = {}
    methods: dict[str, str] = {}
    groups: dict[str, list[str]] = {}
    for name in names:
        exp = cfg.experiments[name]
        partitions.update(exp.partition_labels)
        methods.update({m: cfg.methods[m].label for m in exp.methods if cfg.methods[m].label})
        groups.update({p.id: list(p.group_names()) for p in exp.partitions
                       if p.group_names()})
    return canonical_json({"partitions": partitions,
                           "experiments": {n: cfg.experiments[n].label for n in names},
                           "methods": methods, "groups": groups})
