"""Where each setting of an experiment comes from: the experiment's ``sources:`` key.

A paper's reproduction is worth what its settings are worth, and most settings of these
papers are not in their texts. Every experiment may say, per setting of
:data:`SETTINGS`, where its value comes from, as a method entry says it of its
hyperparameters (:func:`pflrepro.config.model.parse_sources`): ``"paper: <a quote or
the place the text states it>"`` or ``"unstated: <why this value>"``. Every
paper-scale experiment of the shipped config sources every setting (a test holds it),
and ``pflrepro list settings`` renders the values beside their sources
(:mod:`pflrepro.reporting.settings_table`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pflrepro.config.errors import ConfigError
from pflrepro.config.limits import _short

#: The settings an experiment sources, each with what it covers.
SETTINGS: dict[str, str] = {
    "clients": "number of clients",
    "samples": "rows per client (how the data set's rows are dealt and capped)",
    "partition": "how labels or domains are distributed over clients",
    "test": "which test rows a client is evaluated on",
    "metric": "how client accuracies become the reported number",
    "model": "the network every client trains",
    "optimizer": "the local optimiser",
    "lr": "the local learning rate",
    "batch_size": "the local mini-batch size",
    "local_epochs": "local epochs per round",
    "rounds": "communication rounds",
    "participation": "which clients train in a round",
}

#: How a setting's source text starts (as a method entry's ``sources:``).
SETTING_SOURCE_KINDS = ("paper", "unstated")


def parse_setting_sources(spec: Any, where: str) -> dict[str, str]:
    """An experiment's ``sources:``: setting of :data:`SETTINGS` -> ``"kind: text"``.

    Raises :class:`ConfigError` naming the key for a setting not in :data:`SETTINGS`
    or a text that is not ``paper: <where>`` / ``unstated: <why>`` with a non-empty
    tail.
    """
    if spec is None:
        return {}
    if not isinstance(spec, Mapping):
        raise ConfigError(f"{where}: a mapping setting -> 'paper: ...' or 'unstated: ...', "
                          f"got {_short(spec)}")
    out: dict[str, str] = {}
    for key, text in spec.items():
        if key not in SETTINGS:
            raise ConfigError(f"{where}.{key}: not a setting; known: {list(SETTINGS)}")
        kind, _, tail = str(text).partition(":") if isinstance(text, str) else ("", "", "")
        if kind not in SETTING_SOURCE_KINDS or not tail.strip():
            raise ConfigError(f"{where}.{key}: must read 'paper: <where the text states "
                              f"it>' or 'unstated: <why this value>', got {_short(text)}")
        out[str(key)] = str(text)
    return out
