"""Where each setting of an experiment comes from: the experiment's ``sources:`` key.

A paper's reproduction is worth what its settings are worth, and most settings of these
papers are not in their texts. Every experiment may say, per setting of
:data:`SETTINGS`, where its value comes from, as a method entry says it of its
hyperparameters (:func:`pflrepro.config.model.parse_sources`): ``"paper: <a quote or
the place the text states it>"`` or ``"unstated: <why this value>"``. Every
paper-scale experiment of the shipped config sources every setting (a test holds it),
and ``pflrepro list settings`` renders the values beside their sources
(:mod:`pflrepro.reporting.settings_table`).

Each unstated choice has one home for its measurements, a page under ``docs/``; a
source or a ``config.yaml`` comment points there as ``docs/<page>.md#<anchor>``.
:func:`unresolved_references` lists every such pointer whose page or heading is
missing (anchors made from headings as GitHub makes them, :func:`github_anchor`), and
:func:`source_paper` names the paper a ``paper:`` source is from, so a test holds every
pointer and every ``paper:`` source of the shipped config to something that exists.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from pathlib import Path
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


#: The papers a ``paper:`` source may be from, each with the prefix of the names of its
#: experiments and of its own algorithms (``federico_table1_cpu_fashion``, ``fedamp``).
PAPERS: dict[str, str] = {"FedeRiCo": "federico", "FedAMP": "fedamp",
                          "PerFed-CKT": "perfedckt", "FedMix": "fedmix"}

#: A pointer into the docs: ``docs/<page>.md`` and an optional ``#anchor``; the anchor
#: ends at white space, a closing bracket, a quote, a comma or a semicolon.
DOC_REFERENCE = re.compile(r"(docs/[\w./-]+?\.md)(?:#([^\s)\]\"',;]+))?")

_FENCE = re.compile(r"^(```|~~~)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading's text.

    Lower case; every character but letters, marks, digits, ``_``, ``-`` and spaces
    dropped; spaces made ``-``.

    >>> github_anchor("## Client sizes (`label_groups`' `sizes`)".lstrip("# "))
    'client-sizes-label_groups-sizes'
    """
    kept = (ch for ch in heading.lower()
            if ch in " -_" or unicodedata.category(ch)[0] in "LMN")
    return "".join(kept).replace(" ", "-")


def page_anchors(markdown: str) -> set[str]:
    """Every heading anchor of a Markdown page.

    Lines in code fences are not headings; a repeated anchor takes ``-1``, ``-2``, ...
    as on GitHub.
    """
    anchors: set[str] = set()
    seen: dict[str, int] = {}
    fenced = False
    for line in markdown.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        match = None if fenced else _HEADING.match(line)
        if match is None:
            continue
        anchor = github_anchor(match.group(2))
        count = seen.get(anchor, 0)
        seen[anchor] = count + 1
        anchors.add(anchor if count == 0 else f"{anchor}-{count}")
    return anchors


def doc_references(text: str) -> list[tuple[str, str]]:
    """Every ``docs/<page>.md[#anchor]`` in ``text`` as (page, anchor or "")."""
    return [(page, (anchor or "").rstrip(".")) for page, anchor in DOC_REFERENCE.findall(text)]


def unresolved_references(text: str, root: Path) -> list[str]:
    """The pointers of ``text`` whose page or heading is missing under ``root``.

    Each as ``page: no such page`` or ``page#anchor: no such heading``.
    """
    missing = []
    anchors: dict[str, set[str]] = {}
    for page, anchor in doc_references(text):
        path = root / page
        if not path.is_file():
            missing.append(f"{page}: no such page")
            continue
        if anchor:
            if page not in anchors:
                anchors[page] = page_anchors(path.read_text(encoding="utf-8"))
            if anchor not in anchors[page]:
                missing.append(f"{page}#{anchor}: no such heading")
    return missing


def source_paper(text: str, owner: str) -> str | None:
    """The paper of :data:`PAPERS` a ``paper:`` source is from.

    The first one the text names, else the one whose prefix starts ``owner`` (the
    experiment's name, or the method's algorithm); None for neither.
    """
    named = [paper for paper in PAPERS if re.search(rf"\b{re.escape(paper)}\b", text)]
    if named:
        return min(named, key=text.index)
    return next((paper for paper, prefix in PAPERS.items() if owner.startswith(prefix)), None)
