"""Job parameters of the rules.

Run and partition specs, public sets, mirrors, resources, and the batches of runs that
share one training job.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pflrepro.config import RunKey, WorkflowConfig, canonical_json
from pflrepro.config.codedigest import partition_code_digest
from pflrepro.data.checksums import checksum_args
from pflrepro.pipeline.workflow.figures import figure_methods
from pflrepro.pipeline.workflow.patterns import DATA_META
from pflrepro.store.paths import METHOD_AGGREGATE, PARTITION, PUBLIC, RUN


def _key(wildcards: Any) -> RunKey:
    return RunKey(experiment=wildcards.experiment, partition=wildcards.partition,
                  method=wildcards.method, split=int(wildcards.split), seed=int(wildcards.seed))


def run_spec_json(cfg: WorkflowConfig, wildcards: Any) -> str:
    """The train job's spec as canonical JSON (a Snakemake ``params`` value)."""
    return canonical_json(cfg.run_spec(_key(wildcards)))


def partition_spec_json(cfg: WorkflowConfig, wildcards: Any) -> str:
    """The partitioner's spec for the partition job, as canonical JSON."""
    return canonical_json(cfg.partition_spec(wildcards.dataset, wildcards.partition).spec())


def partition_code(cfg: WorkflowConfig, wildcards: Any) -> str:
    """Digest of the code a partition job runs (a param, so edits re-partition)."""
    scheme = cfg.partition_spec(wildcards.dataset, wildcards.partition).scheme
    return partition_code_digest(scheme)


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


def train_public_inputs(cfg: WorkflowConfig, wildcards: Any) -> dict[str, str]:
    """A train job's public-set inputs (``public``, ``public_meta``), or none."""
    exp = cfg.experiments[wildcards.experiment]
    if exp.public is None:
        return {}
    return {"public": PUBLIC.format(dataset=exp.dataset, partition=wildcards.partition,
                                    split=wildcards.split, source=exp.public.dataset,
                                    size=exp.public.size),
            "public_meta": DATA_META.format(dataset=exp.public.dataset)}


def train_public_args(cfg: WorkflowConfig, wildcards: Any) -> str:
    """``--public FILE --public-data META`` for a train job whose experiment has one."""
    paths = train_public_inputs(cfg, wildcards)
    if not paths:
        return ""
    return f"--public {paths['public']} --public-data {paths['public_meta']}"


def train_resource(cfg: WorkflowConfig, wildcards: Any, name: str) -> int:
    """``gpu``, ``mem_mb`` or ``runtime`` (minutes) of a train job, from the experiment."""
    res: Mapping[str, int] = cfg.experiments[wildcards.experiment].resources
    return int(res[name])


# ------------------------------------------------------------- runs sharing a job
#: A job that trains several runs of one experiment, partition and method (the rules
#: ``train_<runs>``, ``runs`` e.g. ``s0t0_s1t0``: split 0 seed 0, split 1 seed 0): its
#: benchmark record and its own log (the process's stderr: every member's lines, and
#: what happens before the first run starts); each run logs to TRAIN_LOG as alone.
BATCH_BENCHMARK = ("results/benchmarks/train/{experiment}/{partition}/{method}/"
                   "runs-{runs}.tsv")
BATCH_LOG = "logs/train/{experiment}/{partition}/{method}/runs-{runs}.log"
#: Runs per training job by scale where the config's ``runs_per_job`` says nothing
#: (the schema's defaults; None: all runs of an experiment, partition and method).
RUNS_PER_JOB: Mapping[str, int | None] = {"paper": 1, "cpu": None}


@dataclass(frozen=True)
class TrainBatch:
    """The (split, seed) runs one training job trains, for each of ``experiments``.

    One Snakemake rule each (:attr:`rule`), its ``experiment`` wildcard limited to
    ``experiments``; ``partition`` and ``method`` stay wildcards.
    """

    pairs: tuple[tuple[int, int], ...]
    experiments: tuple[str, ...]

    @property
    def label(self) -> str:
        """The runs as a name part, e.g. ``s0t0_s1t0`` (split 0 seed 0, split 1 seed 0)."""
        return "_".join(f"s{split}t{seed}" for split, seed in self.pairs)

    @property
    def rule(self) -> str:
        """The Snakemake rule that trains them."""
        return f"train_{self.label}"


def runs_per_job(raw: Mapping[str, Any], scale: str) -> int | None:
    """The config's runs per training job at ``scale`` (None: all of a method's runs)."""
    value = dict(raw.get("runs_per_job") or {}).get(scale, RUNS_PER_JOB[scale])
    if value == "all" or value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"runs_per_job.{scale}: a positive integer or 'all', got {value!r}")
    return value


