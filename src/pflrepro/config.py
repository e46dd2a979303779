"""The workflow config, parsed into frozen, typed objects.

``config.yaml`` is first checked against ``workflow/schemas/config.schema.yaml``
(generated from the registries by :mod:`pflrepro.schema`); :func:`parse` then
builds these objects and checks what a schema cannot (references between sections,
partition parameters). Every error names the offending key.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from pflrepro.algorithms.registry import INFOS, algorithm_info, parse_hyper
from pflrepro.codedigest import code_digest
from pflrepro.config_checks import ConfigError, boolean_text, located_check, schema_error
from pflrepro.data.checksums import parse_checksums
from pflrepro.data.datasets import DATASETS
from pflrepro.data.partition import Partitioner, from_spec
from pflrepro.models import check_model_options
from pflrepro.reporting.figures.kinds import entries as figure_entries
from pflrepro.training import TrainingConfig

SCALES = ("paper", "cpu")
#: The entries an experiment's ``figures`` list may hold (each figure module declares
#: its kind: :mod:`pflrepro.reporting.figures.kinds`).
FIGURE_KINDS = figure_entries()
TABLE_METRICS = ("weighted_final", "mean_bmta")
#: How an experiment combines its split seeds and training seeds (see
#: :meth:`ExperimentConfig.seed_pairs`).
SEED_PAIRINGS = ("grid", "paired")

#: Resources of a training job unless an experiment says otherwise.
DEFAULT_RESOURCES: Mapping[str, int] = {"gpu": 0, "mem_mb": 4000, "runtime": 60}
RESOURCE_DOCS: Mapping[str, str] = {
    "gpu": "GPUs per training job (Snakemake resource 'gpu'; 1 to run on CUDA under a "
           "scheduler or with --resources gpu=N).",
    "mem_mb": "Memory per training job, MB.",
    "runtime": "Wall-clock limit per training job, minutes.",
}


# ------------------------------------------------------------------------------ names
# Every config string that becomes a wildcard, a path part or a shell word is held to a
# pattern here and in the schema (pflrepro.schema), so a name can neither leave the
# working directory ('..', '/'), nor run as a command ('$(...)', ';', spaces), nor give
# a file name the file system refuses (length).

#: Longest experiment, table or method name: each is a directory or file name (with
#: suffixes such as ``-communication.csv``) and part of longer paths.
NAME_MAX_LENGTH = 64
#: Experiment and table names: a letter, then letters, digits and '_'.
NAME_PATTERN = r"^[A-Za-z][A-Za-z0-9_]*$"
#: Method names: as :data:`NAME_PATTERN`, and single dots inside (``federico_eps0.1``);
#: never '.' first or last, never '..', '/', '-' or a space.
METHOD_NAME_PATTERN = r"^[A-Za-z][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*$"
#: Longest partition id (:attr:`pflrepro.data.partition.Partitioner.id`), a directory
#: name and, with ``-split<N>.pdf``, a file name (at most 255 bytes on most systems).
PARTITION_ID_MAX_LENGTH = 200
#: Partition ids: scheme name and parameter values (``dirichlet-clients4-alpha0.5``).
PARTITION_ID_PATTERN = r"^(?!.*\.\.)[A-Za-z0-9][A-Za-z0-9_.+-]*$"
#: Data mirrors (``data.mirrors``, at most this long): an absolute directory ('/', or
#: '~/' for the home directory) or an http(s):// or file:// URL, without characters a
#: shell or a URL query would read (NAME_RULES lists them). Spaces are allowed: the
#: prepare rule passes each mirror as one quoted word.
MIRROR_MAX_LENGTH = 1024
MIRROR_PATTERN = r"^(?:/|~/|https?://|file://)[^\x00-\x1f\x7f'\"$`;&|<>(){}\[\]*?!#\\]*$"

#: What each pattern admits, in words (the error messages).
NAME_RULES: Mapping[str, str] = {
    NAME_PATTERN: f"a letter, then letters, digits or '_' (at most {NAME_MAX_LENGTH} "
                  "characters)",
    METHOD_NAME_PATTERN: f"a letter, then letters, digits, '_' or single '.' inside (no "
                         f"'..', '/', '-' or spaces; at most {NAME_MAX_LENGTH} characters)",
    PARTITION_ID_PATTERN: f"letters, digits, '_', '.', '+' or '-', no '..' (at most "
                          f"{PARTITION_ID_MAX_LENGTH} characters)",
    MIRROR_PATTERN: "an absolute directory ('/...' or '~/...') or an http(s):// or file:// "
                    "URL, without quotes, '$', '`', ';', '&', '|', '<', '>', '(', ')', "
                    "'{', '}', '[', ']', '*', '?', '!', '#', '\\' or control characters",
}


# ------------------------------------------------------------------------------ sizes
# Upper bounds on every size a job allocates or loops over, so a typo (an extra zero,
# a seed pasted from elsewhere) is refused with the key named before any job starts,
# not met at job time as an OverflowError, std::bad_alloc or a run of years. Each bound
# is far above every shipped config (config.yaml at both scales, config/demo.yaml,
# config/convergence_fashion.yaml); the schema (pflrepro.schema) carries the same ones.

#: Seeds are integers in [0, SEED_LIMIT): the run tables store them as int64 and
#: scikit-learn's and NumPy's legacy seeding take 32-bit seeds (pflrepro.seeding's
#: derive_seed itself hashes any integer).
SEED_LIMIT = 2**32
#: Largest value of each integer training key.
TRAINING_MAXIMA: Mapping[str, int] = {
    "rounds": 100_000, "batch_size": 1_000_000, "local_epochs": 10_000,
    "local_steps": 1_000_000, "eval_every": 100_000, "eval_batch_size": 1_000_000,
    "client_chunk": 100_000,
}
#: Most clients of a partition.
MAX_CLIENTS = 100_000
#: Widest hidden layer or conv block (model_options 'hidden', 'channels').
MAX_WIDTH = 65_536
#: Largest kernel side (model_options 'kernel_size'; the inputs are at most 32x32 here).
MAX_KERNEL = 64
#: Most parameters of one model, counted without its input layer (a lower bound on the
#: real count; 250 M float32 parameters are 1 GB per client copy; VGG13 has 9.4 M).
MAX_MODEL_PARAMETERS = 250_000_000
#: Most training-sample passes (samples x local epochs x rounds, or local steps x
#: batch size x rounds, over the clients of a round and every run) one experiment may
#: project; a larger plan is refused unless the config sets ``allow_huge: true``.
#: 10^12 passes take about 3 years at 10^4 samples/s (a CPU core on the CNN).
MAX_SAMPLE_PASSES = 10**12


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return boolean_text(value) if isinstance(value, bool) else (
        text if len(text) <= limit else text[:limit - 3] + "...")


def check_name(name: Any, where: str, pattern: str = NAME_PATTERN,
               max_length: int = NAME_MAX_LENGTH, what: str = "key") -> str:
    """Return ``name`` if it matches ``pattern`` and ``max_length``; else :class:`ConfigError`.

    ``where`` is the section holding it (``methods``); the message names the key.
    """
    if (not isinstance(name, str) or len(name) > max_length
            or re.fullmatch(pattern, name) is None):
        length = (f" ({len(name)} characters)" if isinstance(name, str)
                  and len(name) > max_length else "")
        raise ConfigError(f"{where}: {what} {_short(name)}{length} is not allowed (it becomes "
                          f"part of file paths and command lines): it must be "
                          f"{NAME_RULES[pattern]}")
    return name


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
        (:func:`pflrepro.codedigest.code_digest`:
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
_FINITE_TRAINING = {"lr": False, "momentum": True}


def _check_training_values(values: Mapping[str, Any], where: str) -> None:
    """Types and finiteness of the training keys given in ``values``."""
    for f in dataclasses.fields(TrainingConfig):
        if f.name not in values:
            continue
        value = values[f.name]
        if f.type == "int" and (isinstance(value, bool) or not isinstance(value, int)):
            raise ConfigError(f"{where}.{f.name}: must be an integer, got {value!r}")
        if f.type == "int" and value > TRAINING_MAXIMA.get(f.name, value):
            raise ConfigError(f"{where}.{f.name}: {value} is above the largest allowed, "
                              f"{TRAINING_MAXIMA[f.name]:_}")
        if f.type == "float":
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ConfigError(f"{where}.{f.name}: must be a number, got {value!r}")
            if not math.isfinite(value):
                raise ConfigError(f"{where}.{f.name}: must be a finite number, got {value!r}")
            if f.name in _FINITE_TRAINING and (
                    value < 0 or (value == 0 and not _FINITE_TRAINING[f.name])):
                bound = ">= 0" if _FINITE_TRAINING[f.name] else "> 0"
                raise ConfigError(f"{where}.{f.name}: must be {bound}, got {value!r}")


def _training(defaults: Mapping[str, Any], override: Mapping[str, Any], where: str
              ) -> TrainingConfig:
    _check_training_values(override, where)
    merged = {**defaults, **override}
    try:
        training = TrainingConfig.from_mapping(merged)
    except (TypeError, ValueError) as err:
        raise ConfigError(f"{where}: {err}") from err
    # Name the section the bad options come from (top-level defaults or the experiment).
    at = where if {"model", "model_options"} & set(override) else "training"
    try:
        check_model_options(training.model, training.model_options)
    except ValueError as err:
        raise ConfigError(f"{at}.{err}" if str(err).startswith("model_options")
                          else f"{at}.model: {err}") from err
    if not training.architectures:
        _check_model_size(training.model, training.model_options, f"{at}.model_options")
    at = where if "architectures" in override else "training"
    for i, arch in enumerate(training.architectures):
        try:
            check_model_options(arch["model"], arch["model_options"])
        except ValueError as err:
            raise ConfigError(f"{at}.architectures[{i}]: {err}") from err
        _check_model_size(arch["model"], arch["model_options"],
                          f"{at}.architectures[{i}].model_options")
    if training.optimizer == "adam" and training.momentum != 0:
        at = where if {"optimizer", "momentum"} & set(override) else "training"
        raise ConfigError(f"{at}.momentum: {training.momentum} is SGD's momentum and Adam "
                          f"does not use it (optimizer: adam); set optimizer: sgd or drop "
                          f"momentum")
    return training


#: Parameters of the models without options (torchvision's VGG conv stacks, 32x32
#: inputs, one linear head for 10 classes; counted with torch once).
_FIXED_PARAMETERS = {"vgg11": 9_225_610, "vgg13": 9_410_122}


def model_parameters_lower_bound(model: str, options: Mapping[str, Any]) -> int:
    """A lower bound on the parameters of ``model`` built with ``options``.

    Without the input layer's share (which needs the data set's shape) and with the
    fewest classes (2): MLP hidden widths ``h``: sum of ``h[i] * h[i+1]`` plus the
    first layer's biases; CNN (defaults of :class:`pflrepro.models.nets.CNN`):
    ``c1 * c2 * k**2`` (second conv) ``+ c2 * hidden`` (a 1x1 feature map into the
    hidden layer) ``+ 2 * hidden``. No torch is imported.
    """
    if model == "mlp":
        widths = [int(h) for h in options.get("hidden", (64,))]
        return sum(a * b for a, b in zip(widths, widths[1:], strict=False)) + sum(widths)
    if model == "cnn":
        c1, c2 = (int(c) for c in options.get("channels", (32, 64)))
        hidden, k = int(options.get("hidden", 512)), int(options.get("kernel_size", 5))
        return c1 * c2 * k * k + c2 * hidden + 2 * hidden
    return _FIXED_PARAMETERS.get(model, 0)


def _check_model_size(model: str, options: Mapping[str, Any], where: str) -> None:
    """Refuse a width, kernel or parameter count beyond the bounds (MAX_WIDTH ...)."""
    for key in ("hidden", "channels"):
        value = options.get(key)
        for width in value if isinstance(value, list | tuple) else [value]:
            if isinstance(width, int | float) and width > MAX_WIDTH:
                raise ConfigError(f"{where}.{key}: width {width} (model {model!r}) is above "
                                  f"the widest allowed, {MAX_WIDTH}")
    kernel = options.get("kernel_size")
    if isinstance(kernel, int | float) and kernel > MAX_KERNEL:
        raise ConfigError(f"{where}.kernel_size: {kernel} is above the largest allowed, "
                          f"{MAX_KERNEL}")
    count = model_parameters_lower_bound(model, options)
    if count > MAX_MODEL_PARAMETERS:
        raise ConfigError(f"{where}: model {model!r} with {dict(options)} has at least "
                          f"{count:_} parameters, above the most allowed, "
                          f"{MAX_MODEL_PARAMETERS:_}")


def _unique(values: list[Any], where: str) -> None:
    seen = set()
    for v in values:
        if v in seen:
            raise ConfigError(f"{where}: {v!r} is listed twice")
        seen.add(v)


def _seeds(spec: Mapping[str, Any], key: str, where: str) -> tuple[int, ...]:
    values = list(spec.get(key, [0]) or [])
    for v in values:
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < SEED_LIMIT:
            raise ConfigError(f"{where}.{key}: seeds must be integers in [0, 2**32), got "
                              f"{_short(v)}")
    _unique(values, f"{where}.{key}")
    return tuple(values)




def _check_partition_fits(p: Partitioner, dataset: str, where: str) -> None:
    """Reject a partition its data set cannot give, using the catalog's declared sizes."""
    source = DATASETS[dataset]
    per_client = max(2, int(getattr(p, "min_samples", 2)))
    need = p.clients * per_client
    if p.max_samples and p.max_samples < need:
        raise ConfigError(f"{where}.max_samples: {p.max_samples} samples cannot give "
                          f"{p.clients} clients {per_client} each (one train, one test); "
                          f"need max_samples >= {need}")
    n = source.num_samples
    if n is not None and need > n:
        raise ConfigError(f"{where}.clients: data set {dataset!r} has {n} samples, too few "
                          f"for {p.clients} clients with {per_client} each")
    classes = source.num_classes
    if classes is None:
        return
    for key in p.label_bounded:  # fields that count labels, declared by the scheme
        value = getattr(p, key, None)
        if isinstance(value, int) and value > classes:
            raise ConfigError(f"{where}.{key}: {value} exceeds the {classes} labels of "
                              f"data set {dataset!r}")


