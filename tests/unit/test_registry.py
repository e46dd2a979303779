"""Registries vs tests and the generated config schema: nothing registered goes
untested or missing from the schema, and the committed schema is up to date."""

import dataclasses
from pathlib import Path

import pytest

from pflrepro.algorithms import ALGORITHMS
from pflrepro.config import schema
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
    # besides the hyperparameters: `sources` (where each value comes from) and `label` (its
    # display name), neither a param
    assert set(props) == {"algorithm", "sources", "label"} | {f.name for f in dataclasses.fields(
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


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_records_declare_exactly_what_record_logs(name):
    """``records`` (which the workflow reads for its weight/distance figures) is true."""
    from _fl_helpers import make_data, make_engine

    from pflrepro.algorithms.base import parse_hyper
    from pflrepro.store.results import MetricLog

    cls = ALGORITHMS[name]
    data = make_data(n_train=(8, 6, 7, 8), n_test=(3, 2, 3, 2), groups=(0, 0, 1, 1),
                     public=5)
    engine = make_engine(data, optimizer="sgd", lr=0.05)
    algorithm = cls(engine, parse_hyper(cls, {}))
    log = MetricLog()
    state = algorithm.init()
    algorithm.record(state, 0, log)
    for rnd in (1, 2):
        state, _ = algorithm.round(state, rnd)
        algorithm.record(state, rnd, log)
    assert set(log.metrics) == set(cls.records)


def test_a_method_is_one_file_named_after_it():
    from pflrepro.algorithms.base import Algorithm, register_algorithm

    class Elsewhere(Algorithm):
        name = "elsewhere"
        summary = "x"

    with pytest.raises(ValueError, match="must be defined in pflrepro.algorithms.elsewhere"):
        register_algorithm(Elsewhere)
