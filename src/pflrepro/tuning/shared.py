"""Shared training settings chosen on validation: one value for every method of an experiment.

An experiment's ``tune: training:`` block, e.g. ``{by: fedavg, lr: [0.05, 0.1, 0.2]}``,
tunes a training key (:data:`SHARED_KEYS`) that every method of the experiment then
trains with. Only the method named by ``by`` runs the grid (on the validation
partition, with the block's rounds, seeds and criterion: :mod:`pflrepro.tuning`), and
its validation score alone selects the value, per (partition, split seed). Every
method's final runs of that partition and split train at the selected value, so the
choice cannot favour one of the methods compared (no other method's score enters it),
and a method that reduces to ``by`` (FedMix with K = 1 is FedAvg) still trains with
exactly ``by``'s settings and gives its bits.

In the workflow the ``by`` method is a tuned method like the others (its tuning runs,
table, figure and selection file under ``results/tuning/<experiment>/<by>.*``); its
selection file holds the selected settings under ``training`` (and no hyperparameters),
and every final run of the experiment reads that file
(:func:`pflrepro.pipeline.tuning_jobs.selection_sources`,
:func:`pflrepro.pipeline.tuning_jobs.tuned_run_spec_json`).

A ``training:`` block tunes alone: with method grids beside it, those methods' tuning
runs would train at the config's value rather than the one selected, so the two are
refused together (:class:`pflrepro.tuning.TuneError`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pflrepro.tuning.grid import Grid

#: Training keys a ``tune: training:`` block may select (floats in the run's training).
SHARED_KEYS = ("lr",)


@dataclass(frozen=True)
class SharedTune:
    """A parsed ``tune: training:`` block: the selecting method and the keys' grids."""

    by: str
    grids: tuple[Grid, ...]

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (part of :meth:`pflrepro.tuning.TuneConfig.to_dict`)."""
        return {"by": self.by, **{g.key: list(g.values) for g in self.grids}}


def parse_shared(spec: Any, where: str, methods: Mapping[str, Any],
                 method_grids: Mapping[str, Any]) -> SharedTune:
    """Parse ``tune: training:``; ``methods``: the experiment's methods (name -> params).

    ``method_grids``: the block's ``methods:`` entry (must be empty: see the module
    docstring).
    """
    from pflrepro.tuning.grid import TuneError, parse_grid

    if not isinstance(spec, Mapping):
        raise TuneError(f"{where}: a mapping {{by: <method>, <key>: <grid>}}")
    by = spec.get("by")
    if by not in methods:
        raise TuneError(f"{where}.by: {by!r} is not a method of the experiment; "
                        f"methods: {sorted(methods)}")
    if method_grids:
        raise TuneError(f"{where}: a shared training grid tunes alone (the methods' tuning "
                        "runs would train at the config's value, not the one selected); "
                        f"drop the methods' grids {sorted(method_grids)} or this block")
    keys = [k for k in spec if k != "by"]
    unknown = sorted(set(keys) - set(SHARED_KEYS))
    if unknown or not keys:
        raise TuneError(f"{where}: tunable shared training keys are {list(SHARED_KEYS)}, "
                        f"got {keys}")
    grids = tuple(parse_grid(k, spec[k], f"{where}.{k}") for k in keys)
    for g in grids:
        if min(g.values) <= 0:
            raise TuneError(f"{where}.{g.key}: values must be > 0, got {list(g.values)}")
    return SharedTune(by=str(by), grids=grids)


def selected_training(selection: Mapping[str, Any], partition: str,
                      split: int) -> dict[str, Any]:
    """The training settings a final run of (partition, split) takes from ``by``'s selection."""
    try:
        return dict(selection[partition][str(split)]["training"])
    except KeyError:
        raise ValueError(f"the shared training selection has no entry for partition "
                         f"{partition!r}, split {split}") from None
