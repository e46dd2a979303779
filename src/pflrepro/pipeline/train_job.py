"""One training run: (data set, partition file, method, seeds, training) -> run table."""

from __future__ import annotations

import contextlib
import json
import logging
import signal
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from pflrepro.algorithms import get_algorithm
from pflrepro.algorithms.base import Algorithm, parse_hyper
from pflrepro.data.federated import FederatedData
from pflrepro.data.partition import read_partition
from pflrepro.data.public import read_public
from pflrepro.data.store import load_dataset
from pflrepro.store import results as R
from pflrepro.store.checkpoint import Checkpointer, Interrupted
from pflrepro.store.progress import RoundProgress, write_progress_table
from pflrepro.training import allocator, devices
from pflrepro.training.engine import Engine
from pflrepro.training.settings import TrainingConfig

log = logging.getLogger(__name__)


#: The keys of a run spec's JSON form and their types (besides ``code`` and ``public``).
RUN_SPEC_KEYS = {"experiment": str, "dataset": str, "partition": str, "method": str,
                 "algorithm": str, "params": dict, "split_seed": int, "train_seed": int,
                 "training": dict}


@dataclass(frozen=True)
class RunSpec:
    """Everything that determines a run's numbers (passed by the workflow as JSON)."""

    experiment: str
    dataset: str
    partition: str  # partition id (its parameters)
    method: str  # method variant name from the config
    algorithm: str
    params: Mapping[str, Any]
    split_seed: int
    train_seed: int
    training: TrainingConfig
    #: The unlabeled public set, ``{"dataset": name, "size": n}``, for methods that
    #: distill on one (the experiment's ``public``); None without one.
    public: Mapping[str, Any] | None = None

    @classmethod
    def from_json(cls, text: str) -> RunSpec:
        """Parse the workflow's JSON form (unknown keys raise)."""
        from pflrepro.config.errors import json_object

        raw = json_object(text, "run spec", RUN_SPEC_KEYS, optional=("code", "public"))
        if raw.get("public") is not None and not isinstance(raw["public"], dict):
            raise ValueError("run spec: public must be an object or null")
        raw.pop("code", None)  # source digest: only there to make Snakemake rerun on edits
        raw["training"] = TrainingConfig.from_mapping(raw["training"])
        return cls(**raw)


def run(spec: RunSpec, data_dir: str | Path, partition_path: str | Path,
        threads: int | None = None, progress: bool = False,
        checkpoint: Checkpointer | None = None,
        public: tuple[str | Path, str | Path] | None = None,
        progress_table: str | Path | None = None,
        progress_table_every: int = 10) -> pd.DataFrame:
    """Train ``spec`` on the prepared data set and partition; return the run table.

    Each evaluated round logs a progress line (:mod:`pflrepro.store.progress`); with
    ``progress_table`` the run table so far is written there (atomically) every
    ``progress_table_every`` rounds, or at every checkpoint when checkpointing (``progress``:
    a tqdm bar besides).

    With ``checkpoint`` the run resumes from and saves checkpoints, and SIGTERM
    (preemption, a time limit) makes it save one after the current round and stop
    with :class:`~pflrepro.training.engine.Interrupted`. On CUDA the job leases a device of
    its own first (:mod:`pflrepro.training.devices`) and holds it until it returns.

    ``threads`` (default 1): on the CPU, clients trained and evaluated side by side,
    one torch thread each (the numbers do not depend on it); on a GPU, torch's threads.

    ``public`` = (public-set file, its data set's directory): the unlabeled public
    set of a method that distills on one; it must be given exactly when the spec has
    one.

    The process's C allocator keeps freed blocks for reuse
    (:func:`pflrepro.training.allocator.keep_freed_memory`).
    """
    allocator.keep_freed_memory()
    cls = get_algorithm(spec.algorithm)
    hyper = parse_hyper(cls, spec.params)
    dataset = load_dataset(data_dir, verify=True)  # sha256 of both arrays vs meta.json
    partition, pmeta = read_partition(str(partition_path))
    if pmeta.get("dataset") not in (None, spec.dataset):
        raise ValueError(f"partition {partition_path} is for data set {pmeta.get('dataset')!r}, "
                         f"not {spec.dataset!r}")
    public_x = _public_images(spec, public)
    device = devices.choose_device(spec.training.device)
    threads_before = torch.get_num_threads()
    workers = 1
    if device.type == "cpu":
        # CPU: `threads` client threads of one torch thread each (Engine.map_clients), so
        # the results are the same bits whatever `threads` is
        workers = max(int(threads or 1), 1)
        torch.set_num_threads(1)
    elif threads:
        torch.set_num_threads(threads)
    lease = None
    engine = None
    path = ""
    try:
        if device.type == "cuda":
            lease = devices.cuda_lease()
            device = torch.device("cuda", lease.index)
            torch.cuda.set_device(device)
            # CUDA has non-deterministic kernels; ask for the deterministic ones. (The CPU
            # kernels used here are deterministic with one torch thread, and the switch
            # costs every job ~2 s: it imports torch's compiler stack.)
            torch.use_deterministic_algorithms(True, warn_only=True)
            log.info("leased %s (%s), slot %d: %s", device,
                     torch.cuda.get_device_name(device), lease.slot, lease.path)
        log.info("device: %s (torch %s, %d torch thread(s)%s)", device, torch.__version__,
                 torch.get_num_threads(),
                 f", {workers} client threads" if workers > 1 else "")
        data = FederatedData.build(dataset, partition, device, public=public_x)
        engine = Engine(data, spec.training, spec.train_seed, dataset.meta.shape, device,
                        workers=workers)
        path = engine.client_training
        log.info("client training: %s", "all clients of a round in one vmapped pass"
                 if path == "vmap" else "one client after another")
        config = _config_columns(spec, path)
        writer = None
        if progress_table is not None:
            def writer(metrics: R.MetricLog) -> None:
                write_progress_table(metrics.to_frame(config), progress_table)
        reporter = RoundProgress(spec.training.rounds, spec.method, bar=progress,
                                 flush=writer, flush_every=checkpoint.every
                                 if checkpoint is not None else progress_table_every)
        metrics = _train(engine, cls(engine, hyper), spec, reporter, checkpoint)
    finally:
        if engine is not None:
            engine.close()
        if lease is not None:
            lease.release()
        torch.set_num_threads(threads_before)
    return metrics.to_frame(config)


