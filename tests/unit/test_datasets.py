"""The data-set registry (pflrepro.data.datasets): found by a scan of pflrepro.data.sources."""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path

import pytest

from pflrepro.data import datasets
from pflrepro.data.datasets import DATASETS, DatasetSource
from pflrepro.data.sources import cifar10, fashion_mnist
from pflrepro.scan import ScannedRegistry


def test_registry_has_the_real_sets() -> None:
    assert sorted(DATASETS) == ["cifar10", "cifar100", "digits", "emnist", "fashion_mnist",
                                "femnist", "mnist", "officehome"]
    assert DATASETS["cifar10"].prepare is cifar10.prepare_cifar10
    assert "/usr/share/datasets/fashion-mnist" in DATASETS["fashion_mnist"].default_mirrors
    assert DATASETS["fashion_mnist"] is fashion_mnist.SOURCE


def test_every_source_module_registers_the_data_set_it_is_named_after() -> None:
    package = importlib.import_module(datasets.SOURCES_PACKAGE)
    names = sorted(m.name for m in pkgutil.iter_modules(package.__path__))
    assert names == sorted(DATASETS)
    for name in names:
        module = importlib.import_module(f"{datasets.SOURCES_PACKAGE}.{name}")
        assert module.SOURCE.name == name and DATASETS[name] is module.SOURCE


def test_a_module_added_to_the_package_is_found_without_being_listed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "toy_sources"
    package.mkdir()
    (package / "__init__.py").write_text('"""No imports here."""\n')
    (package / "toy.py").write_text(
        "from pflrepro.data.datasets import DatasetSource, register_dataset\n"
        "SOURCE = register_dataset(DatasetSource('toy', 'a toy', prepare=print))\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(datasets, "SOURCES_PACKAGE", "toy_sources")
    loaded: dict[str, DatasetSource] = {}
    monkeypatch.setattr(datasets, "_LOADED", loaded)
    for name in ("toy_sources", "toy_sources.toy"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    fresh = ScannedRegistry(datasets.SOURCES_PACKAGE, loaded)
    assert "toy_sources.toy" not in sys.modules
    assert list(fresh) == ["toy"]  # the first read scans and imports the package
    assert isinstance(fresh["toy"], DatasetSource) and fresh["toy"].description == "a toy"


def test_a_name_registered_twice_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(datasets, "_LOADED", {})
    source = DatasetSource("twice", "", prepare=print)
    datasets.register_dataset(source)
    with pytest.raises(ValueError, match="'twice' registered twice"):
        datasets.register_dataset(source)
