"""The cost commands: measured cost, and the paper-scale grid's projections.

``cost`` (an experiment's cost per method from its jobs' benchmark records and logs,
:mod:`pflrepro.reporting.cost`), ``cost-projection`` (one projection of the paper grid
from several experiments' measured cost tables, :mod:`pflrepro.reporting.cost_projection`)
and ``grid-projection`` (the grid's work in counted FLOPs and its projected GPU-hours,
:mod:`pflrepro.reporting.flops`).
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from pflrepro.cli.inputs import TUNING_HELP, labels_of, with_method_labels
from pflrepro.cli.options import output_file

log = logging.getLogger("pflrepro")


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
    labels, experiment_labels = labels_of(args.labels)
    return notes_for(args.tuning, runs, labels, experiment_labels)


def _grid_projection(args: argparse.Namespace) -> None:
    from pflrepro.reporting.flops import write_grid_projection

    table = write_grid_projection(args.config, args.md, args.csv, peak_tflops=args.peak_tflops,
                                  utilisation=args.utilisation)
    log.info("projected %d experiment x method rows: %.1f GPU-hours in all", len(table),
             float(table["gpu_hours"].sum()))


def _cost_projection(args: argparse.Namespace) -> None:
    from pflrepro.reporting.cost_projection import projection_job

    projection_job(args.experiments, args.costs, args.project, args.project_scale, args.md,
                   args.csv)


def add_subcommands(sub: argparse._SubParsersAction) -> None:  # noqa: SLF001
    """Add the cost commands to ``sub``."""
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


    p = sub.add_parser("cost-projection", help="one projection of a config's paper-scale "
                       "grid from several experiments' measured cost tables")
    p.add_argument("--experiments", nargs="+", required=True, help="in the config's order")
    p.add_argument("--costs", nargs="+", required=True,
                   help="their measured cost CSVs, aligned with --experiments")
    p.add_argument("--project", required=True, help="the config whose grid to project")
    p.add_argument("--project-scale", default="paper", choices=["paper", "cpu"])
    p.add_argument("--md", type=output_file, required=True)
    p.add_argument("--csv", type=output_file, required=True)
    p.set_defaults(func=_cost_projection)

    from pflrepro.reporting.flops import DEVICE, UTILISATION

    p = sub.add_parser("grid-projection", help="project the paper-scale grid's GPU-hours from "
                       "counted FLOPs per model (a projection, labelled so)")
    p.add_argument("--config", nargs="+", required=True, help="config files, merged in order")
    p.add_argument("--md", type=output_file, required=True)
    p.add_argument("--csv", type=output_file, required=True)
    p.add_argument("--peak-tflops", type=float, default=DEVICE["peak_tflops"],
                   help=f"device peak in TFLOP/s (default: {DEVICE['name']}, "
                   f"{DEVICE['precision']}, {DEVICE['peak_tflops']})")
    p.add_argument("--utilisation", type=float, default=UTILISATION,
                   help=f"fraction of the peak assumed sustained (default {UTILISATION})")
    p.set_defaults(func=_grid_projection)
