"""The reporting commands, each from stored runs.

Aggregates, tables, figures, the claims table and the cost tables.
"""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pflrepro.store.targets import output_file

log = logging.getLogger("pflrepro")
#: ``--tuning`` of the commands that write a table from runs (table, communication, cost,
#: paper-vs-ours).
TUNING_HELP = ("JSON: the tuned methods' grids and selections "
               "(pflrepro.pipeline.workflow.table_tuning_json); the note says how each value was "
               "chosen, and the runs must carry the selected values")


def _cost(args: argparse.Namespace) -> None:
    from pflrepro.reporting.cost import cost_table, job_costs, projection, write_cost

    jobs = job_costs(args.runs, args.benchmarks, args.logs, json.loads(args.training))
    measured = cost_table(jobs, methods_order=args.methods or None)
    projected = None
    if args.project:
        from pflrepro.config import check_config_paths
        from pflrepro.config.schema import build_schema

        projected = projection(measured, check_config_paths(args.project, build_schema()),
                               scale=args.project_scale)
    write_cost(measured, projected, args.md, args.csv, args.projection_csv,
               experiment=args.experiment or "", tuning=_cost_tuning(args),
               missing=[b for b in dict.fromkeys(args.benchmarks) if not Path(b).is_file()])
    log.info("cost of %d job(s) -> %s, %s", len(jobs), args.md, args.csv)


def _cost_tuning(args: argparse.Namespace) -> list[str]:
    """The cost table's tuning sentences: its runs' params checked against the selections."""
    from pflrepro.reporting.tuning_note import notes_for

    if not args.tuning or not json.loads(args.tuning):
        return []
    import pandas as pd

    from pflrepro.store.results import read_table

    runs = pd.concat([read_table(p, columns=["experiment", "partition", "method",
                                             "split_seed", "params"]) for p in args.runs],
                     ignore_index=True)
    labels, experiment_labels = _labels(args.labels)
    return notes_for(args.tuning, runs, labels, experiment_labels)


def _aggregate(args: argparse.Namespace) -> None:
    from pflrepro.store.results import aggregate

    rows = aggregate(args.inputs, args.out)
    log.info("aggregated %d runs, %d rows -> %s", len(args.inputs), rows, args.out)


def _read_aggregates(paths: Sequence[str]) -> Any:
    """Concatenate one or more aggregated Parquet files (each checked against its digest)."""
    import pandas as pd

    from pflrepro.store.results import read_table

    frames = [read_table(p) for p in paths]
    if not frames:
        raise ValueError("no aggregate given")
    return pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]


def _labels(text: str | None) -> tuple[dict[str, str], dict[str, str]]:
    """(partition labels, experiment labels) from the workflow's ``--labels`` JSON."""
    raw = _labels_json(text)
    return dict(raw.get("partitions", {})), dict(raw.get("experiments", {}))


def _labels_json(text: str | None) -> dict[str, dict[str, str]]:
    """The workflow's ``--labels`` JSON: partitions, experiments and methods by id."""
    try:
        raw = json.loads(text) if text else {}
    except json.JSONDecodeError as err:
        raise ValueError(f"--labels: not JSON ({err})") from None
    if not isinstance(raw, dict):
        raise ValueError(f"--labels: a JSON object is expected, got {type(raw).__name__}")
    unknown = set(raw) - {"partitions", "experiments", "methods", "groups"}
    if unknown:
        raise ValueError(f"--labels: unknown key(s) {sorted(unknown)}")
    for key, value in raw.items():
        if not isinstance(value, dict):
            raise ValueError(f"--labels: {key!r} must map ids to labels")
    return raw


def with_method_labels(command: Callable[[argparse.Namespace], None]
                       ) -> Callable[[argparse.Namespace], None]:
    """``command``, run with the ``--labels`` JSON's method labels and group names in force."""
    from pflrepro.reporting.names import method_labels

    def run(args: argparse.Namespace) -> None:
        raw = _labels_json(getattr(args, "labels", None))
        with method_labels(raw.get("methods", {}), raw.get("groups", {})):
            command(args)

    run.__doc__ = command.__doc__
    return run


CAPTIONS = {
    "weighted_final": "Final-round test accuracy (%) weighted by client test-set size, "
                      "mean ± std over runs.",
    "mean_bmta": "Best-over-rounds (BMTA) / final-round mean client test accuracy (%), "
                 "mean ± std over runs.",
}


