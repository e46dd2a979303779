"""The parsed config as frozen, typed objects.

Methods, experiments, tables, run keys and the whole workflow config.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pflrepro.config.codedigest import code_digest
from pflrepro.config.errors import ConfigError
from pflrepro.config.limits import SEED_PAIRINGS, _short
from pflrepro.data.partition import Partitioner
from pflrepro.training.settings import TrainingConfig


@dataclass(frozen=True)
class MethodConfig:
    """A named method variant: an algorithm plus hyperparameters.

    ``sources``: where a hyperparameter's value comes from (the entry's ``sources:``
    key, :data:`SOURCE_KINDS`): ``"paper: <where the paper states it>"`` or
    ``"unstated: <why this value>"``; not a hyperparameter, never in a run's spec.
    """

    name: str
    algorithm: str
    params: Mapping[str, Any]
    sources: Mapping[str, str] = dataclasses.field(default_factory=dict)
    #: The name tables and figures show for the variant ("": the method's own name).
    label: str = ""


#: How a method entry's ``sources:`` text starts: the paper states the value, or it does
#: not (the value is ours, a candidate for tuning; the text says why this value).
SOURCE_KINDS = ("paper", "unstated")


def parse_sources(spec: Any, algorithm: str, where: str) -> dict[str, str]:
    """A method entry's ``sources:``: hyperparameter (or tuning key) -> "kind: text"."""
    from pflrepro.tuning import tunable_keys

    if spec is None:
        return {}
    if not isinstance(spec, Mapping):
        raise ConfigError(f"{where}: a mapping hyperparameter -> 'paper: ...' or "
                          f"'unstated: ...', got {_short(spec)}")
    keys = tunable_keys(algorithm)
    out = {}
    for key, text in spec.items():
        if key not in keys:
            raise ConfigError(f"{where}.{key}: not a hyperparameter of {algorithm}; "
                              f"known: {sorted(keys)}")
        kind = str(text).split(":", 1)[0] if isinstance(text, str) else None
        if kind not in SOURCE_KINDS or not str(text).split(":", 1)[1].strip():
            raise ConfigError(f"{where}.{key}: must read 'paper: <where>' or "
                              f"'unstated: <why this value>', got {_short(text)}")
        out[str(key)] = str(text)
    return out


@dataclass(frozen=True)
class PublicConfig:
    """An unlabeled public set for distillation (PerFed-CKT): ``size`` rows of ``dataset``."""

    dataset: str
    size: int


@dataclass(frozen=True)
class ExperimentConfig:
    """A grid: one data set × partitions × methods × (split seed, training seed) pairs.

    The pairs are every split seed with every training seed (``seed_pairing:
    grid``) or the i-th split seed with the i-th training seed (``paired``).
    """

    name: str
    description: str
    dataset: str
    partitions: tuple[Partitioner, ...]
    methods: tuple[str, ...]
    split_seeds: tuple[int, ...]
    train_seeds: tuple[int, ...]
    training: TrainingConfig
    resources: Mapping[str, int]
    scale: str = "paper"
    label: str = ""
    figures: tuple[str, ...] = ("accuracy", "weights")
    focus_client: int = 0
    partition_labels: Mapping[str, str] = dataclasses.field(default_factory=dict)
    public: PublicConfig | None = None
    seed_pairing: str = "grid"
    #: Unstated hyperparameters selected on validation (:mod:`pflrepro.tuning`), or None.
    tune: Any = None
    #: Where each setting's value comes from (:mod:`pflrepro.config.settings_sources`).
    sources: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        where = f"experiments.{self.name}"
        if self.seed_pairing not in SEED_PAIRINGS:
            raise ConfigError(f"{where}.seed_pairing: {self.seed_pairing!r} is not one of "
                              f"{list(SEED_PAIRINGS)}")
        if self.seed_pairing == "paired" and len(self.split_seeds) != len(self.train_seeds):
            raise ConfigError(
                f"{where}: seed_pairing 'paired' runs the i-th of split_seeds with the i-th "
                f"of train_seeds, so they need equal lengths; got {len(self.split_seeds)} "
                f"split_seeds {list(self.split_seeds)} and {len(self.train_seeds)} "
                f"train_seeds {list(self.train_seeds)}")

    def seed_pairs(self) -> tuple[tuple[int, int], ...]:
        """The (split seed, training seed) of every run, split seeds outermost.

        ``grid``: every split seed with every training seed; ``paired``:
        ``zip(split_seeds, train_seeds)`` (one training seed per split).
        """
        if self.seed_pairing == "paired":
            return tuple(zip(self.split_seeds, self.train_seeds, strict=True))
        return tuple((split, seed) for split in self.split_seeds for seed in self.train_seeds)

    def partition(self, partition_id: str) -> Partitioner:
        """The partitioner with id ``partition_id``."""
        for p in self.partitions:
            if p.id == partition_id:
                return p
        raise ConfigError(f"experiment {self.name!r} has no partition {partition_id!r}")