def _check_method_params(method: MethodConfig, where: str) -> None:
    for key, value in method.params.items():
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{where}.{key}: must be a finite number, got {value!r}")


def _check_clients_per_round(exp: ExperimentConfig, spec: Mapping[str, Any],
                             where: str) -> None:
    """Refuse client_fraction x clients < 1: fewer than one client per round."""
    fraction = exp.training.client_fraction
    at = (f"{where}.training" if "client_fraction" in (spec.get("training") or {})
          else "training")
    for i, p in enumerate(exp.partitions):
        if fraction * p.clients < 1:
            raise ConfigError(
                f"{at}.client_fraction: {fraction:g} of the {p.clients} clients of "
                f"{where}.partitions[{i}] ({p.id}) is {fraction * p.clients:g}, fewer than "
                f"one client per round; client_fraction must be >= 1/{p.clients} "
                f"({1 / p.clients:g})")


#: Hyperparameters that count other clients (algorithm, key): at most clients - 1.
CLIENT_COUNTED: tuple[tuple[str, str], ...] = (("federico", "neighbors"),)


def _check_client_counts(exp: ExperimentConfig, methods: Mapping[str, MethodConfig],
                         where: str) -> None:
    """Refuse a hyperparameter counting other clients above clients - 1 of a partition."""
    clients = min(p.clients for p in exp.partitions)
    for m in exp.methods:
        method = methods[m]
        for algorithm, key in CLIENT_COUNTED:
            if method.algorithm != algorithm:
                continue
            value = getattr(parse_hyper(algorithm_info(algorithm), method.params), key)
            if value > clients - 1:
                raise ConfigError(
                    f"methods.{m}.{key}: {value} other clients, but the smallest partition "
                    f"of {where} has {clients} clients, so each client has only "
                    f"{clients - 1} others (at most {clients - 1})")


