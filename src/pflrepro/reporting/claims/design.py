"""What a check expects of the runs: each experiment's columns, methods and seed pairs.

A :class:`Design` (from the config, :func:`design_of`, passed to the claims job as JSON:
:func:`design_json`, :func:`parse_design`) says which columns, methods and runs each
experiment has. Imports neither numpy nor pandas: the workflow parse loads designs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Design:
    """What an experiment's config runs: the cells and runs a check expects.

    ``seeds`` are the (split seed, training seed) pairs of every run of every cell
    (:meth:`pflrepro.config.ExperimentConfig.seed_pairs`).
    """

    partitions: tuple[str, ...]
    methods: tuple[str, ...]
    seeds: tuple[tuple[int, int], ...]


def design_of(cfg: Any, experiments: Iterable[str]) -> dict[str, Design]:
    """The :class:`Design` of each of ``experiments`` in a ``WorkflowConfig`` (others left out)."""
    out: dict[str, Design] = {}
    for name in experiments:
        exp = cfg.experiments.get(name)
        if exp is not None:
            out[name] = Design(partitions=tuple(str(p.id) for p in exp.partitions),
                               methods=tuple(str(m) for m in exp.methods),
                               seeds=tuple((int(s), int(t)) for s, t in exp.seed_pairs()))
    return out


def design_json(design: Mapping[str, Design]) -> str:
    """A design as canonical JSON (the workflow's ``--design`` argument)."""
    import json

    raw = {name: {"partitions": list(d.partitions), "methods": list(d.methods),
                  "seeds": [list(s) for s in d.seeds]} for name, d in design.items()}
    return json.dumps(raw, sort_keys=True, separators=(",", ":"))


def parse_design(text: str) -> dict[str, Design]:
    """Read :func:`design_json`'s output; raise ``ValueError`` naming what is wrong."""
    import json

    raw = json.loads(text)
    if not isinstance(raw, dict):
        raise ValueError("design: expected a JSON object {experiment: {...}}")
    out: dict[str, Design] = {}
    for name, item in raw.items():
        if not isinstance(item, dict) or set(item) != {"partitions", "methods", "seeds"}:
            raise ValueError(f"design of {name!r}: expected the keys partitions, methods, "
                             "seeds")
        seeds = item["seeds"]
        if (not isinstance(seeds, list) or not seeds
                or not all(isinstance(s, list) and len(s) == 2
                           and all(isinstance(v, int) for v in s) for s in seeds)):
            raise ValueError(f"design of {name!r}: seeds must be a non-empty list of "
                             "[split seed, training seed] pairs")
        out[str(name)] = Design(partitions=tuple(str(p) for p in item["partitions"]),
                                methods=tuple(str(m) for m in item["methods"]),
                                seeds=tuple((int(s), int(t)) for s, t in seeds))
    return out
