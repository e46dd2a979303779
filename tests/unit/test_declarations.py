"""The methods' declarations read from source equal what the imported classes declare,
and the reader refuses what it cannot read without importing."""

from __future__ import annotations

import dataclasses
import textwrap
from pathlib import Path

import pytest

from pflrepro.algorithms import ALGORITHMS, INFOS, get_algorithm
from pflrepro.algorithms.declarations import DeclarationError, Reader
from pflrepro.algorithms.registry import (
    INFO_ATTRIBUTES,
    NOT_METHODS,
    AlgorithmInfo,
    method_modules,
    read_info,
)

PACKAGE = Path(__file__).resolve().parents[2] / "src/pflrepro/algorithms"


def _fields(hyper: type) -> list[tuple[str, object, object, dict[str, object]]]:
    return [(f.name, f.type, f.default, dict(f.metadata)) for f in dataclasses.fields(hyper)]


def _imported(name: str) -> dict[str, object]:
    """What the imported class declares, in the reader's terms."""
    cls = get_algorithm(name)
    values = {field: getattr(cls, attribute, None) for attribute, field in INFO_ATTRIBUTES.items()}
    return {**values, "records": tuple(cls.records), "tune_keys": dict(values["tune_keys"] or {}),
            "Hyper": (cls.Hyper.__name__, cls.Hyper.__doc__, _fields(cls.Hyper)),
            "module": cls.__module__}


def _read(info: AlgorithmInfo) -> dict[str, object]:
    values = {f.name: getattr(info, f.name) for f in dataclasses.fields(info)}
    return {**values, "tune_keys": dict(info.tune_keys),
            "Hyper": (info.Hyper.__name__, info.Hyper.__doc__, _fields(info.Hyper))}


def test_every_method_module_is_read() -> None:
    assert sorted(INFOS) == sorted(m.rpartition(".")[2] for m in method_modules())
    assert "declarations" in NOT_METHODS and len(INFOS) >= 19


@pytest.mark.parametrize("name", sorted(INFOS))
def test_the_read_declaration_is_the_imported_one(name: str) -> None:
    assert _read(INFOS[name]) == _imported(name)
    assert ALGORITHMS[name] is get_algorithm(name)


def test_inherited_attributes_follow_the_mro() -> None:
    assert INFOS["ditto"].client_sampling  # from FedAvgBase
    assert INFOS["heurfedamp"].records == INFOS["fedamp"].records  # from FedAMP
    assert INFOS["fedmix"].requires_plain_sgd and not INFOS["fedavg"].requires_plain_sgd
    assert set(INFOS["fedamp"].tune_keys) == {"prox", "alpha_ratio"}
    assert not dataclasses.fields(INFOS["local"].Hyper)


def _package(tmp_path: Path, method: str) -> Reader:
    """A package of ``base.py`` (the real one) and one method module ``m.py``."""
    (tmp_path / "base.py").write_text((PACKAGE / "base.py").read_text())
    (tmp_path / "m.py").write_text(textwrap.dedent(method))
    return Reader(tmp_path)


HEAD = """
    import dataclasses
    import os
    from pflrepro.algorithms.base import Algorithm, register_algorithm
    from pflrepro.algorithms.registry import hyper
"""


def test_a_computed_value_is_refused_with_file_and_line(tmp_path: Path) -> None:
    reader = _package(tmp_path, HEAD + """
    @dataclasses.dataclass(frozen=True)
    class MHyper:
        steps: int = hyper(len("abc"), "steps")

    @register_algorithm
    class M(Algorithm):
        name = "m"
        summary = "M."
        Hyper = MHyper
    """)
    with pytest.raises(DeclarationError, match=r"m\.py:9: \"len\('abc'\)\" is neither"):
        read_info("m", reader)


def test_a_name_from_outside_is_refused(tmp_path: Path) -> None:
    reader = _package(tmp_path, HEAD + """
    from os import sep

    @register_algorithm
    class M(Algorithm):
        name = "m"
        summary = sep
    """)
    with pytest.raises(DeclarationError, match="'sep' comes from os"):
        read_info("m", reader)


def test_a_wrong_name_or_no_summary_is_refused(tmp_path: Path) -> None:
    body = HEAD + """
    @register_algorithm
    class M(Algorithm):
        name = {name!r}
        summary = {summary!r}
    """
    with pytest.raises(DeclarationError, match="must be defined in pflrepro.algorithms.n,"):
        read_info("m", _package(tmp_path, body.format(name="n", summary="N.")))
    with pytest.raises(DeclarationError, match="declares no summary"):
        read_info("m", _package(tmp_path, body.format(name="m", summary="")))
    info = read_info("m", _package(tmp_path, body.format(name="m", summary="M.")))
    assert info is not None and (info.name, info.summary, info.records) == ("m", "M.", ())


def test_a_module_that_registers_nothing_is_not_a_method(tmp_path: Path) -> None:
    assert read_info("m", _package(tmp_path, HEAD + "    X = 1\n")) is None


def test_a_parametrised_base_is_read_as_its_class(tmp_path: Path) -> None:
    """``Algorithm[MState]``, ``MBase[MState]``: the type argument (the state) declares
    nothing; the attributes come from the class as from an unparametrised base."""
    reader = _package(tmp_path, HEAD + """
    from typing import Generic, TypedDict, TypeVar

    class MState(TypedDict):
        x: int

    S = TypeVar("S")

    class MBase(Algorithm[S], Generic[S]):
        client_sampling = True

    @register_algorithm
    class M(MBase[MState]):
        name = "m"
        summary = "M."
    """)
    info = read_info("m", reader)
    assert info is not None and info.client_sampling and info.summary == "M."
