"""The tuning stage's jobs and run specs: ``pflrepro tune-split`` / ``tune-select``.

:func:`select_job` scores a tuned method's tuning runs on validation, selects, and
writes the tuning table (:mod:`pflrepro.reporting.tuning`), its figure and the
selection file; :func:`tune_run_spec_json` and :func:`tuned_run_spec_json` give the
workflow's tuning and final runs their specs (``TJ.*`` in the rules): a grid point or a
selection's hyperparameters go into a run's ``params``, a shared training setting
(:mod:`pflrepro.tuning.shared`) into its ``training``.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pflrepro.config import RunKey, canonical_json
from pflrepro.tuning import (
    Grid,
    Trial,
    grid_points,
    note,
    point_id,
    score_trials,
    select,
    selected_params,
    selection_json,
    tied_params,
)
from pflrepro.tuning.shared import selected_training

if TYPE_CHECKING:
    from pflrepro.config import WorkflowConfig


def shared_tuning_method(cfg: WorkflowConfig, experiment: str) -> str | None:
    """The method whose validation score selects ``experiment``'s shared training settings.

    ``None`` without a ``tune: training:`` block.
    """
    tune = cfg.experiments[experiment].tune
    return None if tune is None or tune.training is None else tune.training.by


def selection_sources(cfg: WorkflowConfig, experiment: str, method: str) -> list[str]:
    """The tuned methods whose selection files a final run of ``method`` reads.

    Its own (when its hyperparameters are tuned) and the shared training selection's
    method (every method of an experiment with a ``tune: training:`` block).
    """
    tune = cfg.experiments[experiment].tune
    own = [method] if tune is not None and method in tune.methods else []
    shared = shared_tuning_method(cfg, experiment)
    return list(dict.fromkeys(own + ([shared] if shared is not None else [])))


def _run_key(wildcards: Any) -> RunKey:
    return RunKey(experiment=wildcards.experiment, partition=wildcards.partition,
                  method=wildcards.method, split=int(wildcards.split), seed=int(wildcards.seed))


@functools.lru_cache(maxsize=1024)
def _points_by_id(grids: tuple[Grid, ...]) -> dict[str, dict[str, float]]:
    """A method's grid points by their ids (a dry run asks once per tuning job)."""
    return {point_id(p): p for p in grid_points(grids)}


def tune_run_spec_json(cfg: WorkflowConfig, wildcards: Any) -> str:
    """A tuning run's spec: the final run's, with the grid point's params and the budget."""
    exp = cfg.experiments[wildcards.experiment]
    method = cfg.methods[wildcards.method]
    point = dict(_points_by_id(exp.tune.methods[wildcards.method])[wildcards.point])
    spec = cfg.run_spec(_run_key(wildcards))
    spec["training"] = {**spec["training"], "rounds": exp.tune.rounds}
    if wildcards.method == shared_tuning_method(cfg, wildcards.experiment):
        spec["training"].update(point)  # a shared training setting, not a hyperparameter
        return canonical_json(spec)
    clients = exp.partition(wildcards.partition).clients
    spec["params"] = {**method.params,
                      **tied_params(method.algorithm, point, clients, method.params)}
    return canonical_json(spec)


def tuned_run_spec_json(cfg: WorkflowConfig, wildcards: Any,
                        selections: Mapping[str, Mapping[str, Any]]) -> str:
    """A final run's spec with the values the tuning selected.

    ``selections``: method -> its selection file's content, for each of
    :func:`selection_sources`: the run's own hyperparameters (``params``) and the
    experiment's shared training settings (``training``).
    """
    spec = cfg.run_spec(_run_key(wildcards))
    split = int(wildcards.split)
    for method in selection_sources(cfg, wildcards.experiment, wildcards.method):
        if method == shared_tuning_method(cfg, wildcards.experiment):
            spec["training"].update(selected_training(selections[method],
                                                      wildcards.partition, split))
        else:
            spec["params"].update(selected_params(selections[method], wildcards.partition,
                                                  split))
    return canonical_json(spec)


#: The keys of a tuning plan (``select_job``) and the JSON type of each.
PLAN_KEYS = {"algorithm": str, "clients": dict, "grids": dict, "criterion": str,
             "rounds": int, "seeds": list, "fraction": (int, float), "trials": list}


def _read_plan(plan_json: str) -> dict[str, Any]:
    """The tuning plan ``--plan``, its keys and their types checked (one-line errors)."""
    from pflrepro.config.errors import json_object

    plan = json_object(plan_json, "--plan", PLAN_KEYS)
    for trial in plan["trials"]:
        if not isinstance(trial, dict) or {"point", "partition", "split", "seed"} - set(trial):
            raise ValueError("--plan: each trial is an object with point, partition, split "
                             "and seed")
    return plan


def select_job(plan_json: str, runs: Sequence[str], md: str, csv: str, selection: str,
               figure: tuple[str, str] | None = None, title: str = "") -> dict[Any, Any]:
    """``pflrepro tune-select``: score the tuning runs, select, write every output.

    ``plan_json`` (:func:`pflrepro.pipeline.workflow.tune_plan_json`): ``algorithm``, ``fixed``
    (the method's config params), ``clients`` (per partition id), ``grids`` (key ->
    values, ``log`` keys), ``criterion``, ``rounds``, ``seeds``, ``fraction`` and
    ``trials``: one ``{point, partition, split, seed}`` per file of ``runs``, in order;
    ``training`` (true): the grid is a shared training setting (no hyperparameters).
    The selection file is rewritten only when its content changes.
    """
    from pathlib import Path

    from pflrepro.store.io import atomic_path
    from pflrepro.store.results import read_table

    plan = _read_plan(plan_json)
    trials_spec = plan["trials"]
    if len(trials_spec) != len(runs):
        raise ValueError(f"{len(runs)} run file(s) for {len(trials_spec)} planned trial(s)")
    grids = [Grid(k, tuple(v), log=k in plan.get("log", [])) for k, v in plan["grids"].items()]
    trials = [Trial(point=t["point"], partition=t["partition"], split=int(t["split"]),
                    seed=int(t["seed"]), frame=read_table(path))
              for t, path in zip(trials_spec, runs, strict=True)]
    from pflrepro.reporting.tuning import tuning_table, write_outputs

    scores = score_trials(trials, plan["criterion"])
    points = grid_points(grids)
    chosen = select(scores, points, plan.get("pool", "split"))
    shared = bool(plan.get("training"))  # a shared training setting: no hyperparameters
    params = {(p, s): {} if shared else tied_params(plan["algorithm"], pt,
                                                     int(plan["clients"][p]),
                                                     plan.get("fixed", {}))
              for (p, s), pt in chosen.items()}
    table = tuning_table(scores, grids, chosen, plan["criterion"])
    text = note(grids, chosen, plan["criterion"], int(plan["rounds"]), plan["seeds"],
                float(plan["fraction"]), plan.get("labels"), plan.get("pool", "split"))
    if plan.get("rounds_note"):
        text += f" The budget of {plan['rounds']} rounds: {plan['rounds_note']}"
    write_outputs(table, text, md, csv, title or "tuning")
    content = selection_json(chosen, params, training=shared)
    target = Path(selection)
    if not target.exists() or target.read_text() != content:
        with atomic_path(target) as tmp:
            tmp.write_text(content)
    if figure is not None:
        from pflrepro.reporting.tuning import plot_tuning

        plot_tuning(table, grids, figure[0], figure[1], title=title, labels=plan.get("labels"))
    return chosen
