"""One run from the command line: ``pflrepro run``.

``pflrepro run --method fedamp --dataset digits --partition practical --clients 8
--partition-option groups=2 --rounds 5`` becomes a one-experiment workflow config
(:func:`single_run_config`), checked like every config, whose one training job's spec
comes from :meth:`pflrepro.config.WorkflowConfig.run_spec` as in the workflow; the
stages then run through the same functions as the workflow's jobs
(:func:`pflrepro.data.jobs.make_partition`, :func:`pflrepro.data.jobs.make_public`,
:func:`pflrepro.pipeline.train_job.train_job`).

Not imported by training jobs (:data:`pflrepro.config.codedigest.TRAINING_ENTRIES`), so
editing it reruns no training.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: The experiment name of a ``pflrepro run`` (its run table's ``experiment`` column).
SINGLE_EXPERIMENT = "run"
#: Public-set size of a ``pflrepro run`` of a method that distills on one.
DEFAULT_PUBLIC_SIZE = 500


@dataclass(frozen=True)
class SingleRun:
    """``pflrepro run``'s request: one method on one partition of one data set."""

    method: str
    dataset: str
    scheme: str
    partition_options: Mapping[str, Any]
    params: Mapping[str, Any]
    training: Mapping[str, Any]
    split_seed: int = 0
    train_seed: int = 0
    public_size: int = DEFAULT_PUBLIC_SIZE


def single_run_config(req: SingleRun) -> dict[str, Any]:
    """The workflow config of a one-run experiment (checked as every config is).

    Unknown names raise naming ``pflrepro list``, where the valid ones are listed.
    """
    from pflrepro.algorithms.registry import INFOS
    from pflrepro.data.datasets import DATASETS
    from pflrepro.data.partition import PARTITIONERS

    for name, known, what in ((req.method, INFOS, "methods"),
                              (req.dataset, DATASETS, "datasets"),
                              (req.scheme, PARTITIONERS, "partitions")):
        if name not in known:
            noun = {"methods": "method", "datasets": "data set",
                    "partitions": "partition scheme"}[what]
            raise ValueError(f"unknown {noun} {name!r}; known: {sorted(known)} "
                             f"(`pflrepro list {what}` shows them with their options)")
    from pflrepro.algorithms.registry import parse_hyper
    from pflrepro.data.partition import from_spec

    try:  # the flags' own names first; the config check below names config keys
        parse_hyper(INFOS[req.method], req.params)
    except ValueError as err:
        raise ValueError(f"--param: {err} (`pflrepro list methods` shows each method's "
                         "hyperparameters)") from err
    try:
        from_spec({"scheme": req.scheme, **dict(req.partition_options)})
    except (TypeError, ValueError) as err:
        hint = ("" if "pflrepro list partitions" in str(err) else
                " (`pflrepro list partitions` shows each scheme's options)")
        raise ValueError(f"--clients/--partition-option: {err}{hint}") from err
    experiment: dict[str, Any] = {
        "dataset": req.dataset, "scale": "cpu",
        "partitions": [{"scheme": req.scheme, **dict(req.partition_options)}],
        "methods": [req.method], "split_seeds": [req.split_seed],
        "train_seeds": [req.train_seed], "figures": [],
    }
    if INFOS[req.method].needs_public:
        experiment["public"] = {"dataset": req.dataset, "size": req.public_size}
    return {"scale": "cpu", "training": dict(req.training),
            "methods": {req.method: {"algorithm": req.method, **dict(req.params)}},
            "experiments": {SINGLE_EXPERIMENT: experiment}}


def single_run(req: SingleRun, *, out: str | Path | None = None,
               work: str | Path = "results/cli", data_root: str | Path = "results/data",
               raw_root: str | Path = "data/raw", mirrors: tuple[str, ...] = (),
               threads: int = 1, progress: bool = False) -> Path:
    """Prepare the data set (if needed), partition it, train, write the run table.

    The request becomes a one-experiment workflow config (:func:`single_run_config`),
    checked and turned into the train job's spec exactly as the workflow does
    (:meth:`pflrepro.config.WorkflowConfig.run_spec`); the data set is prepared into
    ``data_root/<dataset>`` (the workflow's place, shared with it) unless there, and
    the partition (and public set) written under ``work`` as the workflow would
    under ``results``. Returns the run table's path (default
    ``work/runs/<dataset>/<partition id>/<method>/split<s>-seed<t>.parquet``).
    """
    from pflrepro.config import RunKey, canonical_json, check
    from pflrepro.config.schema import build_schema
    from pflrepro.data.datasets import prepare_dataset
    from pflrepro.data.jobs import make_partition, make_public
    from pflrepro.pipeline import workflow as W
    from pflrepro.pipeline.train_job import train_job

    cfg = check(single_run_config(req), build_schema())
    exp = cfg.experiments[SINGLE_EXPERIMENT]
    partitioner = exp.partitions[0]
    key = RunKey(SINGLE_EXPERIMENT, partitioner.id, req.method, req.split_seed, req.train_seed)
    spec_json = canonical_json(cfg.run_spec(key))

    def under_work(pattern: str, **fields: object) -> Path:
        return Path(work) / pattern.removeprefix("results/").format(**fields)

    data_dir = Path(data_root) / req.dataset
    if not (data_dir / "meta.json").exists():
        prepare_dataset(req.dataset, data_dir, Path(raw_root) / req.dataset, mirrors or None)
    where = {"dataset": req.dataset, "partition": partitioner.id, "split": req.split_seed}
    part = under_work(W.PARTITION, **where)
    if not part.exists():
        make_partition(data_dir, req.dataset, partitioner.spec(), req.split_seed, part)
    public = None
    if exp.public is not None:
        public_file = under_work(W.PUBLIC, **where, source=exp.public.dataset,
                                 size=exp.public.size)
        if not public_file.exists():
            make_public(data_dir, exp.public.size, req.split_seed, public_file,
                        exclude_partition=part)
        public = (public_file, data_dir)
    out_path = Path(out) if out is not None else under_work(
        "results/runs/{dataset}/{partition}/{method}/split{split}-seed{seed}.parquet",
        dataset=req.dataset, partition=partitioner.id, method=req.method,
        split=req.split_seed, seed=req.train_seed)
    train_job(spec_json, data_dir, part, out_path, threads=threads, progress=progress,
              public=public)
    return out_path
