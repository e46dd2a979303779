"""The one-line error of a setting outside its choices, with a near miss named.

At the package's top (the lowest layer), so every layer that checks a setting against a
fixed list (the data schemes, the training settings, the methods' hyperparameters, the
tables) gives the same message: ``<what> must be one of [...], got 'x'``, and
``; did you mean 'y'?`` when a choice is spelled close to ``x``.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any, TypeVar

T = TypeVar("T")

#: How alike (difflib's ratio) a choice must be to the value to be offered as a near miss.
CUTOFF = 0.75


def did_you_mean(value: Any, known: Iterable[Any]) -> str:
    """``"; did you mean 'x'?"`` for a near miss of ``value`` among ``known``, else ``""``.

    At most two near misses, the closest first; every value is compared as text.
    """
    names = [str(k) for k in known]
    close = difflib.get_close_matches(str(value), names, n=2, cutoff=CUTOFF)
    return f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""


def require_choice(value: T, choices: Iterable[Any], what: str) -> T:
    """``value`` if it is one of ``choices``; else ValueError, one line naming ``what``.

    ``what`` starts the message (``"training.eval_test"``, ``"pathological: shards"``).
    A near miss is named only for a text value among text choices (a tuple of column
    names has no spelling to be close to).
    """
    options = list(choices)
    if value in options:
        return value
    hint = (did_you_mean(value, options)
            if isinstance(value, str) and all(isinstance(c, str) for c in options) else "")
    raise ValueError(f"{what} must be one of {options}, got {value!r}{hint}")
