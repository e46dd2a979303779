"""Command-line interface: the only entry point the Snakemake rules call.

Each subcommand does one stage and writes its outputs atomically::

    pflrepro prepare   --dataset digits --out results/data/digits --raw data/raw
    pflrepro partition --data results/data/digits --dataset digits --spec JSON --seed 0 --out P
    pflrepro train     --spec JSON --data DIR --partition P --out RUN.parquet
                       (several runs: --spec J1 J2 --partition P1 P2 --out R1 R2 --log L1 L2)
    pflrepro aggregate --out AGG.parquet RUN.parquet ...
    pflrepro table     --aggregate AGG.parquet --md T.md --tex T.tex --csv T.csv
    pflrepro partition-stats --data DIR --partition P --csv S.csv --md S.md
    pflrepro plot      KIND --aggregate AGG.parquet --pdf F.pdf --png F.png  (KIND: plot -h)
    pflrepro plot      labels --data DIR --partition P --pdf F.pdf --png F.png
    pflrepro claims    --claims config/claims.yaml --scale cpu --aggregate AGG.parquet ...
                       --config config.yaml (or --design JSON) --md C.md --csv C.csv
    pflrepro check-config config.yaml [my.yaml ...]
    pflrepro schema    [--write]
    pflrepro cost      --runs RUN... --benchmarks TSV... --logs LOG... --training JSON
                       --md C.md --csv C.csv [--project config.yaml --projection-csv P.csv]

For people rather than rules::

    pflrepro run       --method fedamp --dataset digits --partition practical --clients 8
                       --partition-option groups=2 --rounds 20 [--out RUN.parquet]
    pflrepro list      [methods|datasets|partitions]
    pflrepro plan      [--profile profiles/demo] [-- SNAKEMAKE_ARGS]
    pflrepro status    [--results results --logs logs] [--config config.yaml]

Every command's parser and argument handling is here, one family of commands per
module: :mod:`~pflrepro.cli.inspect` (list, plan, status, verify),
:mod:`~pflrepro.cli.config` (check-config, schema, other-config),
:mod:`~pflrepro.cli.training` (train, run), :mod:`~pflrepro.cli.data` (prepare,
partition, public, partition-stats), :mod:`~pflrepro.cli.tables` (aggregate, table,
communication, claims, paper-vs-ours, report-html), :mod:`~pflrepro.cli.figures` (plot),
:mod:`~pflrepro.cli.cost` (cost, cost-projection, grid-projection) and
:mod:`~pflrepro.cli.tune` (tune-split, tune-select); :mod:`~pflrepro.cli.options` holds
the options' types, :mod:`~pflrepro.cli.inputs` what the reporting commands read, and
:mod:`~pflrepro.cli.support` the grouped help and the one-line errors. The layers below
offer plain typed functions; none of them parses a command line.

Layer (tests/unit/test_layers.py): the top; it may import every other layer.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from typing import NoReturn

from pflrepro.cli import (
    config,
    cost,
    data,
    figures,
    inspect,
    tables,
    training,
    tune,
)

log = logging.getLogger("pflrepro")
#: Every log line's format (a training run's own log file takes the same).
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
#: The modules of the commands, one family each; each adds its commands to the parser
#: (the order of the help is :data:`pflrepro.cli.support.USER_COMMANDS` and
#: :data:`~pflrepro.cli.support.JOB_COMMANDS`).
COMMAND_FAMILIES = (inspect, config, training, data, tables, figures, cost, tune)
#: What ``pflrepro --help`` says first (the commands follow, grouped).
DESCRIPTION = ("The reproducibility pipeline's command line: commands for people, and the "
               "job commands the Snakemake rules run, one stage each.")


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line (no usage block before it).

    Its subcommands' parsers are of the same class (argparse makes them so).
    """

    def error(self, message: str) -> NoReturn:
        """Print ``message`` as one line and exit 2 (argparse's status for usage errors)."""
        self.exit(2, f"{self.prog}: error: {message} (`{self.prog} --help` lists the "
                     "options)\n")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = OneLineParser(prog="pflrepro", description=DESCRIPTION,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser.add_argument("--require-source", metavar="SRC",
                        help="refuse to run unless the pflrepro package imported is "
                        "SRC/pflrepro (the workflow's jobs pass their own src/); implies "
                        "--exit-with-parent")
    parser.add_argument("--exit-with-parent", action="store_true",
                        help="end (SIGTERM: a training job saves its checkpoint) when the "
                        "job's shell or the Snakemake running it ends (Linux)")
    sub = parser.add_subparsers(dest="command", required=True)
    for family in COMMAND_FAMILIES:
        family.add_subcommands(sub)
    from pflrepro.cli.support import group_help

    group_help(parser, sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; known input errors print one line and return 1."""
    from pflrepro.cli.support import check_source, output_paths, run_command
    from pflrepro.store.checkpoint import Interrupted
    from pflrepro.store.records import record_outputs

    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format=LOG_FORMAT)
    logging.getLogger("fontTools").setLevel(logging.WARNING)  # PDF font subsetting chatter

    def command(args: argparse.Namespace) -> None:
        if args.require_source is not None:
            check_source(args.require_source)
        if args.require_source is not None or args.exit_with_parent:  # a workflow job
            from pflrepro.store.lifeline import exit_with_parent

            exit_with_parent()
        args.func(args)
        record_outputs(output_paths(args))

    return run_command(args, command, Interrupted)


if __name__ == "__main__":
    raise SystemExit(main())
