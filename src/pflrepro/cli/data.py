"""The data commands.

Partitioning a prepared data set, drawing a public set, and a partition's statistics.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from pflrepro.store.targets import output_file


def _partition(args: argparse.Namespace) -> None:
    from pflrepro.data.jobs import make_partition

    make_partition(args.data, args.dataset, json.loads(args.spec), args.seed, args.out)


def _partition_labels(data: str, partition: str) -> tuple[Any, Any, int]:
    """The partition table, the label vector (``target`` column applied) and #classes."""
    from pflrepro.data.partition import read_partition
    from pflrepro.data.store import load_dataset
    from pflrepro.data.transforms import partition_labels

    dataset = load_dataset(data)
    frame, _ = read_partition(partition)
    labels = partition_labels(dataset.y[:], frame, dataset.meta.num_classes)
    return frame, labels, dataset.meta.num_classes


def _partition_stats(args: argparse.Namespace) -> None:
    from pflrepro.data.stats import partition_stats, summary_stats
    from pflrepro.store.io import write_csv, write_text

    frame, labels, num_classes = _partition_labels(args.data, args.partition)
    per_client = partition_stats(frame, labels, num_classes)
    summary = summary_stats(per_client)
    write_csv(per_client, args.csv)
    lines = [f"# Partition statistics: {Path(args.partition).parent.name}, "
             f"{Path(args.partition).stem}", "",
             "| statistic | value |", "|:--|--:|"]
    lines += [f"| {k} | {_summary_value(v)} |" for k, v in summary.items()]
    write_text(args.md, "\n".join(lines) + "\n")


def _summary_value(value: Any) -> str:
    """A summary value for a Markdown cell; ``{0: 3, 1: 5}`` becomes ``0: 3, 1: 5``."""
    if isinstance(value, dict):
        return ", ".join(f"{k}: {v}" for k, v in value.items())
    return str(value)


def _public(args: argparse.Namespace) -> None:
    from pflrepro.data.jobs import make_public

    make_public(args.data, args.size, args.seed, args.out,
                exclude_partition=args.exclude_partition)


def add_subcommands(sub: argparse._SubParsersAction) -> None:  # noqa: SLF001
    """Add the data commands to ``sub``."""
    p = sub.add_parser("partition", help="partition a prepared data set among clients")
    p.add_argument("--data", required=True)
    p.add_argument("--dataset", required=True)
    p.add_argument("--spec", required=True, help="partition spec as JSON")
    p.add_argument("--seed", type=int, required=True, help="split seed")
    p.add_argument("--out", type=output_file, required=True)
    p.set_defaults(func=_partition)

    p = sub.add_parser("public", help="draw an unlabeled public set (distillation)")
    p.add_argument("--data", required=True, help="prepared data set the rows come from")
    p.add_argument("--size", type=int, required=True)
    p.add_argument("--seed", type=int, required=True, help="split seed")
    p.add_argument("--exclude-partition", help="partition whose rows to avoid (same data set)")
    p.add_argument("--out", type=output_file, required=True)
    p.set_defaults(func=_public)

    p = sub.add_parser("partition-stats", help="per-client sizes and label counts")
    p.add_argument("--data", required=True)
    p.add_argument("--partition", required=True)
    p.add_argument("--csv", type=output_file, required=True, help="per-client table")
    p.add_argument("--md", type=output_file, required=True, help="summary table")
    p.set_defaults(func=_partition_stats)
