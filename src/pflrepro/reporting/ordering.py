"""Order and display labels of the ids a table or figure shows (methods, partitions, experiments).

Ids are ordered as the config lists them, the others after them in natural order
(:func:`natural_key`: ``groups2`` before ``groups10``); each id shows as its label
from the config (``labels:``) or as itself, and two ids may never show alike.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any


def natural_key(text: str) -> tuple[Any, ...]:
    """Sort key that orders embedded numbers numerically (``groups2`` < ``groups10``)."""
    return tuple((0, int(part)) if part.isdigit() else (1, part)
                 for part in re.split(r"(\d+)", str(text)) if part)


def order_values(found: Iterable[str], order: Sequence[str] | None, what: str) -> list[str]:
    """Order ``found`` by ``order``; values not in ``order`` follow in natural order.

    Raises ``ValueError`` if ``order`` names a value that is not in ``found`` (a typo
    or a method/partition without results), or names one twice.
    """
    found = sorted({str(v) for v in found}, key=natural_key)
    if order is None:
        return found
    if isinstance(order, str):
        raise ValueError(f"{what}: expected a sequence of names, got the string {order!r}")
    order = [str(v) for v in order]
    dup = sorted({v for v in order if order.count(v) > 1})
    if dup:
        raise ValueError(f"{what}: {dup} listed twice in the requested order")
    unknown = [v for v in order if v not in found]
    if unknown:
        raise ValueError(f"{what}: {unknown} requested but not in the aggregate "
                         f"(present: {found})")
    return order + [v for v in found if v not in order]


# --------------------------------------------------------------------------- labels
def check_labels(labels: Mapping[str, str] | None, what: str) -> dict[str, str]:
    """Return ``labels`` (id -> display label) as a plain dict, ``{}`` for ``None``.

    Raises ``ValueError`` unless it is a mapping of strings to non-empty strings.
    """
    if labels is None:
        return {}
    if not isinstance(labels, Mapping):
        raise ValueError(f"{what}: expected a mapping of id -> display label, got "
                         f"{type(labels).__name__}")
    out = {}
    for key, value in labels.items():
        if not isinstance(key, str) or not isinstance(value, str) or not value.strip():
            raise ValueError(f"{what}: labels must map strings to non-empty strings, got "
                             f"{key!r} -> {value!r}")
        out[key] = value
    return out


def display_labels(values: Iterable[str], labels: Mapping[str, str] | None,
                   what: str) -> dict[str, str]:
    """Map each of ``values`` to its display label (unlabelled values show as themselves).

    Raises ``ValueError`` when two of ``values`` would show the same label (the
    columns or panels could not be told apart) or ``labels`` is malformed.
    """
    labels = check_labels(labels, what)
    shown = {str(v): labels.get(str(v), str(v)) for v in values}
    seen: dict[str, str] = {}
    for value, label in shown.items():
        if label in seen:
            raise ValueError(f"{what}: {seen[label]!r} and {value!r} would both be shown as "
                             f"{label!r}; give them different labels")
        seen[label] = value
    return shown
