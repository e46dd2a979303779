"""A smaller copy of a config that stays valid: fewer rounds, seeds, methods, partitions.

Benchmarks and test tiers run a config's experiments at a reduced size (the CPU-scale
FedeRiCo table for 1 round, the paper grid's smoke overlay for 2). Lowering one key by
hand breaks keys tied to it: a ``tune:`` block's ``rounds`` must not exceed the
experiment's, its grids may name only the experiment's methods, paired seeds need equal
lengths, a table may name only experiments that exist. :func:`shrink_experiment` and
:func:`shrink_config` lower the keys together, and :func:`shrink_config` parses its
result, so a shrunk config that is invalid fails where it is made, naming the key.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from pflrepro.config.errors import ConfigError
from pflrepro.config.parsing import parse


def _scaled(value: int, old: int, new: int) -> int:
    """``value`` (a budget out of ``old`` rounds) scaled to ``new`` rounds, at least 1."""
    return max(1, min(new, round(value * new / old)))


def _shrink_tune(tune: Mapping[str, Any], methods: Sequence[str], old_rounds: int,
                 rounds: int, tune_rounds: int | None, seeds: int | None
                 ) -> dict[str, Any] | None:
    """The ``tune:`` block for the shrunk experiment (None when nothing is left to tune)."""
    tune = copy.deepcopy(dict(tune))
    grids = {m: g for m, g in (tune.get("methods") or {}).items() if m in methods}
    if "methods" in tune:
        tune["methods"] = grids
    if tune.get("training") is not None and tune["training"].get("by") not in methods:
        tune.pop("training")
    if not grids and tune.get("training") is None:
        return None
    if tune_rounds is not None:
        tune["rounds"] = min(tune_rounds, rounds)
    elif "rounds" in tune:
        tune["rounds"] = _scaled(int(tune["rounds"]), old_rounds, rounds)
    if seeds is not None and "seeds" in tune:
        tune["seeds"] = list(tune["seeds"])[:seeds]
    return tune


def shrink_experiment(exp: Mapping[str, Any], defaults: Mapping[str, Any], *,
                      rounds: int | None = None, tune_rounds: int | None = None,
                      split_seeds: int | None = None, train_seeds: int | None = None,
                      methods: Sequence[str] | None = None, partitions: int | None = None
                      ) -> dict[str, Any]:
    """A copy of the experiment ``exp`` (raw config entry) at a reduced size.

    ``defaults``: the config's top-level ``training`` (where ``exp`` takes its rounds
    from when it sets none). ``rounds``: training rounds (never raised); the ``tune:``
    budget becomes ``tune_rounds`` when given (at most ``rounds``), else keeps its share
    of the rounds (at least 1). ``split_seeds``/``train_seeds``: keep the first that many
    (both the smaller count under ``seed_pairing: paired``; the tuning seeds follow the
    split seeds). ``methods``: keep only these (their ``tune:`` grids with them; the
    block goes when none is left). ``partitions``: keep the first that many.
    """
    new = copy.deepcopy(dict(exp))
    old_rounds = int((new.get("training") or {}).get("rounds", defaults.get("rounds", 1)))
    new_rounds = old_rounds if rounds is None else min(int(rounds), old_rounds)
    if rounds is not None:
        new["training"] = {**(new.get("training") or {}), "rounds": new_rounds}
    if methods is not None:
        new["methods"] = [m for m in new.get("methods", []) if m in methods]
    if partitions is not None:
        new["partitions"] = list(new.get("partitions", []))[:partitions]
    counts = {"split_seeds": split_seeds, "train_seeds": train_seeds}
    if new.get("seed_pairing") == "paired" and None not in counts.values():
        counts = dict.fromkeys(counts, min(split_seeds, train_seeds))
    for key, count in counts.items():
        if count is not None:
            new[key] = list(new.get(key, [0]))[:count]
    if new.get("tune") is not None:
        tune = _shrink_tune(new["tune"], new.get("methods", []), old_rounds, new_rounds,
                            tune_rounds, counts["split_seeds"])
        if tune is None:
            new.pop("tune")
        else:
            new["tune"] = tune
    return new


def shrink_config(raw: Mapping[str, Any], *, experiments: Sequence[str] | None = None,
                  **sizes: Any) -> dict[str, Any]:
    """A copy of the config ``raw`` at a reduced size, checked with :func:`parse`.

    ``experiments``: keep only these (tables keep the kept ones among theirs, and a table
    left with none goes); ``sizes``: :func:`shrink_experiment`'s keywords, applied to
    every kept experiment. Raises :class:`ConfigError` when the result is invalid.
    """
    new = copy.deepcopy(dict(raw))
    kept = list(new.get("experiments", {}) if experiments is None else experiments)
    unknown = sorted(set(kept) - set(new.get("experiments", {})))
    if unknown:
        raise ConfigError(f"shrink_config: no experiment(s) {unknown} in the config")
    defaults = new.get("training") or {}
    new["experiments"] = {name: shrink_experiment(new["experiments"][name], defaults, **sizes)
                          for name in kept}
    tables = {}
    for name, table in (new.get("tables") or {}).items():
        names = [e for e in table.get("experiments", []) if e in new["experiments"]]
        if names:
            tables[name] = {**table, "experiments": names}
    if "tables" in new:
        new["tables"] = tables
    try:
        parse(new)
    except ConfigError as err:
        raise ConfigError(f"the shrunk config is invalid: {err}") from err
    return new
