"""Each method's typed state: the TypedDict it declares is what its init and round hold.

A state is a plain dict at run time (a TypedDict adds no class of its own), so the
checkpoint saves and reads it as it is; its keys are the checkpoint format, pinned
below. The resume of every method from a checkpoint is
``test_checkpoint.py::test_resume_after_interruption_is_bit_identical``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypedDict

import numpy as np
import pytest
import torch
from _fl_helpers import make_data, make_engine

from pflrepro.algorithms import ALGORITHMS
from pflrepro.algorithms.base import Algorithm, parse_hyper, register_algorithm, state_type
from pflrepro.algorithms.registry import LOADED
from pflrepro.store.checkpoint import Checkpointer
from pflrepro.store.results import MetricLog

# enough clients and rows for every method (test_checkpoint.py's setting)
DATA = dict(n_train=(8, 6, 7, 8), n_test=(3, 2, 3, 2), groups=(0, 0, 1, 1), public=6)

#: The keys of every method's state: the checkpoint format (a renamed key makes the
#: checkpoints written before unreadable): (required, optional).
KEYS: dict[str, tuple[set[str], set[str]]] = {
    "apfl": ({"global", "opt", "personal", "personal_opt", "alpha"}, set()),
    "clustered_fl": ({"models", "cluster", "opt"}, set()),
    "ditto": ({"global", "opt", "personal", "personal_opt"}, set()),
    "fedamp": ({"params", "opt", "xi", "distance"}, set()),
    "fedavg": ({"global", "opt"}, set()),
    "fedavg_plus": ({"global", "opt"}, set()),
    "feddf": ({"globals", "opt"}, set()),
    "fedem": ({"components", "pi", "opt"}, set()),
    "federico": ({"params", "opt", "last", "table", "weights"}, set()),
    "fedfomo": ({"params", "opt", "affinity", "weights"}, {"previous"}),
    "fedmix": ({"experts", "q", "gates", "opt"}, {"q_local"}),
    "fedprox": ({"global", "opt"}, set()),
    "fedprox_ft": ({"global", "opt"}, set()),
    "heurfedamp": ({"params", "opt", "xi", "distance"}, set()),
    "hypcluster": ({"hypotheses", "cluster", "opt"}, set()),
    "local": ({"params", "opt"}, set()),
    "majority": ({"labels"}, set()),
    "per_fedavg": ({"global", "opt"}, set()),
    "perfedckt": ({"params", "opt", "centroids", "has_centroids"}, set()),
    "scaffold": ({"global", "control", "client_control"}, set()),
}

#: (method, hyperparameters, the optional keys its state then holds): each method at its
#: defaults, and the settings that hold or drop an optional key.
CASES: list[tuple[str, dict[str, Any], set[str]]] = [
    *((name, {}, set()) for name in sorted(KEYS) if not KEYS[name][1]),
    ("fedfomo", {}, {"previous"}),  # reference: previous is the default
    ("fedfomo", {"reference": "current"}, set()),
    ("fedmix", {}, set()),  # posterior: label keeps one pooled q
    ("fedmix", {"posterior": "shard"}, {"q_local"}),
    ("fedmix", {"posterior": "label_shard"}, {"q_local"}),
]


def _algorithm(name: str, params: dict[str, Any]) -> Algorithm[Any]:
    engine = make_engine(make_data(**DATA), seed=3, batch_size=3, lr=0.05,
                         model_options={"hidden": [4]})
    cls = ALGORITHMS[name]
    return cls(engine, parse_hyper(cls, params))


def _keys(typed: type) -> tuple[set[str], set[str]]:
    return set(typed.__required_keys__), set(typed.__optional_keys__)  # type: ignore[attr-defined]


def test_every_registered_method_has_its_keys_pinned() -> None:
    assert set(KEYS) == set(ALGORITHMS)


@pytest.mark.parametrize("name", sorted(KEYS))
def test_the_declared_state_keys_are_the_checkpoint_keys(name: str) -> None:
    assert _keys(state_type(ALGORITHMS[name])) == KEYS[name]


def test_every_optional_key_is_seen_held_and_left_out() -> None:
    """The cases below the table exercise each optional key both ways."""
    for name, (_, optional) in KEYS.items():
        for key in optional:
            held = [params for n, params, keys in CASES if n == name and key in keys]
            dropped = [params for n, params, keys in CASES if n == name and key not in keys]
            assert held and dropped, (name, key)


@pytest.mark.parametrize(("name", "params", "optional"), CASES,
                         ids=[f"{n}-{'-'.join(map(str, p.values())) or 'defaults'}"
                              for n, p, _ in CASES])
def test_init_and_a_round_hold_exactly_the_declared_keys(name: str, params: dict[str, Any],
                                                         optional: set[str]) -> None:
    alg = _algorithm(name, params)
    required, _ = _keys(state_type(type(alg)))
    state = alg.init()
    assert type(state) is dict  # what the checkpoint saves: no class of its own
    assert set(state) == required | optional
    state, losses = alg.round(state, 1)
    assert set(state) == required | optional
    assert len(losses) == alg.engine.num_clients


@pytest.mark.parametrize("name", ["federico", "fedmix", "perfedckt"])
def test_a_saved_state_reads_back_as_the_same_dict_and_runs_on(tmp_path: Path,
                                                               name: str) -> None:
    """Save after round 1 with the checkpoint writer, read it, run round 2 from both."""
    alg = _algorithm(name, {})
    state, _ = alg.round(alg.init(), 1)
    ckpt = Checkpointer(tmp_path / "run.ckpt", fingerprint="f", every=1)
    ckpt.save(1, state, MetricLog())
    loaded = ckpt.load(torch.device("cpu"))
    assert loaded is not None
    rnd, read, _ = loaded
    assert rnd == 1 and type(read) is dict and set(read) == set(state)
    again = _algorithm(name, {})
    again.init()  # what a resumed run does first (it also sets up derived fields)
    _, expected = alg.round(state, 2)
    _, resumed = again.round(read, 2)
    np.testing.assert_array_equal(resumed, expected)  # bit for bit, NaN where idle


class _Plain(TypedDict):
    value: int


class _Untyped(Algorithm):  # type: ignore[type-arg]
    name = "untyped"
    summary = "a method without a state type"

    def init(self) -> Any:
        return {}

    def round(self, state: Any, rnd: int) -> Any:
        return state, None

    def predict(self, state: Any, client: int, x: torch.Tensor, rnd: int) -> torch.Tensor:
        return x


class _Typed(_Untyped, Algorithm[_Plain]):
    name = "typed"


class _Inherits(_Typed):
    name = "inherits"


def test_state_type_reads_the_nearest_type_argument() -> None:
    assert state_type(_Typed) is _Plain
    assert state_type(_Inherits) is _Plain  # declared on a base class
    with pytest.raises(TypeError, match="declares no state type"):
        state_type(_Untyped)


def test_a_method_without_a_state_type_is_not_registered(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_Untyped, "__module__", "pflrepro.algorithms.untyped")
    with pytest.raises(TypeError, match="declares no state type"):
        register_algorithm(_Untyped)
    assert "untyped" not in LOADED
