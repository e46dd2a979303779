"""The table commands, each from stored runs or aggregates.

``aggregate`` (run tables concatenated), ``table`` (final accuracy), ``communication``,
``claims`` (the papers' claims checked), ``paper-vs-ours`` (the papers' numbers beside
ours, :mod:`pflrepro.reporting.paper`) and ``report-html`` (a Markdown table as the HTML
page the Snakemake report shows, :func:`pflrepro.reporting.report.markdown_to_html`).
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from pflrepro.cli.inputs import TUNING_HELP, labels_of, read_aggregates, with_method_labels
from pflrepro.cli.options import output_file

log = logging.getLogger("pflrepro")


def _aggregate(args: argparse.Namespace) -> None:
    from pflrepro.store.results import aggregate

    rows = aggregate(args.inputs, args.out)
    log.info("aggregated %d runs, %d rows -> %s", len(args.inputs), rows, args.out)


CAPTIONS = {
    "weighted_final": "Final-round test accuracy (%) weighted by client test-set size, "
                      "mean ± std over runs.",
    "mean_bmta": "Best-over-rounds (BMTA) / final-round mean client test accuracy (%), "
                 "mean ± std over runs.",
}


def _table(args: argparse.Namespace) -> None:
    from pflrepro.reporting.tables import accuracy_table, write_table

    agg = read_aggregates(args.aggregate)
    labels, experiment_labels = labels_of(args.labels)
    table = accuracy_table(agg, methods_order=args.methods or None, labels=labels,
                           experiment_labels=experiment_labels, metric=args.metric,
                           experiments_order=args.experiments or None)
    caption = args.caption or CAPTIONS[args.metric]
    from pflrepro.reporting.tuning_note import notes_for

    tuning = notes_for(args.tuning, agg, labels, experiment_labels)
    write_table(table, args.md, args.tex, args.csv, caption=caption, tuning=tuning)


def _communication(args: argparse.Namespace) -> None:
    from pflrepro.reporting.communication import communication_table, write_communication

    agg = read_aggregates(args.aggregate)
    from pflrepro.reporting.tuning_note import notes_for

    table = communication_table(agg, methods_order=args.methods or None)
    labels, experiment_labels = labels_of(args.labels)
    write_communication(table, args.md, args.csv, caption=args.caption, labels=labels,
                        tuning=notes_for(args.tuning, agg, labels, experiment_labels))


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
    agg = read_aggregates(args.aggregate) if args.aggregate else None
    labels, experiment_labels = labels_of(args.labels)
    frame = evaluate_claims(claims, agg, args.scale, design=design, labels=labels,
                            experiment_labels=experiment_labels)
    write_claims(frame, args.md, args.csv, scale=args.scale)
    counts = frame["verdict"].value_counts().to_dict()
    log.info("claims (%s scale): %s -> %s, %s", args.scale, counts, args.md, args.csv)


def _report_html(args: argparse.Namespace) -> None:
    from pflrepro.reporting.report import markdown_to_html
    from pflrepro.store.io import write_text
    from pflrepro.store.recorded_text import read_recorded_text

    text = read_recorded_text(args.md)
    write_text(args.out, markdown_to_html(text, args.title or Path(args.md).stem))


def _paper_vs_ours(args: argparse.Namespace) -> None:
    import pandas as pd

    from pflrepro.reporting.paper import (
        compare,
        load_paper_numbers,
        title_of,
        write_paper_table,
    )
    from pflrepro.store.results import read_table

    cells = load_paper_numbers(args.numbers)
    frames = [read_table(p) for p in args.aggregate]
    agg = pd.concat(frames, ignore_index=True) if frames else None
    from pflrepro.reporting.tuning_note import notes_for

    raw = json.loads(args.labels) if args.labels else {}
    labels = dict(raw.get("partitions", {}))
    frame = compare(cells, agg, args.scale, args.table, labels=labels)
    tuning = notes_for(args.tuning, agg, labels, dict(raw.get("experiments", {})))
    write_paper_table(frame, args.md, args.csv,
                      title=title_of(cells, args.table, args.scale), tuning=tuning)


def add_subcommands(sub: argparse._SubParsersAction) -> None:  # noqa: SLF001
    """Add the table commands to ``sub``."""
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

    p = sub.add_parser("report-html", help="a Markdown table as an HTML page (for the "
                       "Snakemake report)")
    p.add_argument("--md", required=True, help="the Markdown table (an input)")
    p.add_argument("--out", type=output_file, required=True)
    p.add_argument("--title")
    p.set_defaults(func=_report_html)

    p = sub.add_parser("paper-vs-ours", help="the papers' numbers (config/paper_numbers.csv) "
                       "beside ours: paper, ours (mean ± std), difference, inside our std")
    p.add_argument("--numbers", required=True, help="config/paper_numbers.csv")
    p.add_argument("--table", required=True, help="table_id of the numbers file")
    p.add_argument("--scale", required=True, choices=["paper", "cpu"])
    p.add_argument("--aggregate", nargs="*", default=[],
                   help="aggregated runs of the table's experiments (none: not run)")
    p.add_argument("--labels", help='JSON {"partitions": {id: label}, ...}')
    p.add_argument("--tuning", help=TUNING_HELP)
    p.add_argument("--md", type=output_file, required=True)
    p.add_argument("--csv", type=output_file, required=True)
    p.set_defaults(func=_paper_vs_ours)
