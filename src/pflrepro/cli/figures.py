"""The figure command: ``plot``, one figure kind (:mod:`pflrepro.config.figure_kinds`).

Every kind but ``labels`` draws from aggregated runs; ``labels`` draws a partition's
label counts per client from a prepared data set and its partition file.
"""

from __future__ import annotations

import argparse
import json

from pflrepro.cli.inputs import labels_of, read_aggregates, with_method_labels
from pflrepro.cli.options import output_file


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
        from pflrepro.cli.data import read_partition_labels

        frame, labels, num_classes = read_partition_labels(args.data, args.partition)
        kind.function()(frame, labels, num_classes, args.pdf, args.png, **options)
        return
    agg = read_aggregates(args.aggregate)
    labels, _ = labels_of(args.labels)
    kind.function()(agg, args.pdf, args.png, labels=labels, **options)


def add_subcommands(sub: argparse._SubParsersAction) -> None:  # noqa: SLF001
    """Add ``plot`` to ``sub``."""
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