def _config_columns(spec: RunSpec, client_training: str) -> dict[str, Any]:
    """The run table's config columns (:data:`pflrepro.store.results.CONFIG_COLUMNS`)."""
    return {
        "experiment": spec.experiment, "dataset": spec.dataset, "partition": spec.partition,
        "method": spec.method, "algorithm": spec.algorithm,
        "params": json.dumps(dict(spec.params), sort_keys=True),
        "split_seed": spec.split_seed, "train_seed": spec.train_seed,
        "client_training": client_training,
        "package_version": R.package_version(), "git_revision": R.git_revision(),
    }


def _public_images(spec: RunSpec,
                   public: tuple[str | Path, str | Path] | None) -> np.ndarray | None:
    """The public set's raw images (labels never read), or None; checks spec vs files."""
    if (spec.public is None) != (public is None):
        raise ValueError("the run spec has a public set but no --public file was given"
                         if public is None else
                         "--public was given but the run spec has no public set")
    if public is None:
        return None
    rows, meta = read_public(str(public[0]))
    source = load_dataset(public[1], verify=True)
    expected = dict(spec.public or {})
    if meta.get("dataset") != expected.get("dataset") or len(rows) != expected.get("size"):
        raise ValueError(f"public set {public[0]} holds {len(rows)} rows of "
                         f"{meta.get('dataset')!r}; the spec asks for {expected}")
    if source.meta.name != expected.get("dataset"):
        raise ValueError(f"{public[1]} holds {source.meta.name!r}, not the public set's "
                         f"data set {expected.get('dataset')!r}")
    return np.asarray(source.x[rows])


def _train(engine: Engine, algorithm: Algorithm, spec: RunSpec, progress: RoundProgress,
           checkpoint: Checkpointer | None) -> R.MetricLog:
    """The round loop, with SIGTERM turned into a checkpoint-and-stop when checkpointing."""
    start = time.perf_counter()
    previous = None
    if checkpoint is not None:
        def request_stop(signum: int, frame: object) -> None:
            log.warning("signal %d: stopping after the current round", signum)
            engine.stop = True

        previous = signal.signal(signal.SIGTERM, request_stop)
    try:
        metrics = engine.run(algorithm, progress=progress, checkpoint=checkpoint)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    log.info("%s: %d rounds in %.1f s", spec.method, spec.training.rounds,
             time.perf_counter() - start)
    return metrics