def projected_sample_passes(exp: ExperimentConfig) -> int:
    """Training-sample passes the experiment's runs make, as the config declares them.

    Per run and round: ``m = max(1, round(C * K))`` clients train, each ``local_steps
    * batch_size`` samples when ``local_steps > 0``, else ``local_epochs`` times its
    share of the partition's samples (``max_samples``, else the data set's declared
    size; a data set without one counts 0, so the guard never refuses it on a guess).
    Times rounds, summed over partitions and (split, training seed) runs and methods.
    """
    t = exp.training
    size = DATASETS[exp.dataset].num_samples or 0
    total = 0
    for p in exp.partitions:
        m = max(1, round(t.client_fraction * p.clients))
        if t.local_steps > 0:
            per_round = m * t.local_steps * t.batch_size
        else:
            n = min(p.max_samples or size, size) if size else p.max_samples or 0
            per_round = t.local_epochs * n * m // max(1, p.clients)
        total += per_round * t.rounds
    return total * len(exp.seed_pairs()) * len(exp.methods)


def _check_projected_passes(exp: ExperimentConfig) -> None:
    passes = projected_sample_passes(exp)
    if passes > MAX_SAMPLE_PASSES:
        raise ConfigError(
            f"experiments.{exp.name}: its runs would make {passes:.3g} training-sample "
            f"passes (rounds {exp.training.rounds}, local_epochs "
            f"{exp.training.local_epochs}, local_steps {exp.training.local_steps}, "
            f"{len(exp.seed_pairs())} seed pair(s), {len(exp.methods)} method(s), "
            f"{len(exp.partitions)} partition(s)), above {MAX_SAMPLE_PASSES:.0e} (about 3 "
            f"years at 10^4 samples/s); set the top-level allow_huge: true to run it anyway")


