"""The config commands: ``check-config``, ``schema`` and ``other-config``.

A config checked as the workflow checks it, the config schema printed or written
(:mod:`pflrepro.config.schema`), and the line that names the shipped config (and
profile) making a file the loaded config does not
(:func:`pflrepro.pipeline.other_configs.hint_job`; the workflow's rule
``other_config_target`` runs it).
"""

from __future__ import annotations

import argparse
import sys

from pflrepro.cli.options import output_file


def _schema(args: argparse.Namespace) -> None:
    from pflrepro.config.schema import SCHEMA_PATH, render
    from pflrepro.store.io import write_text

    text = render()
    if args.write:
        write_text(args.path or SCHEMA_PATH, text)
    else:
        sys.stdout.write(text)


def _check_config(args: argparse.Namespace) -> None:
    from pflrepro.config import check_config_paths
    from pflrepro.config.schema import build_schema

    cfg = check_config_paths(args.configs, build_schema())
    chosen = sum(e.scale == cfg.scale for e in cfg.experiments.values())
    print(f"{' + '.join(args.configs)}: valid ({chosen} experiment(s) at the {cfg.scale} "
          "scale)")


def _other_config(args: argparse.Namespace) -> None:
    from pflrepro.pipeline.other_configs import hint_job

    hint_job(args.root, args.loaded, args.target)


def add_subcommands(sub: argparse._SubParsersAction) -> None:  # noqa: SLF001
    """Add the config commands to ``sub``."""
    p = sub.add_parser("check-config", help="check config files as the workflow does, with "
                       "file and line for YAML errors (Snakemake names neither for --configfile)")
    p.add_argument("configs", nargs="+", metavar="FILE",
                   help="config files, merged in order (config.yaml my.yaml: my.yaml merged "
                   "into config.yaml, as `snakemake --configfile my.yaml` does)")
    p.set_defaults(func=_check_config)

    p = sub.add_parser("schema", help="print or write the config schema")
    p.add_argument("--write", action="store_true")
    p.add_argument("--path", type=output_file)
    p.set_defaults(func=_schema)

    p = sub.add_parser("other-config", help="say which shipped config (and profile) makes a "
                       "file the loaded config does not")
    p.add_argument("--root", required=True, help="the workflow's directory")
    p.add_argument("--loaded", required=True, help="the config file loaded, relative to it")
    p.add_argument("target")
    p.set_defaults(func=_other_config)
