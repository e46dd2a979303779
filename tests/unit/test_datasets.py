"""The data-set registry (pflrepro.data.datasets): found by a scan of pflrepro.data.sources."""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path

import pytest
from _source_helpers import tiny_mnist_mirror

from pflrepro.data import datasets
from pflrepro.data.datasets import DATASETS, DatasetSource
from pflrepro.data.sources import cifar10, fashion_mnist
from pflrepro.store.scan import ScannedRegistry


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


def test_the_configs_own_checksums_verify_a_copy_the_official_ones_refuse(
        tmp_path: Path) -> None:
    from pflrepro.data.download import ChecksumError, DownloadError

    sums = tiny_mnist_mirror(tmp_path / "mirror")
    with pytest.raises((ChecksumError, DownloadError)):
        datasets.prepare_dataset("mnist", tmp_path / "a", tmp_path / "raw_a",
                                 [str(tmp_path / "mirror")])
    meta = datasets.prepare_dataset("mnist", tmp_path / "b", tmp_path / "raw_b",
                                    [str(tmp_path / "mirror")], checksums=sums)
    assert meta.size == 6 and meta.num_classes == 10
    wrong = {**sums, DATASETS["mnist"].files[0].name: "0" * 64}
    with pytest.raises((ChecksumError, DownloadError)):
        datasets.prepare_dataset("mnist", tmp_path / "c", tmp_path / "raw_c",
                                 [str(tmp_path / "mirror")], checksums=wrong)


def test_with_checksums_replaces_only_the_named_files_and_refuses_unknown_names() -> None:
    source = DATASETS["mnist"]
    name = source.files[1].name
    files = datasets.with_checksums(source, {name: "a" * 64})
    assert files[1].sha256 == "a" * 64 and files[1].size is None
    assert files[0] == source.files[0]
    with pytest.raises(ValueError, match="unknown file"):
        datasets.with_checksums(source, {"nope.gz": "a" * 64})


def test_every_downloading_source_lists_its_files() -> None:
    for name, source in DATASETS.items():
        assert bool(source.files) == (name != "digits"), name
