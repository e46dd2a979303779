"""The names a reader sees for method ids: the papers' spelling (FedAvg+, FedProx-FT, ...).

Tables and figures show these names; CSV files, paths and wildcards keep the ids. A
method id shows as, first found: the ``label:`` its config variant gives (the
workflow passes them to the reporting commands, which hold them for the command's
duration: :func:`method_labels`); :data:`METHOD_NAMES`, every method id of the shipped
configs; the ``display_name`` its method file declares (an id that is an algorithm's
name); else the id itself. The base names follow the papers' text (FedeRiCo's
"FedAvg+", "Clustered FL", "Local"; FedAMP's "FedAvg-FT", "FedProx-FT", "HeurFedAMP");
a variant is its base name with the setting it changes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

#: The config's labels of method variants, held by :func:`method_labels`.
_LABELS: ContextVar[Mapping[str, str] | None] = ContextVar("method_labels", default=None)
#: Each partition's names of its group ids (a rotation's angles), held by
#: :func:`method_labels`.
_GROUPS: ContextVar[Mapping[str, Sequence[str]] | None] = ContextVar("group_names",
                                                                      default=None)

#: Method id -> name shown in tables and figures: the shipped configs' variants and the
#: algorithms whose files declare no ``display_name`` yet.
METHOD_NAMES: Mapping[str, str] = {
    "majority": "Majority class",
    "fedavg_ft": "FedAvg-FT",
    "fedprox_hand": "FedProx (hand-set μ)",
    "fedprox_ft_hand": "FedProx-FT (hand-set μ)",
    "ditto_hand": "Ditto (hand-set λ)",
    "clustered_fl": "Clustered FL",
    "clustered_fl_fedem": "Clustered FL (FedEM's ε)",
    "fedfomo_m5": "FedFomo (M=5)",
    "fedamp": "FedAMP",
    "fedamp_hand": "FedAMP (hand-set)",
    "heurfedamp": "HeurFedAMP",
    "heurfedamp_hand": "HeurFedAMP (hand-set)",
    "federico": "FedeRiCo",
    "federico_literal": "FedeRiCo (literal reading)",
    "federico_accumulative": "FedeRiCo (accumulative loss)",
    "federico_eps0": "FedeRiCo (ε=0)",
    "federico_eps0.1": "FedeRiCo (ε=0.1)",
    "federico_eps0.5": "FedeRiCo (ε=0.5)",
    "federico_eps1": "FedeRiCo (ε=1)",
    "federico_beta0.1": "FedeRiCo (β=0.1)",
    "federico_beta0.3": "FedeRiCo (β=0.3)",
    "federico_beta0.9": "FedeRiCo (β=0.9)",
    "federico_m0": "FedeRiCo (M=0)",
    "federico_m1": "FedeRiCo (M=1)",
    "federico_m5": "FedeRiCo (M=5)",
    "federico_m7": "FedeRiCo (M=7)",
    "perfedckt": "PerFed-CKT",
    "perfedckt_c1": "PerFed-CKT (1 cluster)",
    "perfedckt_c2": "PerFed-CKT (2 clusters)",
    "perfedckt_c4": "PerFed-CKT (4 clusters)",
    "perfedckt_c5": "PerFed-CKT (5 clusters)",
    "fedmix_k1": "FedMix (k=1)",
    "fedmix_k2": "FedMix (k=2)",
    "fedmix_k8": "FedMix (k=8)",
    "fedmix_shard": "FedMix (shard posterior)",
    "fedmix_label_shard": "FedMix (label-shard posterior)",
}


@contextmanager
def method_labels(labels: Mapping[str, str],
                  groups: Mapping[str, Sequence[str]] | None = None) -> Iterator[None]:
    """Within the block, method ids show as their ``labels``, group ids by their names.

    ``groups``: partition id -> the name of each of its group ids (:func:`group_name`).
    """
    token = _LABELS.set(dict(labels))
    group_token = _GROUPS.set(dict(groups or {}))
    try:
        yield
    finally:
        _LABELS.reset(token)
        _GROUPS.reset(group_token)


def group_name(group: int, partitions: Iterable[str], unknown: str = "unknown") -> str:
    """How a legend names distribution ``group`` of these partitions' clients.

    The partitions' own name for it (a rotation's angle) when they all give the same
    one; else ``distribution <group>``; ``unknown`` for a negative id (no group).
    """
    if group < 0:
        return unknown
    known = _GROUPS.get() or {}

    def own(partition: str) -> str | None:  # the partition's name for the group, if any
        names = known.get(partition, ())
        return names[group] if group < len(names) else None

    found = {own(p) for p in partitions}
    name = found.pop() if len(found) == 1 else None
    return name or f"distribution {group}"


def method_name(method: str) -> str:
    """The name ``method`` (an id) shows as.

    First found: a config label, :data:`METHOD_NAMES`, the method file's
    ``display_name``, else the id itself.
    """
    from pflrepro.algorithms.registry import INFOS

    method = str(method)
    if label := (_LABELS.get() or {}).get(method) or METHOD_NAMES.get(method):
        return label
    info = INFOS.get(method)
    return info.display_name if info is not None and info.display_name else method


def method_names(methods: Iterable[str]) -> dict[str, str]:
    """Each id of ``methods`` -> its shown name; raises ``ValueError`` if two look alike.

    Two ids may only share a name when one of them is not listed (a user's id equal to
    a listed name): the table or legend could not tell them apart.
    """
    shown: dict[str, str] = {}
    seen: dict[str, str] = {}
    for method in methods:
        name = method_name(method)
        if name in seen and seen[name] != str(method):
            raise ValueError(f"methods {seen[name]!r} and {method!r} would both be shown as "
                             f"{name!r}")
        seen[name] = str(method)
        shown[str(method)] = name
    return shown
