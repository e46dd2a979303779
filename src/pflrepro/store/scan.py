"""A registry filled by importing every module of one package (a scan).

Data sets (:mod:`pflrepro.data.sources`) and partition schemes
(:mod:`pflrepro.data.schemes`) are one module each that registers itself on import;
:class:`ScannedRegistry` is the read-only mapping over what they registered, which
imports the whole package on its first read, so adding one needs no list anywhere.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator, Mapping
from typing import TypeVar

__all__ = ["ScannedRegistry"]

V = TypeVar("V")


class ScannedRegistry(Mapping[str, V]):
    """Name -> what ``package``'s modules put in ``loaded``; the first read imports them."""

    def __init__(self, package: str, loaded: dict[str, V]) -> None:
        self._package = package
        self._loaded = loaded
        self._scanned = False

    def _load(self) -> dict[str, V]:
        if not self._scanned:
            package = importlib.import_module(self._package)
            for module in sorted(m.name for m in pkgutil.iter_modules(package.__path__)):
                importlib.import_module(f"{self._package}.{module}")
            self._scanned = True
        return self._loaded

    def __getitem__(self, name: str) -> V:
        return self._load()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(dict(self._load()))

    def __len__(self) -> int:
        return len(self._load())
