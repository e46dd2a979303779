"""Which figures an experiment draws, from which aggregates, with which options."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable
from typing import Any

from pflrepro.algorithms.registry import INFOS
from pflrepro.config import WorkflowConfig
from pflrepro.config.figure_kinds import (
    FigureKind,
    figure_kind,
    kinds_of_entry,
    rule_kinds,
    rule_options,
)
from pflrepro.data.datasets import DATASETS
from pflrepro.pipeline.workflow.patterns import FIGURE, FIGURE_LOG, pattern
from pflrepro.store import results as R
from pflrepro.store.paths import AGGREGATE, METHOD_AGGREGATE


def recording(metric: str) -> tuple[str, ...]:
    """Algorithms whose ``records`` declare ``metric``.

    ``recording(results.WEIGHT)``: the algorithms that learn pairwise weights
    (client-client or client-component), each drawn as a heatmap figure;
    ``recording(results.MODEL_DISTANCE)``: those logging pairwise model distances.
    """
    return tuple(name for name, info in INFOS.items() if metric in info.records)


def alternation(names: Iterable[str]) -> str:
    """Regex matching exactly one of ``names`` (for wildcard constraints)."""
    names = sorted(names, key=len, reverse=True)
    return "|".join(re.escape(n) for n in names) if names else r"(?!)"


def figure_pattern(kind: str, ext: str) -> str:
    """A plot rule's output: the ``ext`` file of figure kind ``kind``, wildcards kept."""
    return pattern(FIGURE, kind=figure_kind(kind).file, ext=ext)


def figure_rule_kinds() -> list[FigureKind]:
    """The figure kinds with a plot rule each (all but the partition figure's)."""
    return rule_kinds()


def figure_log(kind: str) -> str:
    """A plot rule's log: ``logs/plot/{experiment}-<the kind's file>.log``."""
    return pattern(FIGURE_LOG, kind=figure_kind(kind).file)


def figure_methods(cfg: WorkflowConfig, experiment: str, kind: str) -> list[str]:
    """Methods of ``experiment`` that figure kind ``kind`` applies to.

    All of them, or those whose algorithm records the metric the kind ``records``.
    """
    records = figure_kind(kind).records
    return [m for m in cfg.experiments[experiment].methods
            if not records or records in INFOS[cfg.methods[m].algorithm].records]


def figure_aggregates(cfg: WorkflowConfig, experiment: str, kind: str) -> list[str]:
    """The per-method aggregates of the methods figure kind ``kind`` applies to.

    The input of a plot rule whose kind's input is ``recording``.
    """
    return [METHOD_AGGREGATE.format(experiment=experiment, method=m)
            for m in figure_methods(cfg, experiment, kind)]


def plot_input(kind: str) -> str | None:
    """A plot rule's input pattern (``None``: :func:`figure_aggregates`).

    ``None`` for a kind that reads the aggregates of the methods it applies to.
    """
    source = figure_kind(kind).input
    return {"aggregate": AGGREGATE, "method": METHOD_AGGREGATE}.get(source)


def plot_options(cfg: WorkflowConfig, wildcards: Any, kind: str) -> str:
    """A plot rule's ``pflrepro plot`` options beyond every kind's own (shell-quoted).

    ``--method``/``--client`` from the wildcards, ``--methods`` the legend order,
    ``--names`` the architectures.
    """
    out: list[str] = []
    for option in rule_options(figure_kind(kind)):
        if option == "methods":
            out += ["--methods", table_methods(cfg, [wildcards.experiment])]
        elif option == "names":
            out += ["--names", shlex.quote(architecture_names(cfg, wildcards.experiment))]
        else:  # a wildcard of the rule
            out += [f"--{option}", shlex.quote(str(getattr(wildcards, option)))]
    return " ".join(out)


def dataset_names() -> list[str]:
    """Every registered data set."""
    return sorted(DATASETS)


def weighted_methods(cfg: WorkflowConfig, experiment: str) -> list[str]:
    """Methods of ``experiment`` whose algorithm records client weights."""
    return [m for m in cfg.experiments[experiment].methods
            if cfg.methods[m].algorithm in recording(R.WEIGHT)]


def weights_method(cfg: WorkflowConfig, experiment: str) -> str:
    """The first method of ``experiment`` whose algorithm records client weights."""
    found = weighted_methods(cfg, experiment)
    if not found:
        raise ValueError(f"experiment {experiment!r} has no method with client weights "
                         f"(algorithms {list(recording(R.WEIGHT))})")
    return found[0]


def figure_paths(cfg: WorkflowConfig, experiment: str) -> list[str]:
    """The figures an experiment asks for (its ``figures`` list), PDF and PNG each.

    Each entry asks for its own kind and the kinds that come with it (their
    ``entry``), as each kind declares: one figure per method it applies to when its
    file names ``{method}``, else one figure if it applies to any method (a kind with
    ``if_none="error"`` refuses the experiment otherwise), for the experiment's
    ``focus_client`` when its file names ``{client}``.
    """
    exp = cfg.experiments[experiment]
    files: list[str] = []
    for entry in exp.figures:
        for kind in kinds_of_entry(entry):
            methods = figure_methods(cfg, experiment, kind.name)
            if kind.heterogeneous and not exp.training.heterogeneous:
                raise ValueError(f"experiment {experiment!r} asks for the {kind.name!r} figure "
                                 f"but its clients share one model (training.architectures "
                                 f"lists fewer than two)")
            if kind.per_method:
                files += [pattern(kind.file, method=m) for m in methods]
            elif methods:
                files.append(pattern(kind.file, client=exp.focus_client)
                             if "client" in kind.options else kind.file)
            elif kind.if_none == "error":
                raise ValueError(f"experiment {experiment!r} asks for the {kind.name!r} figure "
                                 f"but none of its methods records {kind.records!r} "
                                 f"(algorithms {list(recording(kind.records))})")
    return [FIGURE.format(experiment=experiment, kind=k, ext=ext)
            for k in files for ext in ("pdf", "png")]


def architecture_names(cfg: WorkflowConfig, experiment: str) -> str:
    """JSON ``{index: "model {options}"}`` of an experiment's architectures (figure legends)."""
    import json

    models = cfg.experiments[experiment].training.models
    return json.dumps({str(i): f"{name} {json.dumps(dict(options), sort_keys=True)}"
                       if options else name for i, (name, options) in enumerate(models)})


def table_methods(cfg: WorkflowConfig, experiments: Iterable[str]) -> str:
    """Row order: the methods of the experiments, first appearance first."""
    order = [m for e in experiments for m in cfg.experiments[e].methods]
    return " ".join(dict.fromkeys(order))