def parse(raw: Mapping[str, Any]) -> WorkflowConfig:
    """Build a :class:`WorkflowConfig`; raise :class:`ConfigError` naming the bad key.

    One function per section, in this order (a later one may refer to an earlier one):
    ``data``, ``methods``, ``training`` and ``experiments``, ``allow_huge``, ``tables``
    and ``scale`` (``_parse_data`` ... ``_parse_scale``).
    """
    mirrors, checksums = _parse_data(raw.get("data", {}) or {})
    methods = _parse_methods(raw.get("methods") or {})
    experiments = _parse_experiments(raw.get("experiments") or {},
                                     raw.get("training", {}) or {}, methods)
    _check_allow_huge(raw.get("allow_huge", False), experiments)
    tables = _parse_tables(raw.get("tables") or {}, experiments)
    scale = _parse_scale(raw.get("scale", "paper"), experiments)
    return WorkflowConfig(mirrors=mirrors, methods=methods, experiments=experiments,
                          tables=tables, scale=scale, checksums=checksums)


def _parse_data(data: Mapping[str, Any]) -> tuple[dict[str, tuple[str, ...]], dict]:
    """The ``data`` section: each data set's mirrors and the checksums of its own files."""
    mirrors = {}
    for name, urls in (data.get("mirrors", {}) or {}).items():
        if name not in DATASETS or not isinstance(urls, list | tuple):
            raise ConfigError(f"data.mirrors.{name}: " + (f"must be a list of mirrors, got "
                              f"{_short(urls)}" if name in DATASETS else
                              f"unknown data set; known: {sorted(DATASETS)}"))
        mirrors[name] = tuple(check_name(url, f"data.mirrors.{name}[{i}]", MIRROR_PATTERN,
                                         MIRROR_MAX_LENGTH, what="mirror")
                              for i, url in enumerate(urls))
    try:
        return mirrors, parse_checksums(data.get("checksums") or {})
    except ValueError as err:  # a bad data.checksums entry, named by the message
        raise ConfigError(str(err)) from None


