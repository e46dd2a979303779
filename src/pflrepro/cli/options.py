"""The types of the command line's options: each value checked when the line is read.

An option's ``type`` runs before any work, so a long job never ends on a value it
cannot use; each raises :class:`argparse.ArgumentTypeError`, which argparse prints as
one line naming the option (exit status 2). The checks themselves sit in the layers
below where they have a use of their own (:func:`pflrepro.store.targets.target_problem`
for output paths).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

from pflrepro.store.targets import target_problem


def output_file(text: str) -> str:
    """The ``type`` of every command-line option naming an output file.

    Checked when the command line is read, before any work: a long job never ends on
    an output it cannot write, and a mistyped path never creates folders across the
    file system (a missing folder is created only inside the working directory, the
    project). The writer checks the kind of file again when it writes.
    """
    problem = target_problem(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return text


def positive_int(text: str) -> int:
    """The ``--threads`` type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _positive(unit: str, option: str) -> Callable[[str], float]:
    """The type of an option that takes a finite number of ``unit`` > 0."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {unit} > 0, got {text!r}") from None
        if not (0 < value < float("inf")):
            raise argparse.ArgumentTypeError(f"must be a finite number of {unit} > 0, got "
                                             f"{text}")
        return value

    parse.__name__ = f"positive_{unit}"
    parse.__doc__ = f"The ``{option}`` type: a finite number of {unit} > 0."
    return parse


positive_minutes = _positive("minutes", "--stale-after")
positive_seconds = _positive("seconds", "--watch")


def open_unit_interval(text: str) -> float:
    """The ``--fraction`` type: a number strictly between 0 and 1."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not (math.isfinite(value) and 0 < value < 1):
        raise argparse.ArgumentTypeError(f"{text} is not in (0, 1): the share of each "
                                         "client's training rows held out for validation")
    return value