def _table(args: argparse.Namespace) -> None:
    from pflrepro.reporting.tables import accuracy_table, write_table

    agg = _read_aggregates(args.aggregate)
    labels, experiment_labels = _labels(args.labels)
    table = accuracy_table(agg, methods_order=args.methods or None, labels=labels,
                           experiment_labels=experiment_labels, metric=args.metric,
                           experiments_order=args.experiments or None)
    caption = args.caption or CAPTIONS[args.metric]
    from pflrepro.reporting.tuning_note import notes_for

    tuning = notes_for(args.tuning, agg, labels, experiment_labels)
    write_table(table, args.md, args.tex, args.csv, caption=caption, tuning=tuning)


def _communication(args: argparse.Namespace) -> None:
    from pflrepro.reporting.communication import communication_table, write_communication

    agg = _read_aggregates(args.aggregate)
    from pflrepro.reporting.tuning_note import notes_for

    table = communication_table(agg, methods_order=args.methods or None)
    labels, experiment_labels = _labels(args.labels)
    write_communication(table, args.md, args.csv, caption=args.caption, labels=labels,
                        tuning=notes_for(args.tuning, agg, labels, experiment_labels))


def _plot(args: argparse.Namespace) -> None:
    from pflrepro.config.figure_kinds import OPTIONS, figure_kind

    kind = figure_kind(args.kind)
    needed = ("data", "partition") if kind.input == "partition" else ("aggregate",)
    missing = [f"--{n}" for n in needed if getattr(args, n) is None]
    if missing:
        raise ValueError(f"plot {args.kind} needs {' '.join(missing)}")
    given = {"methods": args.methods or None, "method": args.method, "client": args.client,
             "title": args.title,
             "names": {int(k): str(v) for k, v in json.loads(args.names or "{}").items()}}
    options = {OPTIONS[o][0]: given[o] for o in kind.options}
    if kind.input == "partition":
        from pflrepro.cli.data import _partition_labels

        frame, labels, num_classes = _partition_labels(args.data, args.partition)
        kind.function()(frame, labels, num_classes, args.pdf, args.png, **options)
        return
    agg = _read_aggregates(args.aggregate)
    labels, _ = _labels(args.labels)
    kind.function()(agg, args.pdf, args.png, labels=labels, **options)


def _claims(args: argparse.Namespace) -> None:
    from pflrepro.reporting.claims.checks import evaluate_claims
    from pflrepro.reporting.claims.parse import (
        claim_experiments,
        design_of,
        load_claims,
        parse_design,
    )
    from pflrepro.reporting.claims.writer import write_claims

    claims = load_claims(args.claims)
    if args.design is not None:
        design = parse_design(args.design)
    else:  # the experiments' design from the config files, merged as check-config does
        from pflrepro.config import check_config_paths
        from pflrepro.config.schema import build_schema

        design = design_of(check_config_paths(args.config, build_schema()),
                           claim_experiments(claims, args.scale))
    agg = _read_aggregates(args.aggregate) if args.aggregate else None
    labels, experiment_labels = _labels(args.labels)
    frame = evaluate_claims(claims, agg, args.scale, design=design, labels=labels,
                            experiment_labels=experiment_labels)
    write_claims(frame, args.md, args.csv, scale=args.scale)
    counts = frame["verdict"].value_counts().to_dict()
    log.info("claims (%s scale): %s -> %s, %s", args.scale, counts, args.md, args.csv)