# ------------------------------------------------------------------ jobs of the CLI
@dataclass(frozen=True)
class Member:
    """One run of a training job: its spec (JSON), partition, output and per-run files.

    ``checkpoint``: resume from and save to that file (keyed by the spec's SHA-256).
    ``public``: (public-set file, its data set's directory), for a spec with one.
    ``log``: the run's own log file (its lines only; truncated when the run starts).
    """

    spec: str
    partition: str | Path
    out: str | Path
    checkpoint: str | Path | None = None
    public: tuple[str | Path, str | Path] | None = None
    log: str | Path | None = None


@contextlib.contextmanager
def _run_log(path: str | Path | None) -> Iterator[None]:
    """While the block runs, copy every log record (INFO and up) to ``path`` too."""
    if path is None:
        yield
        return
    root = logging.getLogger()
    handler = logging.FileHandler(path, mode="w", encoding="utf-8")
    formats = [h.formatter for h in root.handlers if h.formatter is not None]
    handler.setFormatter(formats[0] if formats else logging.Formatter(LOG_FORMAT))
    level = root.level
    root.setLevel(min(level, logging.INFO))  # its progress lines at least
    root.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
        handler.close()


#: A run's own log file's line format where logging has no formatted handler yet
#: (the CLI's handler lends it its own).
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def train_jobs(members: Sequence[Member], data: str | Path, *, threads: int = 1,
               progress: bool = False, checkpoint_every: int = 10,
               progress_tables: bool = False) -> list[pd.DataFrame]:
    """``pflrepro train``: train each member in turn in this process, write its run table.

    Several runs of one (experiment, partition, method) share one job so that they pay
    the interpreter's and torch's start-up once. Each run is trained exactly as alone
    (its own engine, seeds and checkpoint; nothing is carried from one run to the
    next), logs to its own ``log`` and writes its table atomically with its digest
    (:func:`pflrepro.store.io.write_parquet`). The first run that fails (or is stopped by
    SIGTERM) stops the job: the runs before it are complete files, the ones after it
    are not started, and none is half-written. ``progress_tables``: each run's table so
    far at :func:`pflrepro.store.progress.progress_table_path` of its ``out``, deleted once
    ``out`` is written. Checkpoints are deleted once every member's table is written, so that a
    retry of a job stopped part-way resumes its finished runs from their last
    checkpoint rather than from round 0.
    """
    import hashlib

    from pflrepro.store.io import write_parquet
    from pflrepro.store.progress import progress_table_path, remove_progress_table

    outs = [str(m.out) for m in members]
    if len(set(outs)) != len(outs):
        raise ValueError(f"train: an output is given twice: {outs}")
    specs = [RunSpec.from_json(m.spec) for m in members]  # every spec parses before any run
    checkpointers: list[Checkpointer] = []
    frames = []
    for member, spec in zip(members, specs, strict=True):
        with _run_log(member.log):
            checkpointer = None
            if member.checkpoint:
                fingerprint = hashlib.sha256(member.spec.encode()).hexdigest()
                checkpointer = Checkpointer(Path(member.checkpoint), fingerprint,
                                            checkpoint_every)
                checkpointers.append(checkpointer)
            try:
                frame = run(spec, data, member.partition, threads=threads, progress=progress,
                            checkpoint=checkpointer, public=member.public,
                            progress_table=(progress_table_path(member.out)
                                            if progress_tables else None),
                            progress_table_every=checkpoint_every)
            except Interrupted:
                raise  # SIGTERM: its checkpoint is saved; the CLI says so
            except Exception as err:
                if member.log:  # the run's own log; the CLI prints the error once on stderr
                    log.error("%s, split %d, seed %d failed: %s", spec.method,
                              spec.split_seed, spec.train_seed, err)
                raise
            write_parquet(frame, member.out)
            log.info("wrote %s (%d rows)", member.out, len(frame))
            remove_progress_table(member.out)
        frames.append(frame)
    for checkpointer in checkpointers:
        checkpointer.remove()
    return frames


def train_job(spec_json: str, data: str | Path, partition: str | Path, out: str | Path, *,
              threads: int = 1, progress: bool = False, checkpoint: str | Path | None = None,
              checkpoint_every: int = 10,
              public: tuple[str | Path, str | Path] | None = None,
              progress_tables: bool = False) -> pd.DataFrame:
    """One run of :func:`train_jobs` (its log lines go where logging already goes)."""
    return train_jobs([Member(spec_json, partition, out, checkpoint, public)], data,
                      threads=threads, progress=progress, checkpoint_every=checkpoint_every,
                      progress_tables=progress_tables)[0]
