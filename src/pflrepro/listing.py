"""``pflrepro list``: the methods, data sets and partition schemes, read from their registries.

Nothing is listed here by hand: methods come from
:data:`pflrepro.algorithms.registry.INFOS` (each hyperparameter's type, default, bounds
and doc from its ``hyper(...)`` declaration), data sets from
:data:`pflrepro.data.datasets.DATASETS`, partition schemes from
:data:`pflrepro.data.partition.PARTITIONERS` (each option's default and doc as the
config schema shows them).
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any


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
            (info.partial_participation, "accepts client_fraction < 1"),
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


def render(what: str = "all") -> str:
    """``methods``, ``datasets``, ``partitions`` or ``all`` of them."""
    parts = {"methods": methods, "datasets": datasets, "partitions": partitions}
    if what == "all":
        return "\n".join(fn() for fn in parts.values())
    if what not in parts:
        raise ValueError(f"nothing called {what!r} to list; choose one of {sorted(parts)}")
    return parts[what]()