def _parse_methods(section: Mapping[str, Any]) -> dict[str, MethodConfig]:
    """The ``methods`` section: each named variant's algorithm and hyperparameters."""
    methods: dict[str, MethodConfig] = {}
    for name, spec in section.items():
        check_name(name, "methods", METHOD_NAME_PATTERN)
        spec = dict(spec or {})
        algo = spec.pop("algorithm", name)
        sources = spec.pop("sources", None)
        try:
            parse_hyper(algorithm_info(algo), spec)
        except ValueError as err:
            raise ConfigError(f"methods.{name}: {err}") from err
        methods[name] = MethodConfig(name=name, algorithm=algo, params=spec,
                                     sources=parse_sources(sources, algo,
                                                           f"methods.{name}.sources"))
        _check_method_params(methods[name], f"methods.{name}")
    return methods


def _parse_experiments(section: Mapping[str, Any], defaults: Mapping[str, Any],
                       methods: Mapping[str, MethodConfig]) -> dict[str, ExperimentConfig]:
    """The ``experiments`` section, each over the top-level ``training`` defaults."""
    _check_training_values(defaults, "training")
    experiments: dict[str, ExperimentConfig] = {}
    for name, spec in section.items():
        experiments[name] = _parse_experiment(name, spec, defaults, methods)
    if not experiments:
        raise ConfigError("experiments: at least one experiment is required")
    return experiments


def _parse_partitions(specs: Iterable[Mapping[str, Any]], dataset: str, where: str
                      ) -> tuple[tuple[Partitioner, ...], dict[str, str]]:
    """An experiment's ``partitions``: the partitioners and their labels by id."""
    partitions = []
    labels: dict[str, str] = {}
    for i, pspec in enumerate(specs):
        pspec = dict(pspec)
        label = pspec.pop("label", None)
        try:
            partitions.append(from_spec(pspec))
        except (TypeError, ValueError) as err:
            raise ConfigError(f"{where}.partitions[{i}]: {err}") from err
        check_name(partitions[-1].id, f"{where}.partitions[{i}]", PARTITION_ID_PATTERN,
                   PARTITION_ID_MAX_LENGTH, what="partition id")
        if label is not None:
            labels[partitions[-1].id] = str(label)
    ids = [p.id for p in partitions]
    if len(set(ids)) != len(ids):
        raise ConfigError(f"{where}.partitions: the same partition is listed twice")
    for i, p in enumerate(partitions):
        if p.clients > MAX_CLIENTS:
            raise ConfigError(f"{where}.partitions[{i}].clients: {p.clients} is above the "
                              f"most allowed, {MAX_CLIENTS:_}")
        _check_partition_fits(p, dataset, f"{where}.partitions[{i}]")
    return tuple(partitions), labels


def _parse_experiment(name: str, spec: Mapping[str, Any], defaults: Mapping[str, Any],
                      methods: Mapping[str, MethodConfig]) -> ExperimentConfig:
    """One entry of ``experiments``, checked against ``methods``."""
    check_name(name, "experiments")
    where = f"experiments.{name}"
    dataset = spec.get("dataset")
    if dataset not in DATASETS:
        raise ConfigError(f"{where}.dataset: unknown data set {dataset!r}; "
                          f"known: {sorted(DATASETS)}")
    partitions, labels = _parse_partitions(spec.get("partitions", []), dataset, where)
    for m in spec.get("methods", []):
        if m not in methods:
            raise ConfigError(f"{where}.methods: unknown method {m!r}; "
                              f"defined under 'methods': {sorted(methods)}")
    _unique(list(spec.get("methods", [])), f"{where}.methods")
    exp = ExperimentConfig(
        name=name,
        description=str(spec.get("description", "")),
        dataset=dataset,
        partitions=partitions,
        methods=tuple(spec.get("methods", [])),
        split_seeds=_seeds(spec, "split_seeds", where),
        train_seeds=_seeds(spec, "train_seeds", where),
        training=_training(defaults, spec.get("training", {}) or {}, f"{where}.training"),
        resources={**DEFAULT_RESOURCES, **(spec.get("resources") or {})},
        scale=_choice(spec.get("scale", "paper"), SCALES, f"{where}.scale"),
        label=str(spec.get("label", name)),
        figures=tuple(_choice(f, FIGURE_KINDS, f"{where}.figures")
                      for f in spec.get("figures", ("accuracy", "weights"))),
        focus_client=int(spec.get("focus_client", 0)),
        partition_labels=labels,
        public=_public(spec.get("public"), f"{where}.public"),
        seed_pairing=str(spec.get("seed_pairing", "grid")),
    )
    exp = _with_tune(exp, spec.get("tune"), methods)
    _check_methods_fit(exp, methods, where)
    _check_clients_per_round(exp, spec, where)
    _check_client_counts(exp, methods, where)
    clients = min((p.clients for p in exp.partitions), default=0)
    if exp.focus_client >= clients:
        raise ConfigError(f"{where}.focus_client: {exp.focus_client} is not a client of "
                          f"every partition (smallest has {clients} clients)")
    return exp


