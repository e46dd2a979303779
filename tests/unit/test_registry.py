"""Registries vs tests and the generated config schema: nothing registered goes
untested or missing from the schema, and the committed schema is up to date."""

import dataclasses
from pathlib import Path

import pytest

import pflrepro.data.schemes  # noqa: F401  (registers the partition schemes)
from pflrepro import schema
from pflrepro.algorithms import ALGORITHMS
from pflrepro.data.datasets import DATASETS
from pflrepro.data.partition import PARTITIONERS

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SCHEMA = schema.build_schema()


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_every_algorithm_has_a_test_file(name):
    assert (HERE / f"test_algorithm_{name}.py").is_file(), \
        f"algorithm {name!r} has no tests/unit/test_algorithm_{name}.py"


@pytest.mark.parametrize("name", sorted(PARTITIONERS))
def test_every_scheme_has_a_test_file(name):
    assert (HERE / f"test_scheme_{name}.py").is_file(), \
        f"partition scheme {name!r} has no tests/unit/test_scheme_{name}.py"


def test_algorithms_in_schema_enum():
    enum = SCHEMA["$defs"]["method"]["properties"]["algorithm"]["enum"]
    assert sorted(enum) == sorted(ALGORITHMS)


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_hyperparameters_in_schema_branch(name):
    branches = [case["then"]["properties"] for case in SCHEMA["$defs"]["method"]["allOf"]
                if case["if"]["properties"]["algorithm"]["const"] == name]
    assert len(branches) == 1, f"no single if/then branch for algorithm {name!r}"
    props = branches[0]
    for f in dataclasses.fields(ALGORITHMS[name].Hyper):
        assert f.name in props, f"{name}: hyperparameter {f.name!r} missing from the schema"
        assert props[f.name]["default"] == f.default
    assert set(props) == {"algorithm"} | {f.name for f in dataclasses.fields(
        ALGORITHMS[name].Hyper)}


def test_schemes_in_schema_enum():
    enum = SCHEMA["$defs"]["partition"]["properties"]["scheme"]["enum"]
    assert sorted(enum) == sorted(PARTITIONERS)


def test_datasets_in_schema_enum():
    enum = SCHEMA["$defs"]["experiment"]["properties"]["dataset"]["enum"]
    assert sorted(enum) == sorted(DATASETS)


def test_committed_schema_is_current():
    committed = (REPO / schema.SCHEMA_PATH).read_text(encoding="utf-8")
    assert committed == schema.render(), \
        f"{schema.SCHEMA_PATH} is out of date: run `pflrepro schema --write`"