def add_subcommands(sub: argparse._SubParsersAction) -> None:  # noqa: SLF001
    """Add the reporting commands to ``sub``."""
    p = sub.add_parser("cost", help="compute cost per method from benchmark records and "
                       "logs, and a projection of a config's paper-scale grid")
    p.add_argument("--experiment", help="experiment name (the table's title)")
    p.add_argument("--runs", nargs="+", required=True, help="run tables, one per job")
    p.add_argument("--benchmarks", nargs="+", required=True,
                   help="Snakemake benchmark records, aligned with --runs")
    p.add_argument("--logs", nargs="+", required=True, help="train logs, aligned with --runs")
    p.add_argument("--training", required=True, help="the experiment's training settings "
                   "(JSON)")
    p.add_argument("--methods", nargs="*", help="row order")
    p.add_argument("--project", nargs="*", metavar="FILE",
                   help="config files whose --project-scale grid to project")
    p.add_argument("--project-scale", default="paper", choices=["paper", "cpu"])
    p.add_argument("--md", type=output_file, required=True)
    p.add_argument("--csv", type=output_file, required=True)
    p.add_argument("--projection-csv", type=output_file)
    p.add_argument("--labels", help='JSON {"partitions": {id: label}, ...} (the tuning note)')
    p.add_argument("--tuning", help=TUNING_HELP)
    p.set_defaults(func=with_method_labels(_cost))

    p = sub.add_parser("aggregate", help="concatenate run tables")
    p.add_argument("--out", type=output_file, required=True)
    p.add_argument("inputs", nargs="*")
    p.set_defaults(func=_aggregate)

    p = sub.add_parser("table", help="final-accuracy table (Markdown, LaTeX, CSV)")
    p.add_argument("--aggregate", required=True, nargs="+", help="aggregated runs")
    p.add_argument("--md", type=output_file, required=True)
    p.add_argument("--tex", type=output_file, required=True)
    p.add_argument("--csv", type=output_file, required=True)
    p.add_argument("--caption", help="table caption (default: says what the metric is)")
    p.add_argument("--methods", nargs="*", help="row order")
    p.add_argument("--experiments", nargs="*", help="column-group order (several experiments)")
    p.add_argument("--labels", help='JSON {"partitions": {id: label}, "experiments": {...}, '
                   '"methods": {...}}')
    p.add_argument("--metric", default="weighted_final", choices=["weighted_final", "mean_bmta"],
                   help="weighted final accuracy (FedeRiCo) or BMTA and final mean (FedAMP)")
    p.add_argument("--tuning", help=TUNING_HELP)
    p.set_defaults(func=with_method_labels(_table))

    p = sub.add_parser("communication", help="communication cost per method (Markdown, CSV)")
    p.add_argument("--aggregate", required=True, nargs="+", help="aggregated runs")
    p.add_argument("--md", type=output_file, required=True)
    p.add_argument("--csv", type=output_file, required=True)
    p.add_argument("--methods", nargs="*", help="row order")
    p.add_argument("--labels", help='JSON {"partitions": {id: label}, ...}')
    p.add_argument("--tuning", help=TUNING_HELP)
    p.add_argument("--caption", default="Communication per method: scalars sent and "
                   "received, and final accuracy.")
    p.set_defaults(func=with_method_labels(_communication))

    from pflrepro.config.figure_kinds import KINDS, OPTIONS

    p = sub.add_parser("plot", help="draw a figure from an aggregate (or a partition)")
    p.add_argument("kind", choices=list(KINDS), help="the figure kind (one module of "
                   "pflrepro.reporting.figures each)")
    p.add_argument("--aggregate", nargs="+", help="aggregated runs (all kinds but labels)")
    p.add_argument("--labels", help='JSON {"partitions": {id: label}, "experiments": {...}, '
                   '"methods": {...}}')
    p.add_argument("--data", help="prepared data set (labels)")
    p.add_argument("--partition", help="partition file (labels)")
    p.add_argument("--pdf", type=output_file, required=True)
    p.add_argument("--png", type=output_file, required=True)

    def kinds_with(option: str) -> str:
        return ", ".join(k.name for k in KINDS.values() if option in k.options)

    p.add_argument("--client", type=int, default=0,
                   help=f"{OPTIONS['client'][1]} ({kinds_with('client')})")
    p.add_argument("--title", help=f"{OPTIONS['title'][1]} ({kinds_with('title')})")
    p.add_argument("--method", default="federico",
                   help=f"{OPTIONS['method'][1]} ({kinds_with('method')})")
    p.add_argument("--methods", nargs="*",
                   help=f"{OPTIONS['methods'][1]} ({kinds_with('methods')})")
    p.add_argument("--names", help=f"{OPTIONS['names'][1]} ({kinds_with('names')})")
    p.set_defaults(func=with_method_labels(_plot))

    p = sub.add_parser("claims", help="check the papers' claims against aggregates")
    p.add_argument("--claims", required=True, help="claims file (config/claims.yaml)")
    p.add_argument("--scale", required=True, choices=["paper", "cpu"],
                   help="whose experiments the claims are checked on")
    p.add_argument("--aggregate", nargs="*", default=[],
                   help="aggregated runs (none: every claim is missing)")
    p.add_argument("--labels", help='JSON {"partitions": {id: label}, "experiments": {...}, '
                   '"methods": {...}}')
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--config", nargs="+", metavar="FILE",
                       help="config file(s) whose experiments' partitions, methods and seeds "
                       "a claim needs (merged in order, as check-config does)")
    which.add_argument("--design", help="the same as JSON (the workflow passes it): "
                       '{experiment: {"partitions": [...], "methods": [...], '
                       '"seeds": [[split, train], ...]}}')
    p.add_argument("--md", type=output_file, required=True)
    p.add_argument("--csv", type=output_file, required=True)
    p.set_defaults(func=with_method_labels(_claims))
