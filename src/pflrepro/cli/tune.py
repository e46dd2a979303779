"""The tuning commands: ``tune-split`` and ``tune-select``.

``tune-split``: a partition's validation partition for tuning
(:func:`pflrepro.tuning.write_validation_partition`); ``tune-select``: the tuning runs
scored on validation, values selected, the tuning table, figure and selection written
(:func:`pflrepro.pipeline.tuning_jobs.select_job`).
"""

from __future__ import annotations

import argparse

from pflrepro.cli.options import open_unit_interval, output_file


def _tune_split(args: argparse.Namespace) -> None:
    from pflrepro.tuning import write_validation_partition

    write_validation_partition(args.partition, args.out, args.fraction, args.seed)


def _tune_select(args: argparse.Namespace) -> None:
    from pflrepro.pipeline.tuning_jobs import select_job

    select_job(args.plan, args.runs, args.md, args.csv, args.selection,
               tuple(args.figure) if args.figure else None, args.title)


def add_subcommands(sub: argparse._SubParsersAction) -> None:  # noqa: SLF001
    """Add the tuning commands to ``sub``."""
    from pflrepro.tuning import DEFAULT_FRACTION

    p = sub.add_parser("tune-split", help="a partition's validation partition for tuning: "
                       "each client's training rows, a seeded fraction held out; test rows "
                       "dropped")
    p.add_argument("--partition", required=True)
    p.add_argument("--fraction", type=open_unit_interval, default=DEFAULT_FRACTION,
                   help="share held out (a number in (0, 1))")
    p.add_argument("--seed", type=int, required=True, help="the split seed")
    p.add_argument("--out", type=output_file, required=True)
    p.set_defaults(func=_tune_split)

    p = sub.add_parser("tune-select", help="score tuning runs on validation, select values, "
                       "write the tuning table (Markdown, CSV), figure and selection")
    p.add_argument("--plan", required=True, help="tuning plan as JSON (the workflow's)")
    p.add_argument("--md", type=output_file, required=True)
    p.add_argument("--csv", type=output_file, required=True)
    p.add_argument("--selection", type=output_file, required=True)
    p.add_argument("--figure", type=output_file, nargs=2, metavar=("PDF", "PNG"))
    p.add_argument("--title", default="")
    p.add_argument("runs", nargs="+")
    p.set_defaults(func=_tune_select)
