"""Checks of a parsed experiment that a schema cannot make.

Training values, model sizes, seeds, whether a partition fits its data set, client
counts and the projected amount of training.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from typing import Any

from pflrepro.algorithms.registry import algorithm_info, parse_hyper
from pflrepro.config.errors import PERIODIC_REPEATS, ConfigError, periodic_piece
from pflrepro.config.limits import (
    MAX_KERNEL,
    MAX_MODEL_PARAMETERS,
    MAX_SAMPLE_PASSES,
    MAX_WIDTH,
    SEED_LIMIT,
    TRAINING_MAXIMA,
    _short,
)
from pflrepro.config.model import ExperimentConfig, MethodConfig, WorkflowConfig
from pflrepro.data.datasets import DATASETS
from pflrepro.data.partition import Partitioner
from pflrepro.models import check_model_options
from pflrepro.models.shapes import check_input_shape
from pflrepro.training.settings import TrainingConfig

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


def _check_input_shape(exp: ExperimentConfig, where: str) -> None:
    """Refuse a model that cannot take the data set's images (VGG on 8x8 digits)."""
    shape = DATASETS[exp.dataset].image_shape
    if shape is None:
        return
    t = exp.training
    models = ([(f"architectures[{i}].model", a["model"]) for i, a in enumerate(t.architectures)]
              if t.architectures else [("model", t.model)])
    for key, model in models:
        try:
            check_input_shape(model, shape)
        except ValueError as err:
            raise ConfigError(f"{where}.training.{key} (data set {exp.dataset}): {err}") from err


def _names(cfg: WorkflowConfig) -> Iterable[tuple[str, str]]:
    """(what, name) of every config name that becomes a wildcard value."""
    yield from (("experiment", name) for name in cfg.experiments)
    yield from (("method", name) for name in cfg.methods)
    yield from (("table", name) for name in cfg.tables)
    for exp in cfg.experiments.values():
        yield "data set", exp.dataset
        yield from ((f"experiment {exp.name!r}: partition", p.id) for p in exp.partitions)


def refuse_periodic_names(cfg: WorkflowConfig) -> WorkflowConfig:
    """``cfg``, or :class:`ConfigError` naming a name Snakemake takes for a recursion."""
    for what, name in _names(cfg):
        periodic = periodic_piece(name)
        if periodic is not None:
            raise ConfigError(
                f"{what} {name!r} ends in {periodic[0]!r} repeated {periodic[1]} times: "
                f"Snakemake takes a name ending in one piece repeated "
                f"{PERIODIC_REPEATS} or more times for a rule that recurses into itself "
                f"(PeriodicWildcardError); rename it")
    return cfg
