"""The data commands: ``prepare``, ``partition``, ``public`` and ``partition-stats``.

A data set prepared in the uniform on-disk form, a prepared data set partitioned among
clients, a public set drawn, and a partition's statistics.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path
from typing import Any

from pflrepro.cli.options import output_file

log = logging.getLogger("pflrepro")


def _prepare(args: argparse.Namespace) -> None:
    from pflrepro.data.checksums import parse_checksum_args
    from pflrepro.data.datasets import prepare_dataset
    from pflrepro.data.download import Limits, set_limits

    set_limits(Limits(deadline_s=args.deadline, min_rate=args.min_rate))

    meta = prepare_dataset(args.dataset, args.out, args.raw, args.mirror or None,
                           parse_checksum_args(args.checksum))
    log.info("prepared %s: %d samples, %d classes, shape %s", meta.name, meta.size,
             meta.num_classes, meta.shape)


def _partition(args: argparse.Namespace) -> None:
    from pflrepro.data.jobs import make_partition

    make_partition(args.data, args.dataset, json.loads(args.spec), args.seed, args.out)


def read_partition_labels(data: str, partition: str) -> tuple[Any, Any, int]:
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

    frame, labels, num_classes = read_partition_labels(args.data, args.partition)
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
    from pflrepro.data.download import Limits

    p = sub.add_parser("prepare", help="prepare a data set in the uniform on-disk form")
    p.add_argument("--dataset", required=True)
    p.add_argument("--out", required=True, help="output directory (meta.json written last)")
    p.add_argument("--raw", required=True, help="directory for raw downloads")
    p.add_argument("--mirror", action="append", help="mirror to try first (repeatable)")
    p.add_argument("--checksum", action="append", metavar="FILE=SHA256",
                   help="SHA-256 of a raw file, replacing the built-in one (repeatable; the "
                   "config's data.checksums)")
    limits = Limits()
    p.add_argument("--deadline", type=float, default=limits.deadline_s, metavar="SECONDS",
                   help="give up a file's download from one mirror after this long "
                   f"(default {limits.deadline_s:g}; the config's data: download: deadline_s)")
    p.add_argument("--min-rate", type=float, default=limits.min_rate, metavar="BYTES_PER_S",
                   help="give up a download slower than this, judged after "
                   f"{limits.grace_s:g} s (default {limits.min_rate:g}; data: download: "
                   "min_rate)")
    p.set_defaults(func=_prepare)

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