def _check_methods_fit(exp: ExperimentConfig, methods: Mapping[str, MethodConfig],
                       where: str) -> None:
    """Refuse a method whose algorithm cannot run the experiment's training or data."""
    for m in exp.methods:
        info = algorithm_info(methods[m].algorithm)
        t = exp.training
        if info.requires_plain_sgd and (t.optimizer != "sgd" or t.momentum != 0):
            raise ConfigError(
                f"{where}.training.optimizer: method {m!r} (algorithm {info.name}) "
                f"requires plain SGD (optimizer: sgd, momentum: 0); got optimizer "
                f"{t.optimizer!r}, "
                f"momentum {t.momentum}")
        if info.needs_public and exp.public is None:
            raise ConfigError(
                f"{where}.public: method {m!r} (algorithm {info.name}) distills on an "
                f"unlabeled public set; give the experiment one, e.g. public: "
                f"{{dataset: {exp.dataset}, size: 500}}")
        if t.heterogeneous and not info.heterogeneous_models:
            able = sorted(n for n, i in INFOS.items() if i.heterogeneous_models)
            raise ConfigError(
                f"{where}.training.architectures: method {m!r} (algorithm "
                f"{info.name}) needs one architecture for every client and cannot run "
                f"with {len(t.architectures)} architectures; drop the method or "
                f"training.architectures (methods that accept several: {able})")
        if t.client_fraction < 1.0 and not info.client_sampling:
            able = sorted(n for n, i in INFOS.items() if i.client_sampling)
            raise ConfigError(
                f"{where}.training.client_fraction: method {m!r} (algorithm "
                f"{info.name}) trains every client every round and does not support "
                f"client_fraction {t.client_fraction} < 1; methods that do: {able}")


def _check_allow_huge(allow_huge: Any, experiments: Mapping[str, ExperimentConfig]) -> None:
    """The ``allow_huge`` key; unless it is true, refuse an experiment too big to run."""
    if not isinstance(allow_huge, bool):
        raise ConfigError(f"allow_huge: must be true or false, got {_short(allow_huge)}")
    if not allow_huge:
        for exp in experiments.values():
            _check_projected_passes(exp)


def _parse_tables(section: Mapping[str, Any], experiments: Mapping[str, ExperimentConfig]
                  ) -> dict[str, TableConfig]:
    """The ``tables`` section, each over experiments of one scale."""
    tables = {}
    for name, spec in section.items():
        check_name(name, "tables")
        where = f"tables.{name}"
        if name in experiments:
            raise ConfigError(f"{where}: a table may not share its name with an experiment")
        names = tuple(spec.get("experiments", []))
        unknown = [e for e in names if e not in experiments]
        if unknown or not names:
            raise ConfigError(f"{where}.experiments: unknown or empty {unknown or names}; "
                              f"defined: {sorted(experiments)}")
        scales = {experiments[e].scale for e in names}
        if len(scales) != 1:
            raise ConfigError(f"{where}.experiments: mixes scales {sorted(scales)}")
        tables[name] = TableConfig(
            name=name, experiments=names, caption=str(spec.get("caption", "")),
            metric=_choice(spec.get("metric", "weighted_final"), TABLE_METRICS,
                           f"{where}.metric"),
            scale=scales.pop())
    return tables


def _parse_scale(value: Any, experiments: Mapping[str, ExperimentConfig]) -> str:
    """The top-level ``scale``: one of :data:`SCALES` that some experiment has."""
    scale = _choice(value, SCALES, "scale")
    if not any(exp.scale == scale for exp in experiments.values()):
        scales = ", ".join(f"{n}: {e.scale}" for n, e in experiments.items())
        raise ConfigError(f"scale: no experiment has scale {scale!r}, so there is nothing to "
                          f"build; the experiments' scales are {{{scales}}} (set the top-level "
                          f"'scale' or an experiment's 'scale')")
    return scale


