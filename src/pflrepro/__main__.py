"""``python -m pflrepro``: the command-line interface.

A workflow job (``--require-source``, ``--exit-with-parent``) ties itself to its
Snakemake first, before the CLI's imports (:mod:`pflrepro.store.lifeline`).
"""

import sys

if {"--require-source", "--exit-with-parent"} & set(sys.argv[1:]):
    from pflrepro.store.lifeline import exit_with_parent

    exit_with_parent()

from pflrepro.cli import main  # noqa: E402 (after the lifeline, on purpose)

raise SystemExit(main())
