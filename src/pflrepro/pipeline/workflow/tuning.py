"""The tuning stage's paths, grids of runs, batches, selections and targets."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pflrepro.config import WorkflowConfig, canonical_json
from pflrepro.pipeline.tuning_jobs import shared_tuning_method
from pflrepro.pipeline.workflow.jobs import chunks, runs_per_job, single_run_experiments
from pflrepro.pipeline.workflow.patterns import FIGURE, pattern
from pflrepro.pipeline.workflow.targets import chosen_experiments

# --------------------------------------------------------------------------- tuning
#: A tuning experiment's validation partition (:func:`pflrepro.tuning.validation_partition`).
TUNE_PARTITION = "results/tuning/{experiment}/partitions/{partition}/split{split}.parquet"
#: One tuning run: a grid point (``{point}``: :func:`pflrepro.tuning.point_id`).
TUNE_RUN = ("results/tuning/{experiment}/runs/{partition}/{method}/{point}/"
            "split{split}-seed{seed}.parquet")
#: One tuning run's own log, and (several runs per job) the job's stderr; benchmarks.
TUNE_LOG = ("logs/tuning/{experiment}/runs/{partition}/{method}/{point}/"
            "split{split}-seed{seed}.log")
TUNE_BATCH_LOG = "logs/tuning/{experiment}/runs/{partition}/{method}/runs-{runs}.log"
TUNE_BENCHMARK = ("results/benchmarks/tuning/{experiment}/{partition}/{method}/{point}/"
                  "split{split}-seed{seed}.tsv")
TUNE_BATCH_BENCHMARK = "results/benchmarks/tuning/{experiment}/{partition}/{method}/runs-{runs}.tsv"
#: Every value tried and its validation score (``ext``: md, csv), and the selection.
TUNE_TABLE = "results/tuning/{experiment}/{method}.{ext}"
TUNE_SELECTION = "results/tuning/{experiment}/{method}.json"
#: The other tuning rules' logs: validation split, selection (a run's: TUNE_LOG).
TUNE_SPLIT_LOG = "logs/tuning/{experiment}/partitions/{partition}/split{split}.log"
TUNE_SELECT_LOG = "logs/tuning/{experiment}/{method}.log"
#: FIGURE's ``kind`` of the tuning figure (validation score against the value).
TUNE_KIND = "tuning-{method}"


def tuned_methods(cfg: WorkflowConfig, experiment: str) -> list[str]:
    """Methods of ``experiment`` whose hyperparameters its ``tune:`` block selects."""
    tune = cfg.experiments[experiment].tune
    return [] if tune is None else [m for m in cfg.experiments[experiment].methods
                                    if m in tune.methods]


def tune_trials(cfg: WorkflowConfig, experiment: str, method: str) -> list[dict[str, Any]]:
    """Every tuning run of one method: ``{point, partition, split, seed}``, in order."""
    from pflrepro.tuning import grid_points

    exp = cfg.experiments[experiment]
    tune = exp.tune
    return [{"point": point, "partition": p.id, "split": split, "seed": seed}
            for p in exp.partitions for split in exp.split_seeds
            for point in grid_points(tune.methods[method]) for seed in tune.seeds]


def tune_run_paths(cfg: WorkflowConfig, experiment: str, method: str) -> list[str]:
    """The tuning runs of one method, in the order of :func:`tune_trials`."""
    from pflrepro.tuning import point_id

    return [TUNE_RUN.format(experiment=experiment, partition=t["partition"], method=method,
                            point=point_id(t["point"]), split=t["split"], seed=t["seed"])
            for t in tune_trials(cfg, experiment, method)]


@dataclass(frozen=True)
class TuneBatch:
    """The tuning runs one job trains (``runs_per_job``, as :class:`TrainBatch`).

    ``trials``: (grid point id, split, seed) of each run, in :func:`tune_trials` order,
    for tuned method ``method`` of each of ``experiments`` on any of their partitions.
    One Snakemake rule each (:attr:`rule`); ``experiment`` and ``partition`` stay
    wildcards, ``method`` is fixed.
    """

    method: str
    trials: tuple[tuple[str, int, int], ...]
    experiments: tuple[str, ...]
    #: Its rule's name (:func:`tune_batches`), e.g. ``tune_train_fedamp_runs1to12of12``.
    name: str = ""

    @property
    def label(self) -> str:
        """The runs as a name part: their number and a digest of what they are.

        A list of every grid point would make a file name hundreds of characters long;
        the job's own log lists the runs, and each run keeps its own log.
        """
        import hashlib

        digest = hashlib.sha256(canonical_json([self.method, self.trials]).encode())
        return f"{len(self.trials)}runs-{digest.hexdigest()[:10]}"

    @property
    def rule(self) -> str:
        """The Snakemake rule that trains them: :attr:`name`, else named by the label."""
        return self.name or f"tune_train_{self.label.replace('-', '_')}"


def tune_batches(cfg: WorkflowConfig, raw: Mapping[str, Any]) -> list[TuneBatch]:
    """The tuning jobs of the experiments whose scale trains several runs per job.

    Each job's rule is named by its method and which of the method's runs on a
    partition it trains (``tune_train_fedamp_runs1to12of36``; :func:`unique_names`
    where two experiments' chunks would share a name); its files keep the digest label.

    A tuned method's runs on one partition of an experiment (its split seeds, grid
    points and tuning seeds, in :func:`tune_trials` order) cut into chunks of
    ``runs_per_job`` (:func:`runs_per_job`, the training jobs' setting); experiments
    with the same chunk of the same method share its rule. Experiments at one run per
    job are left to the ``tune_train`` rule (:func:`single_run_tune_experiments`).
    """
    from pflrepro.tuning import point_id

    found: dict[tuple[str, tuple[tuple[str, int, int], ...]], list[str]] = {}
    names: dict[tuple[str, tuple[tuple[str, int, int], ...]], str] = {}
    for name, exp in cfg.experiments.items():
        size = runs_per_job(raw, exp.scale)
        if size == 1:
            continue
        for method in tuned_methods(cfg, name):
            first = exp.partitions[0].id  # every partition has the same trials
            trials = tuple((point_id(t["point"]), int(t["split"]), int(t["seed"]))
                           for t in tune_trials(cfg, name, method) if t["partition"] == first)
            start = 1
            for chunk in chunks(trials, size):
                key = (method, chunk)
                found.setdefault(key, []).append(name)
                names.setdefault(key, f"tune_train_{method}_runs{start}to"
                                      f"{start + len(chunk) - 1}of{len(trials)}")
                start += len(chunk)
    return [TuneBatch(method, trials, tuple(experiments), rule)
            for (method, trials), experiments, rule in zip(
                found, found.values(), unique_names([names[k] for k in found]), strict=True)]


def unique_names(names: Sequence[str]) -> list[str]:
    """``names`` with ``_2``, ``_3``, ... after the second and later of a repeated one.

    Two tuned experiments with the same method but other grid points have chunks at the
    same positions; the suffix keeps their rules apart.
    """
    seen: dict[str, int] = {}
    out = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        out.append(name if seen[name] == 1 else f"{name}_{seen[name]}")
    return out


def single_run_tune_experiments(cfg: WorkflowConfig, raw: Mapping[str, Any]) -> list[str]:
    """Experiments whose tuning runs get a job each (the ``tune_train`` rule's)."""
    return [name for name in single_run_experiments(cfg, raw) if tuned_methods(cfg, name)]


def tune_plan_json(cfg: WorkflowConfig, experiment: str, method: str) -> str:
    """The tune-select job's plan (a param: a changed grid or budget reruns it)."""
    exp = cfg.experiments[experiment]
    tune = exp.tune
    grids = tune.methods[method]
    return canonical_json({
        "algorithm": cfg.methods[method].algorithm, "fixed": dict(cfg.methods[method].params),
        "clients": {p.id: p.clients for p in exp.partitions},
        "grids": {g.key: list(g.values) for g in grids},
        "log": [g.key for g in grids if g.log], "criterion": tune.criterion,
        "rounds": tune.rounds, "seeds": list(tune.seeds), "fraction": tune.fraction,
        "labels": dict(exp.partition_labels),
        **({"rounds_note": tune.rounds_note} if tune.rounds_note else {}),
        **({"pool": tune.pool} if tune.pool != "split" else {}),
        **({"training": True} if method == shared_tuning_method(cfg, experiment) else {}),
        "trials": tune_trials(cfg, experiment, method)})


def table_tuning_json(cfg: WorkflowConfig, experiments: Iterable[str],
                      selections: Mapping[tuple[str, str], Mapping[str, Any]]) -> str:
    """The table job's ``--tuning``: per tuned (experiment, method), grids and selection.

    ``selections``: (experiment, method) -> its selection file's content, for every
    method :func:`tuned_methods` names. ``"[]"`` when no method is tuned.
    """
    import json

    out = []
    for name in experiments:
        for method in tuned_methods(cfg, name):
            plan = json.loads(tune_plan_json(cfg, name, method))
            del plan["trials"]
            out.append({"experiment": name, "method": method, **plan,
                        "selection": dict(selections[(name, method)])})
    return canonical_json(out)


def read_selection(path: str) -> dict[str, Any]:
    """A tune-select job's selection file (:func:`pflrepro.tuning.selection_json`)."""
    import json

    with open(path) as fh:
        return dict(json.load(fh))


def tune_targets(cfg: WorkflowConfig) -> list[str]:
    """Tuning tables, selections and figures of the selected scale's experiments."""
    out: list[str] = []
    for name in chosen_experiments(cfg):
        for m in tuned_methods(cfg, name):
            out += [TUNE_TABLE.format(experiment=name, method=m, ext=ext) for ext in ("md", "csv")]
            out.append(TUNE_SELECTION.format(experiment=name, method=m))
            out += [FIGURE.format(experiment=name, kind=pattern(TUNE_KIND, method=m), ext=ext)
                    for ext in ("pdf", "png")]
    return out



def tunes(cfg: WorkflowConfig) -> bool:
    """Whether any experiment of the selected scale tunes a method (a tune_select runs)."""
    return bool(tune_targets(cfg))
