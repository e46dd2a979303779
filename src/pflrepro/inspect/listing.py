"""``pflrepro list``: the methods, data sets and partition schemes, read from their registries.

Nothing is listed here by hand: methods come from
:data:`pflrepro.algorithms.registry.INFOS` (each hyperparameter's type, default, bounds
and doc from its ``hyper(...)`` declaration), data sets from
:data:`pflrepro.data.datasets.DATASETS`, partition schemes from
:data:`pflrepro.data.partition.PARTITIONERS` (each option's default and doc as the
config schema shows them).

``pflrepro list hyperparameters`` reads a workflow config (``--config``, default
``config.yaml``) and says, per method variant and hyperparameter, where its value
comes from (:func:`hyperparameters`): *stated by the paper* or *set by us* as the
variant's ``sources:`` key in the config declares it (``paper: <where>`` /
``unstated: <why>``; the config is the one place, since one algorithm serves several
papers' experiments), *tuned* on validation by the experiments whose ``tune:`` block
names it (or *tied* to tuned values by the algorithm), or the algorithm's default.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pflrepro.config import WorkflowConfig


#: Experiments named in a hyperparameter's line; longer lists are labelled sets.
LISTED_EXPERIMENTS = 3


def _default(field: dataclasses.Field[Any]) -> str:
    if field.default is not dataclasses.MISSING:
        return repr(field.default)
    if field.default_factory is not dataclasses.MISSING:
        return repr(field.default_factory())
    return "(required)"


def _first_line(obj: Any) -> str:
    doc = inspect.getdoc(obj) or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""


def methods() -> str:
    """Every method: summary, what it needs, hyperparameters with defaults and docs."""
    from pflrepro.algorithms.registry import INFOS

    lines = ["# Methods (`--method`; config `methods: {name: {algorithm: ...}}`)", ""]
    for name, info in INFOS.items():
        needs = [text for flag, text in (
            (info.requires_plain_sgd, "plain SGD (optimizer: sgd, momentum: 0)"),
            (info.needs_public, "an unlabeled public set"),
            (info.client_sampling, "accepts client_fraction < 1"),
            (info.heterogeneous_models, "accepts several architectures"),
        ) if flag]
        lines.append(f"## {name}")
        lines.append(info.summary)
        if needs:
            lines.append("Notes: " + "; ".join(needs) + ".")
        fields = dataclasses.fields(info.Hyper)
        if not fields:
            lines.append("Hyperparameters: none.")
        for f in fields:
            meta = f.metadata
            bounds = []
            if "choices" in meta:
                bounds.append("one of " + ", ".join(map(repr, meta["choices"])))
            if "minimum" in meta:
                bounds.append(f">= {meta['minimum']}")
            if "maximum" in meta:
                bounds.append(f"<= {meta['maximum']}")
            kind = type(f.default).__name__ if f.default is not dataclasses.MISSING else "?"
            extra = f" ({', '.join(bounds)})" if bounds else ""
            lines.append(f"  - {f.name}: {kind}, default {_default(f)}{extra}. "
                         f"{meta.get('doc', '')}")
        lines.append("")
    return "\n".join(lines)


def datasets() -> str:
    """Every data set: samples, classes, description."""
    from pflrepro.data.datasets import DATASETS

    lines = ["# Data sets (`--dataset`; config `experiments.<name>.dataset`)", ""]
    for name, source in sorted(DATASETS.items()):
        size = f"{source.num_samples} samples" if source.num_samples else "size found on "\
               "preparation"
        classes = f"{source.num_classes} classes" if source.num_classes else "classes found "\
                  "on preparation"
        lines.append(f"- {name} ({size}, {classes}): {source.description}")
    return "\n".join(lines) + "\n"


def partitions() -> str:
    """Every partition scheme: what it does, its options with defaults and docs."""
    from pflrepro.data.partition import PARTITIONERS, schema_properties

    lines = ["# Partition schemes (`--partition SCHEME`, options `--clients N`, "
             "`--partition-option KEY=VALUE`; config `partitions: [{scheme: ..., ...}]`)", ""]
    for scheme, cls in sorted(PARTITIONERS.items()):
        lines.append(f"## {scheme}")
        lines.append(_first_line(cls))
        docs = schema_properties(cls)
        for f in dataclasses.fields(cls):
            lines.append(f"  - {f.name}: default {_default(f)}. "
                         f"{docs.get(f.name, {}).get('description', '')}")
        lines.append("")
    return "\n".join(lines)


def _tuned_by(cfg: WorkflowConfig, name: str) -> tuple[dict[str, list[str]],
                                                        dict[str, list[str]]]:
    """(key -> experiments tuning it, key -> experiments tying it to tuned values)."""
    from pflrepro.tuning import grid_points, tied_params

    method = cfg.methods[name]
    tuned: dict[str, list[str]] = {}
    tied: dict[str, list[str]] = {}
    for exp_name, exp in cfg.experiments.items():
        if exp.tune is None or name not in exp.tune.methods or name not in exp.methods:
            continue
        if exp.tune.training is not None and exp.tune.training.by == name:
            continue  # it selects shared training settings, not its hyperparameters
        grids = exp.tune.methods[name]
        for g in grids:
            tuned.setdefault(g.key, []).append(exp_name)
        point = grid_points(grids)[0]
        for key in tied_params(method.algorithm, point, exp.partitions[0].clients,
                               method.params):
            if key not in point:
                tied.setdefault(key, []).append(exp_name)
    return tuned, tied


def hyperparameters(cfg: WorkflowConfig) -> str:
    """Per method variant of ``cfg``, per hyperparameter: where its value comes from.

    * ``stated by the paper``: the variant's ``sources:`` says ``paper: ...``;
    * ``set by us``: the variant sets it and ``sources:`` says ``unstated: <why>`` (or
      gives no reason, which is said);
    * ``tuned on validation by <experiments>`` (their ``tune:`` blocks), or ``tied to
      the tuned values`` (the algorithm's ``tied_values``) there;
    * otherwise the algorithm's default (``pflrepro list methods``: its doc).
    """
    from pflrepro.algorithms.registry import algorithm_info
    from pflrepro.tuning import tunable_keys

    lines = ["# Hyperparameters of the config's method variants: stated by the paper, set "
             "by us (why), tuned on validation, or the algorithm's default", ""]
    sets: dict[tuple[str, ...], str] = {}

    def experiments(names: list[str]) -> str:
        """Up to :data:`LISTED_EXPERIMENTS` names, else a set's label (listed at the end)."""
        if len(names) <= LISTED_EXPERIMENTS:
            return ", ".join(names)
        label = sets.setdefault(tuple(names), f"E{len(sets) + 1}")
        return f"the {len(names)} experiments of {label}"
    for name, method in cfg.methods.items():
        hyper = algorithm_info(method.algorithm).Hyper
        defaults = {f.name: f.default for f in dataclasses.fields(hyper)}
        tuned, tied = _tuned_by(cfg, name)
        used = [e for e, exp in cfg.experiments.items() if name in exp.methods]
        lines.append(f"## {name} ({method.algorithm})")
        keys = [k for k in tunable_keys(method.algorithm)
                if k in defaults or k in tuned or k in method.sources]
        if not keys:
            lines.append("  (no hyperparameters)")
        for key in keys:
            source = method.sources.get(key, "")
            kind, _, why = source.partition(":")
            if key in method.params:
                value = f"{method.params[key]!r}"
                where = (f"stated by the paper ({why.strip()})" if kind == "paper" else
                         f"set by us: {why.strip()}" if kind == "unstated" else
                         "set by us (no reason given in the config)")
            elif key in tuned or key in tied:
                value = "tuned"
                where = (f"tuned on validation by {experiments(tuned[key])}" if key in tuned
                         else f"tied to the tuned values by {experiments(tied[key])}")
                if kind == "unstated":
                    where += f" (unstated: {why.strip()})"
                others = [e for e in used if e not in tuned.get(key, tied.get(key, []))]
                if others and key in defaults:
                    where += (f"; the algorithm's default {defaults[key]!r} in "
                              f"{experiments(others)}")
            elif kind == "paper":
                value = f"{defaults.get(key)!r}"
                where = f"stated by the paper ({why.strip()}; the algorithm's default)"
            else:
                value = f"{defaults.get(key)!r}"
                where = "the algorithm's default" + (f" (unstated: {why.strip()})"
                                                     if kind == "unstated" else "")
            lines.append(f"  - {key} = {value}: {where}")
        lines.append("")
    if sets:
        lines.append("## Experiment sets")
        lines += [f"  - {label}: {', '.join(names)}" for names, label in sets.items()]
        lines.append("")
    return "\n".join(lines)


def overview() -> str:
    """``pflrepro list``: one line per method, data set and scheme; the details' commands."""
    from pflrepro.algorithms.registry import INFOS
    from pflrepro.data.partition import PARTITIONERS

    lines = ["# Methods (`--method`; details: `pflrepro list methods`)"]
    lines += [f"- {name}: {info.summary}" for name, info in INFOS.items()]
    lines += ["", datasets(), "# Partition schemes (`--partition`; options: "
              "`pflrepro list partitions`)"]
    lines += [f"- {scheme}: {_first_line(cls)}" for scheme, cls in sorted(PARTITIONERS.items())]
    lines += ["", "Where each hyperparameter of a config's method variants comes from (the "
              "paper, us, tuning or a default): `pflrepro list hyperparameters "
              "[--config FILE ...]`.", ""]
    return "\n".join(lines)


def render(what: str = "all", cfg: WorkflowConfig | None = None, scale: str = "paper"
           ) -> str:
    """``methods``, ``datasets``, ``partitions``, ``hyperparameters``, ``settings`` or ``all``.

    ``all`` is the one-screen :func:`overview`; ``hyperparameters`` and ``settings``
    (every ``scale`` experiment's settings beside their sources,
    :mod:`pflrepro.reporting.settings_table`) need a config ``cfg``.
    """
    parts: dict[str, Any] = {"methods": methods, "datasets": datasets,
                             "partitions": partitions}
    if what == "all":
        return overview()
    if what in ("hyperparameters", "settings"):
        if cfg is None:
            raise ValueError(f"listing {what} needs a config (--config)")
        if what == "settings":
            from pflrepro.reporting.settings_table import render as settings

            return settings(cfg, scale) + "\n"
        return hyperparameters(cfg)
    if what not in parts:
        raise ValueError(f"nothing called {what!r} to list; choose one of "
                         f"{sorted([*parts, 'hyperparameters', 'settings'])}")
    return parts[what]()