def _public(spec: Mapping[str, Any] | None, where: str) -> PublicConfig | None:
    if spec is None:
        return None
    dataset = spec.get("dataset")
    if dataset not in DATASETS:
        raise ConfigError(f"{where}.dataset: unknown data set {dataset!r}")
    size = int(spec.get("size", 0))
    if size < 1:
        raise ConfigError(f"{where}.size: must be >= 1, got {size}")
    return PublicConfig(dataset=dataset, size=size)


def _choice(value: Any, choices: tuple[str, ...], where: str) -> str:
    if value not in choices:
        raise ConfigError(f"{where}: {value!r} is not one of {list(choices)}")
    return str(value)


def canonical_json(obj: Any) -> str:
    """Compact JSON with sorted keys (stable across runs, used as a Snakemake param)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


# --------------------------------------------------------------------- config files
class _UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that rejects a key repeated within one mapping."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, yaml.Mark] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *anchor`: may be overridden
                continue
            key = self.construct_object(key_node, deep=True)  # type: ignore[no-untyped-call]
            try:
                first = seen.get(key)
            except TypeError:  # unhashable key: let SafeLoader report it
                continue
            if first is not None:
                mark = key_node.start_mark
                raise ConfigError(
                    f"{mark.name}:{mark.line + 1}:{mark.column + 1}: duplicate key {key!r} "
                    f"(first at line {first.line + 1}); YAML keeps only the last value")
            seen[key] = key_node.start_mark
        return super().construct_mapping(node, deep=deep)

    def _refuse_sexagesimal(self, node: yaml.ScalarNode, value: Any) -> None:
        mark = node.start_mark
        raise ConfigError(
            f"{mark.name}:{mark.line + 1}:{mark.column + 1}: {node.value!r} is a base-60 "
            f"number in YAML 1.1 (it reads as {value!r}); write the number itself, or "
            f"quote it if a string is meant")

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        value = super().construct_yaml_int(node)  # type: ignore[no-untyped-call]
        if ":" in str(node.value):
            self._refuse_sexagesimal(node, value)
        return value  # type: ignore[no-any-return]

    def construct_yaml_float(self, node: yaml.ScalarNode) -> float:
        value = super().construct_yaml_float(node)  # type: ignore[no-untyped-call]
        if ":" in str(node.value):
            self._refuse_sexagesimal(node, value)
        return value  # type: ignore[no-any-return]


# PyYAML (YAML 1.1) reads an unquoted 1:30 as the base-60 integer 90 (and 1:30.5 as a
# float): the strict loader refuses such scalars, naming file and line.
_UniqueKeyLoader.add_constructor("tag:yaml.org,2002:int", _UniqueKeyLoader.construct_yaml_int)
_UniqueKeyLoader.add_constructor("tag:yaml.org,2002:float",
                                 _UniqueKeyLoader.construct_yaml_float)


def load_config_file(path: str | Path) -> dict[str, Any]:
    """Read a config file, as Snakemake does, but strictly.

    Raises :class:`ConfigError` naming the file and line for a YAML syntax error or a
    duplicate key (plain YAML keeps the last value silently), and naming the file for
    an empty file or one whose top level is not a mapping.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(f"{path}: cannot read config file: {err.strerror or err}") from err
    except UnicodeDecodeError as err:
        raise ConfigError(f"{path}: not a text (UTF-8) config file: byte {err.start} is "
                          f"{err.object[err.start:err.start + 1]!r}") from None
    try:
        data = yaml.load(text, Loader=_loader_for(path))  # noqa: S506 (a SafeLoader)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        what = " ".join(x for x in (err.context, err.problem) if x)
        raise ConfigError(f"{where}: YAML syntax error: {what}") from None
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: YAML error: {err}") from None
    if data is None:
        raise ConfigError(f"{path}: the config file is empty; it needs at least 'methods' "
                          f"and 'experiments'")
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the config's top level must be a mapping of keys, got "
                          f"{type(data).__name__}")
    return data


def _loader_for(path: Path) -> type[yaml.SafeLoader]:
    def named(stream: str) -> yaml.SafeLoader:
        loader = _UniqueKeyLoader(stream)
        loader.name = str(path)
        return loader

    return named  # type: ignore[return-value]


def check_config_files(paths: Iterable[str | Path], missing_ok: bool = True) -> None:
    """Re-read each config file strictly (:func:`load_config_file`); skip missing ones."""
    for path in paths:
        if missing_ok and not Path(path).exists():
            continue
        load_config_file(path)