@dataclass(frozen=True)
class TableConfig:
    """A table over one or more experiments (e.g. FedeRiCo Table 1's three data sets)."""

    name: str
    experiments: tuple[str, ...]
    caption: str
    metric: str  # "weighted_final" (FedeRiCo) or "mean_bmta" (FedAMP)
    scale: str


@dataclass(frozen=True)
class RunKey:
    """The wildcards of one training job."""

    experiment: str
    partition: str
    method: str
    split: int
    seed: int


@dataclass(frozen=True)
class WorkflowConfig:
    """The whole parsed config."""

    mirrors: Mapping[str, tuple[str, ...]]
    methods: Mapping[str, MethodConfig]
    experiments: Mapping[str, ExperimentConfig]
    tables: Mapping[str, TableConfig] = dataclasses.field(default_factory=dict)
    scale: str = "paper"
    checksums: Mapping[str, Mapping[str, str]] = dataclasses.field(default_factory=dict)
    #: ``data: download:``: ``deadline_s`` and ``min_rate`` where the config sets them.
    download: Mapping[str, float] = dataclasses.field(default_factory=dict)

    def runs(self, experiment: str, method: str | None = None) -> Iterator[RunKey]:
        """Every training job of ``experiment`` (of one method, if given)."""
        exp = self.experiments[experiment]
        for p in exp.partitions:
            for m in exp.methods:
                if method is not None and m != method:
                    continue
                for split, seed in exp.seed_pairs():
                    yield RunKey(experiment, p.id, m, split, seed)

    def partitions(self) -> Iterator[tuple[str, str, int]]:
        """Every (dataset, partition id, split seed) any experiment needs, once."""
        seen = set()
        for exp in self.experiments.values():
            for p in exp.partitions:
                for split in exp.split_seeds:
                    key = (exp.dataset, p.id, split)
                    if key not in seen:
                        seen.add(key)
                        yield key

    def partition_spec(self, dataset: str, partition_id: str) -> Partitioner:
        """The partitioner behind ``partition_id`` (for data set ``dataset``)."""
        for exp in self.experiments.values():
            if exp.dataset == dataset:
                for p in exp.partitions:
                    if p.id == partition_id:
                        return p
        raise ConfigError(f"no experiment uses partition {partition_id!r} of {dataset!r}")

    def run_spec(self, key: RunKey) -> dict[str, Any]:
        """The JSON-able spec of one training job: all that determines its numbers.

        ``code`` is a digest of the source files this job runs
        (:func:`pflrepro.config.codedigest.code_digest`:
        the modules the training entry imports, and its algorithm's module with what
        that imports), so editing one method's file reruns only that method's jobs.
        """
        exp = self.experiments[key.experiment]
        method = self.methods[key.method]
        exp.partition(key.partition)  # raises for an unknown partition id
        return {
            "experiment": exp.name, "dataset": exp.dataset, "partition": key.partition,
            "method": method.name, "algorithm": method.algorithm, "params": dict(method.params),
            "split_seed": key.split, "train_seed": key.seed, "training": exp.training.to_dict(),
            "code": code_digest(method.algorithm),
            # only where there is one, so the other runs' specs do not change
            **({"public": {"dataset": exp.public.dataset, "size": exp.public.size}}
               if exp.public is not None else {}),
        }


#: Training keys that must be finite numbers, and whether 0 is allowed.
