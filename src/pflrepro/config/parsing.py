"""Parsing the raw config into :class:`~pflrepro.config.model.WorkflowConfig`.

Sections are read in order (data, methods, experiments, tables, scale); references
between them are resolved and checked here, every error naming its key.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from pflrepro.algorithms.registry import INFOS, algorithm_info, parse_hyper
from pflrepro.choices import did_you_mean
from pflrepro.config.checks import (
    _check_client_counts,
    _check_clients_per_round,
    _check_input_shape,
    _check_method_params,
    _check_partition_fits,
    _check_projected_passes,
    _check_training_values,
    _seeds,
    _training,
    _unique,
)
from pflrepro.config.errors import ConfigError
from pflrepro.config.limits import (
    DEFAULT_RESOURCES,
    FIGURE_KINDS,
    MAX_CLIENTS,
    METHOD_NAME_PATTERN,
    MIRROR_MAX_LENGTH,
    MIRROR_PATTERN,
    PARTITION_ID_MAX_LENGTH,
    PARTITION_ID_PATTERN,
    SCALES,
    TABLE_METRICS,
    _short,
    check_name,
)
from pflrepro.config.model import (
    ExperimentConfig,
    MethodConfig,
    PublicConfig,
    TableConfig,
    WorkflowConfig,
    parse_sources,
)
from pflrepro.config.settings_sources import parse_setting_sources
from pflrepro.data.checksums import parse_checksums
from pflrepro.data.datasets import DATASETS
from pflrepro.data.partition import Partitioner, from_spec


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
    download = {k: float(v) for k, v in ((raw.get("data") or {}).get("download") or {}).items()}
    return WorkflowConfig(mirrors=mirrors, methods=methods, experiments=experiments,
                          tables=tables, scale=scale, checksums=checksums, download=download)


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
        label = spec.pop("label", "")
        if not isinstance(label, str):
            raise ConfigError(f"methods.{name}.label: a display name (text), got {label!r}")
        try:
            parse_hyper(algorithm_info(algo), spec)
        except ValueError as err:
            raise ConfigError(f"methods.{name}: {err}") from err
        methods[name] = MethodConfig(name=name, algorithm=algo, params=spec,
                                     sources=parse_sources(sources, algo,
                                                           f"methods.{name}.sources"),
                                     label=label)
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
        raise ConfigError(f"{where}.dataset: unknown data set {dataset!r}"
                          f"{did_you_mean(dataset, DATASETS)}; known: {sorted(DATASETS)}")
    partitions, labels = _parse_partitions(spec.get("partitions", []), dataset, where)
    for m in spec.get("methods", []):
        if m not in methods:
            raise ConfigError(f"{where}.methods: unknown method {m!r}"
                              f"{did_you_mean(m, methods)}; defined under 'methods': "
                              f"{sorted(methods)}")
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
        sources=parse_setting_sources(spec.get("sources"), f"{where}.sources"),
    )
    exp = _with_tune(exp, spec.get("tune"), methods)
    _check_methods_fit(exp, methods, where)
    _check_input_shape(exp, where)
    _check_clients_per_round(exp, spec, where)
    _check_client_counts(exp, methods, where)
    clients = min((p.clients for p in exp.partitions), default=0)
    if exp.focus_client >= clients:
        raise ConfigError(f"{where}.focus_client: {exp.focus_client} is not a client of "
                          f"every partition (smallest has {clients} clients)")
    return exp


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
