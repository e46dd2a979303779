"""Adapters between the parsed config and Snakemake: paths, targets and job parameters.

The rule files call these functions and hold no logic of their own. Every path
pattern lives here once, as a constant the rules use for their outputs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from pflrepro.config import RunKey, WorkflowConfig, canonical_json
from pflrepro.data.datasets import DATASETS

DATA_META = "results/data/{dataset}/meta.json"
PARTITION = "results/partitions/{dataset}/{partition}/split{split}.parquet"
RUN = "results/runs/{experiment}/{partition}/{method}/split{split}-seed{seed}.parquet"
METHOD_AGGREGATE = "results/aggregate/{experiment}/{method}.parquet"
AGGREGATE = "results/aggregate/{experiment}.parquet"
TABLE = "results/tables/{experiment}.{ext}"
FIGURE = "figures/{experiment}-{kind}.{ext}"
PARTITION_STATS = "results/partitions/{dataset}/{partition}/split{split}-{kind}"
PARTITION_FIGURE = "figures/partitions/{dataset}/{partition}-split{split}.{ext}"

WEIGHTED_ALGORITHMS = ("federico",)  # methods whose client weights get a heatmap


def alternation(names: Iterable[str]) -> str:
    """Regex matching exactly one of ``names`` (for wildcard constraints)."""
    names = sorted(names, key=len, reverse=True)
    return "|".join(re.escape(n) for n in names) if names else r"(?!)"


def dataset_names() -> list[str]:
    """Every registered data set."""
    return sorted(DATASETS)


def weights_method(cfg: WorkflowConfig, experiment: str) -> str:
    """The first method of ``experiment`` whose algorithm records client weights."""
    for m in cfg.experiments[experiment].methods:
        if cfg.methods[m].algorithm in WEIGHTED_ALGORITHMS:
            return m
    raise ValueError(f"experiment {experiment!r} has no method with client weights "
                     f"(algorithms {list(WEIGHTED_ALGORITHMS)})")


def experiment_targets(cfg: WorkflowConfig, experiment: str) -> list[str]:
    """Table files and figures of one experiment."""
    out = [TABLE.format(experiment=experiment, ext=ext) for ext in ("md", "tex", "csv")]
    kinds = ["accuracy"]
    try:
        weights_method(cfg, experiment)
        kinds.append("weights")
    except ValueError:
        pass
    for kind in kinds:
        out += [FIGURE.format(experiment=experiment, kind=kind, ext=ext) for ext in ("pdf", "png")]
    return out


def partition_targets(cfg: WorkflowConfig) -> list[str]:
    """Statistics tables and label-distribution figures of every partition."""
    out = []
    for dataset, pid, split in cfg.partitions():
        keys = {"dataset": dataset, "partition": pid, "split": split}
        out += [PARTITION_STATS.format(**keys, kind=k) for k in ("clients.csv", "summary.md")]
        out += [PARTITION_FIGURE.format(**keys, ext=ext) for ext in ("pdf", "png")]
    return out


def all_targets(cfg: WorkflowConfig) -> list[str]:
    """Every table and figure of every experiment, and every partition's report."""
    return [t for name in cfg.experiments for t in experiment_targets(cfg, name)] + \
        partition_targets(cfg)


def _key(wildcards: Any) -> RunKey:
    return RunKey(experiment=wildcards.experiment, partition=wildcards.partition,
                  method=wildcards.method, split=int(wildcards.split), seed=int(wildcards.seed))


def run_spec_json(cfg: WorkflowConfig, wildcards: Any) -> str:
    """The train job's spec as canonical JSON (a Snakemake ``params`` value)."""
    return canonical_json(cfg.run_spec(_key(wildcards)))


def partition_spec_json(cfg: WorkflowConfig, wildcards: Any) -> str:
    """The partitioner's spec for the partition job, as canonical JSON."""
    return canonical_json(cfg.partition_spec(wildcards.dataset, wildcards.partition).spec())


def run_paths(cfg: WorkflowConfig, experiment: str, method: str) -> list[str]:
    """Run tables of one method of one experiment."""
    return [RUN.format(experiment=k.experiment, partition=k.partition, method=k.method,
                       split=k.split, seed=k.seed) for k in cfg.runs(experiment, method)]


def method_aggregate_paths(cfg: WorkflowConfig, experiment: str) -> list[str]:
    """Per-method aggregates of one experiment."""
    return [METHOD_AGGREGATE.format(experiment=experiment, method=m)
            for m in cfg.experiments[experiment].methods]


def experiment_path(cfg: WorkflowConfig, wildcards: Any, what: str) -> str:
    """Inputs of a train job: the data set's ``meta`` or the ``partition`` file."""
    exp = cfg.experiments[wildcards.experiment]
    if what == "meta":
        return DATA_META.format(dataset=exp.dataset)
    if what == "partition":
        exp.partition(wildcards.partition)
        return PARTITION.format(dataset=exp.dataset, partition=wildcards.partition,
                                split=wildcards.split)
    raise ValueError(f"unknown train input {what!r}")


def train_resource(cfg: WorkflowConfig, wildcards: Any, name: str) -> int:
    """``gpu``, ``mem_mb`` or ``runtime`` (minutes) of a train job, from the experiment."""
    res: Mapping[str, int] = cfg.experiments[wildcards.experiment].resources
    return int(res[name])


def mirror_args(cfg: WorkflowConfig, dataset: str) -> str:
    """``--mirror URL`` arguments for a data set's configured mirrors (shell-quoted)."""
    import shlex

    return " ".join(f"--mirror {shlex.quote(m)}" for m in cfg.mirrors.get(dataset, ()))
