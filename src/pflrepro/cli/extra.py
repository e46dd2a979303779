"""Subcommands kept out of :mod:`pflrepro.cli`, registered by it in one call.

``other-config`` (:mod:`pflrepro.pipeline.other_configs`) and ``cost-projection``
(:mod:`pflrepro.reporting.cost_projection`).
"""

from __future__ import annotations

from typing import Any


def add_subcommands(sub: Any) -> None:
    """Add every subcommand of this module's list to the argparse subparsers ``sub``."""
    from pflrepro.pipeline.other_configs import add_subcommands as other_config
    from pflrepro.reporting.cost_projection import add_subcommands as cost_projection

    other_config(sub)
    cost_projection(sub)
