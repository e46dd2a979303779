"""Subcommands of the CLI kept beside :mod:`pflrepro.cli` (its ``build_parser`` adds them).

``prepare`` (a data set into the uniform on-disk form) and ``grid-projection`` (the
paper-scale grid's work in counted FLOPs, and its projected GPU-hours).
"""

from __future__ import annotations

import argparse
import logging
from typing import Any

from pflrepro.store.targets import output_file

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


def _grid_projection(args: argparse.Namespace) -> None:
    from pflrepro.reporting.flops import write_grid_projection

    table = write_grid_projection(args.config, args.md, args.csv, peak_tflops=args.peak_tflops,
                                  utilisation=args.utilisation)
    log.info("projected %d experiment x method rows: %.1f GPU-hours in all", len(table),
             float(table["gpu_hours"].sum()))


def add_subcommands(sub: Any) -> None:
    """Add ``prepare`` and ``grid-projection`` to the CLI's subparsers ``sub``."""
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