def merge_configs(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """``override`` merged into a copy of ``base`` as Snakemake merges config files.

    A key of both whose values are both mappings is merged the same way, recursively;
    any other value of ``override`` replaces the one of ``base``.
    """
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = merge_configs(merged[key], value)
        else:
            merged[key] = value
    return merged


def check_config_paths(paths: Sequence[str | Path],
                       schema: Mapping[str, Any] | str | Path) -> WorkflowConfig:
    """The workflow's checks on config files: read strictly, merged in order, checked.

    Snakemake reads the files of ``--configfile`` itself, before the workflow runs, and
    reports a YAML syntax error or an empty file with neither the file nor the line;
    this reports them as :func:`load_config_file` does, then checks the merged config
    (:func:`check`). Several files merge in the order given, as Snakemake merges them:
    ``config.yaml my.yaml`` checks ``my.yaml`` merged into ``config.yaml``.
    """
    if not paths:
        raise ConfigError("no config file given")
    merged: dict[str, Any] = {}
    for path in paths:
        merged = merge_configs(merged, load_config_file(path))
    return located_check(paths, lambda: check(merged, schema))  # errors name file:line


# ----------------------------------------------------------------------- the schema
def _where(path: Iterable[Any]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _schema_message(error: Any) -> str:
    where = _where(error.absolute_path)
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        known = sorted(error.schema.get("properties") or {})
        unknown = sorted(set(error.instance) - set(known), key=str)
        place = where or "config top level"
        return (f"unknown key {', '.join(repr(k) for k in unknown)} at {place}; "
                f"known: {', '.join(known)}")
    if error.validator == "propertyNames":
        return f"{where or 'config top level'}: key {_short(error.instance)} is not allowed"
    pattern = error.schema.get("pattern") if isinstance(error.schema, Mapping) else None
    if error.validator in ("pattern", "maxLength") and pattern in NAME_RULES:
        # a name (propertyNames: the key of ``where``) or a mirror: say what is allowed
        key = "propertyNames" in error.relative_schema_path
        try:
            check_name(error.instance, where or "config top level", pattern,
                       error.schema.get("maxLength", NAME_MAX_LENGTH),
                       what="key" if key else "mirror" if pattern == MIRROR_PATTERN
                       else "name")
        except ConfigError as err:
            return str(err)
    if error.validator == "enum":
        return (f"{where}: {_short(error.instance)} is not one of "
                f"{', '.join(map(str, error.validator_value))}")
    if error.validator == "required":
        return f"{where or 'config top level'}: {error.message}"
    if error.validator in ("minItems", "minProperties") and not error.instance:
        what = "entry" if error.validator == "minItems" else "key"
        return (f"{where or 'config top level'} is empty: give it at least "
                f"{error.validator_value} {what} (config/demo.yaml has complete experiments; "
                "`pflrepro list` shows the methods, data sets and partition schemes)")
    message = error.message
    if len(message) > 200:
        message = message[:197] + "..."
    return f"{where or 'config top level'}: {message}"


def check_schema(raw: Any, schema: Mapping[str, Any] | str | Path) -> None:
    """Validate ``raw`` against the config schema; one short message naming the key.

    ``schema`` is the schema (:func:`pflrepro.schema.build_schema`, which imports this
    module: so it is passed in, never imported here) or the path of its YAML file.
    Unlike ``snakemake.utils.validate`` the message never prints the schema itself.
    """
    import jsonschema

    if isinstance(schema, str | Path):
        schema = yaml.safe_load(Path(schema).read_text(encoding="utf-8"))
    if not isinstance(raw, Mapping):
        raise ConfigError(f"the config's top level must be a mapping, got {type(raw).__name__}")
    errors = list(jsonschema.Draft202012Validator(schema).iter_errors(raw))
    if not errors:
        return
    error = jsonschema.exceptions.best_match(errors)
    # Inside if/then cases, report the deepest error (the bad hyperparameter itself).
    while error.context:
        error = jsonschema.exceptions.best_match(error.context)
    raise schema_error(_schema_message(error), error)  # a ConfigError that knows its key


def check(raw: Any, schema: Mapping[str, Any] | str | Path) -> WorkflowConfig:
    """:func:`check_schema`, then :func:`parse`: what ``common.smk`` does."""
    check_schema(raw, schema)
    return parse(raw)


def _with_tune(exp: ExperimentConfig, spec: Any,
               methods: Mapping[str, MethodConfig]) -> ExperimentConfig:
    """``exp`` with its ``tune:`` block parsed (:func:`pflrepro.tuning.parse_tune`)."""
    from pflrepro.tuning import TuneError, parse_tune, tunable_keys

    if spec is None:
        return exp
    own = {m: methods[m].params for m in exp.methods}
    tunable = {m: tunable_keys(methods[m].algorithm) for m in exp.methods}
    try:
        tune = parse_tune(spec, f"experiments.{exp.name}.tune", own, tunable,
                          exp.training.rounds)
    except TuneError as err:
        raise ConfigError(str(err)) from err
    return dataclasses.replace(exp, tune=tune)