def train_batches(cfg: WorkflowConfig, raw: Mapping[str, Any]) -> list[TrainBatch]:
    """The jobs of the experiments whose scale trains several runs per job.

    An experiment's runs of one partition and method are its seed pairs in order
    (:meth:`pflrepro.config.ExperimentConfig.seed_pairs`), cut into chunks of
    ``runs_per_job`` (the last may be shorter); experiments with the same chunk share
    its rule. Experiments at one run per job are left to the ``train`` rule
    (:func:`single_run_experiments`).
    """
    found: dict[tuple[tuple[int, int], ...], list[str]] = {}
    for name, exp in cfg.experiments.items():
        size = runs_per_job(raw, exp.scale)
        if size == 1:
            continue
        for chunk in chunks(exp.seed_pairs(), size):
            found.setdefault(chunk, []).append(name)
    return [TrainBatch(pairs, tuple(names)) for pairs, names in found.items()]


def single_run_experiments(cfg: WorkflowConfig, raw: Mapping[str, Any]) -> list[str]:
    """Experiments trained one run per job (the ``train`` rule's ``experiment``)."""
    return [name for name, exp in cfg.experiments.items()
            if runs_per_job(raw, exp.scale) == 1]


def member_wildcards(wildcards: Any, split: int, seed: int, point: str | None = None) -> Any:
    """A batch job's wildcards with one member's ``split`` and ``seed`` (as the train rule's).

    ``point``: the member's grid point, for a tuning job (as the tune_train rule's).
    """
    from types import SimpleNamespace

    member = SimpleNamespace(experiment=wildcards.experiment, partition=wildcards.partition,
                             method=wildcards.method, split=str(split), seed=str(seed))
    if point is not None:
        member.point = point
    return member


def chunks(items: Sequence[Any], size: int | None) -> list[tuple[Any, ...]]:
    """``items`` cut in order into runs of ``size`` (the last may be shorter; None: one)."""
    step = size or len(items)
    return [tuple(items[i:i + step]) for i in range(0, len(items), step)]


def batch_of(batches: Sequence[TrainBatch], key: RunKey) -> TrainBatch | None:
    """The batch job that trains run ``key``, None where it has a job of its own."""
    for batch in batches:
        if key.experiment in batch.experiments and (key.split, key.seed) in batch.pairs:
            return batch
    return None


def public_exclude_arg(source: str, dataset: str, partition: str) -> str:
    """``--exclude-partition P`` when the public set comes from the clients' data set."""
    return f"--exclude-partition {partition}" if source == dataset else ""


def mirror_args(cfg: WorkflowConfig, dataset: str) -> str:
    """``--mirror URL``, ``--checksum FILE=SHA256`` and the download limits of a data set.

    Quoted; the limits (``--deadline``, ``--min-rate``) only where ``data: download:``
    sets them.
    """
    words = [w for m in cfg.mirrors.get(dataset, ()) for w in ("--mirror", m)]
    flags = {"deadline_s": "--deadline", "min_rate": "--min-rate"}
    words += [w for key, value in sorted(cfg.download.items()) for w in (flags[key], f"{value:g}")]
    return shlex.join(words + checksum_args(cfg.checksums.get(dataset, {})))


def clustered_methods(cfg: WorkflowConfig, experiment: str) -> list[str]:
    """Methods of ``experiment`` whose algorithm records each client's cluster id."""
    return figure_methods(cfg, experiment, "clusters")


def cuda_refusal(cfg: WorkflowConfig, cuda_available: bool | None = None) -> str | None:
    """Why the training jobs cannot run here: ``device: cuda`` on a machine without CUDA.

    ``None`` unless an experiment of the chosen scale asks for CUDA and the machine has
    none. The workflow asks this only when its jobs run on this machine (not under a cluster
    executor, whose nodes are other machines). ``cuda_available`` defaults to what
    torch sees (torch is imported only when some experiment asks for CUDA).
    """
    wanting = [name for name, e in cfg.experiments.items()
               if e.scale == cfg.scale and e.training.device == "cuda"]
    if not wanting:
        return None
    if cuda_available is None:
        import torch

        cuda_available = torch.cuda.is_available()
    if cuda_available:
        return None
    return (f"experiments.{wanting[0]}.training.device: cuda, but this machine has no CUDA "
            f"device and the jobs run here ({len(wanting)} experiment(s) ask for it: "
            f"{', '.join(wanting)}); set device: auto (CUDA when present, else the CPU) or "
            "cpu, or run on a GPU node (e.g. --profile profiles/slurm)")
