"""Sizes and conflicting values are refused when the config is checked, naming the key.

Issue 27, items 9 and 10: a seed of 2**64, 10^12 local epochs, a hidden layer of 10^9
units, 10^12 rounds, a client fraction below one client per round, Adam with a
momentum, more FedeRiCo neighbours than other clients and a base-60 ``1:30`` were all
accepted by the config check and met at job time (OverflowError, std::bad_alloc, a
256 GB allocation, a projected 8.8 million hours) or silently changed. Each case
mutates the tiny workflow config (``tests/workflow/config.yaml``) and runs what
``common.smk`` and ``pflrepro check-config`` run: the schema, then
:func:`pflrepro.config.parse`; each bound is also held by ``parse`` alone.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from pflrepro.config import (
    MAX_SAMPLE_PASSES,
    SEED_LIMIT,
    ConfigError,
    check,
    check_config_files,
    load_config_file,
    model_parameters_lower_bound,
    parse,
    projected_sample_passes,
)

REPO = Path(__file__).resolve().parents[2]
TINY = yaml.safe_load((REPO / "tests/workflow/config.yaml").read_text())
SCHEMA = REPO / "workflow/schemas/config.schema.yaml"

Mutate = Callable[[dict[str, Any]], None]


def _exp(c: dict[str, Any]) -> dict[str, Any]:
    return c["experiments"]["tiny"]


def _mutated(mutate: Mutate) -> dict[str, Any]:
    raw = copy.deepcopy(TINY)
    mutate(raw)
    return raw


def _fedavg_only(fraction: float) -> Mutate:
    def mutate(c: dict[str, Any]) -> None:  # fedavg takes client sampling
        _exp(c).update(methods=["fedavg"], training={"client_fraction": fraction})
    return mutate


REFUSED: list[tuple[str, Mutate, str]] = [
    ("split_seed_2_64", lambda c: _exp(c).update(split_seeds=[2**64]),
     r"experiments\.tiny\.split_seeds"),
    ("train_seed_2_32", lambda c: _exp(c).update(train_seeds=[SEED_LIMIT]),
     r"experiments\.tiny\.train_seeds"),
    ("local_epochs_1e12", lambda c: c["training"].update(local_epochs=10**12),
     r"training\.local_epochs"),
    ("rounds_1e12", lambda c: c["training"].update(rounds=10**12), r"training\.rounds"),
    ("batch_size_huge", lambda c: c["training"].update(batch_size=10**9),
     r"training\.batch_size"),
    ("hidden_1e9", lambda c: c["training"]["model_options"].update(hidden=[10**9]),
     r"training\.model_options\.hidden"),
    ("experiment_hidden_1e9",
     lambda c: _exp(c).update(training={"model_options": {"hidden": [10**9]}}),
     r"experiments\.tiny\.training\.model_options\.hidden"),
    ("cnn_kernel_1000",
     lambda c: c["training"].update(model="cnn", model_options={"kernel_size": 1000}),
     r"training\.model_options\.kernel_size"),
    ("clients_1e6", lambda c: _exp(c)["partitions"][0].update(clients=10**6),
     r"experiments\.tiny\.partitions\[0\]\.clients"),
    ("fraction_1e-9", _fedavg_only(1e-9),
     r"experiments\.tiny\.training\.client_fraction: 1e-09 of the 4 clients .*fewer than "
     r"one client per round"),
    ("fraction_0.2_of_4", _fedavg_only(0.2),
     r"client_fraction: 0\.2 of the 4 clients .* is 0\.8"),
    ("adam_momentum", lambda c: c["training"].update(momentum=0.9),
     r"^training\.momentum: 0\.9 .*optimizer: adam"),
    ("experiment_adam_momentum", lambda c: _exp(c).update(training={"momentum": 0.5}),
     r"^experiments\.tiny\.training\.momentum"),
    ("federico_neighbors_100", lambda c: c["methods"]["federico"].update(neighbors=100),
     r"^methods\.federico\.neighbors: 100 other clients.*4 clients.*at most 3"),
    ("federico_neighbors_4", lambda c: c["methods"]["federico"].update(neighbors=4),
     r"^methods\.federico\.neighbors"),
    ("allow_huge_string", lambda c: c.update(allow_huge="yes please"), r"allow_huge"),
]


@pytest.mark.parametrize("mutate, message", [c[1:] for c in REFUSED],
                         ids=[c[0] for c in REFUSED])
def test_refused_naming_the_key(mutate: Mutate, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        check(_mutated(mutate), SCHEMA)


@pytest.mark.parametrize("mutate, message", [c[1:] for c in REFUSED if c[0] != "clients_1e6"],
                         ids=[c[0] for c in REFUSED if c[0] != "clients_1e6"])
def test_parse_alone_refuses_too(mutate: Mutate, message: str) -> None:
    # the checks hold without the schema (a config built in code, pflrepro run)
    with pytest.raises(ConfigError, match=message.removeprefix("^")):
        parse(_mutated(mutate))


@pytest.mark.parametrize("mutate", [
    lambda c: _exp(c).update(split_seeds=[SEED_LIMIT - 1]),
    lambda c: c["methods"]["federico"].update(neighbors=3),  # every other client
    _fedavg_only(0.25),  # exactly one of 4 clients
    lambda c: c["training"].update(optimizer="sgd", momentum=0.9),
    lambda c: c["training"].update(momentum=0.0),  # Adam with the default 0
    lambda c: c["training"]["model_options"].update(hidden=[65536]),
], ids=["largest_seed", "neighbors_3_of_4", "fraction_one_client", "sgd_momentum",
        "adam_momentum_0", "widest_hidden"])
def test_values_at_the_bounds_pass(mutate: Mutate) -> None:
    check(_mutated(mutate), SCHEMA)


def test_projected_passes_by_hand() -> None:
    # tiny: 2 partitions of 1500 samples among 4 clients, all 4 train each round, 1 local
    # epoch: 1500 passes a round, x 3 rounds x 2 partitions x 2 seed pairs x 4 methods
    exp = parse(copy.deepcopy(TINY)).experiments["tiny"]
    assert projected_sample_passes(exp) == 1500 * 3 * 2 * 2 * 4 == 72_000
    # local_steps: m clients x steps x batch: 4 x 5 x 32 a round
    raw = _mutated(lambda c: c["training"].update(local_steps=5))
    exp = parse(raw).experiments["tiny"]
    assert projected_sample_passes(exp) == 4 * 5 * 32 * 3 * 2 * 2 * 4


def test_huge_plan_is_refused_unless_allowed() -> None:
    # 1500 x 10^4 epochs x 10^5 rounds x 2 partitions x 2 seeds x 4 methods = 2.4e13
    def huge(c: dict[str, Any]) -> None:
        c["training"].update(rounds=100_000, local_epochs=10_000)

    with pytest.raises(ConfigError, match=r"experiments\.tiny: its runs would make 2\.4e\+13 "
                                          r"training-sample passes.*allow_huge: true"):
        check(_mutated(huge), SCHEMA)
    assert 2.4e13 > MAX_SAMPLE_PASSES
    cfg = check(_mutated(lambda c: (huge(c), c.update(allow_huge=True))), SCHEMA)
    assert projected_sample_passes(cfg.experiments["tiny"]) == 24 * 10**12


def test_parameter_lower_bound_by_hand() -> None:
    assert model_parameters_lower_bound("mlp", {"hidden": [10, 20]}) == 10 * 20 + 30
    assert model_parameters_lower_bound("mlp", {"hidden": []}) == 0
    # 8*16*3*3 second conv + 16*32 into the hidden layer + 2*32 out
    assert model_parameters_lower_bound(
        "cnn", {"channels": [8, 16], "hidden": 32, "kernel_size": 3}) == 1152 + 512 + 64
    with pytest.raises(ConfigError, match=r"at least 3_600_120_000 parameters"):
        parse(_mutated(lambda c: c["training"]["model_options"].update(
            hidden=[60_000, 60_000])))


@pytest.mark.parametrize("value, reads", [("1:30", "90"), ("-1:00:00", "-3600"),
                                          ("1:30.5", "90.5")])
def test_base_60_numbers_name_file_and_line(tmp_path: Path, value: str, reads: str) -> None:
    # YAML 1.1 reads an unquoted 1:30 as 90: `rounds: 1:30` ran 90 rounds
    path = tmp_path / "my.yaml"
    path.write_text(f"training:\n  lr: 0.1\n  rounds: {value}\n")
    assert yaml.safe_load(path.read_text())["training"]["rounds"] == float(reads)
    message = rf"^{re.escape(str(path))}:3:11: '{re.escape(value)}' is a base-60 number .*{reads}"
    with pytest.raises(ConfigError, match=message):
        load_config_file(path)
    with pytest.raises(ConfigError, match=message):  # the Snakefile's path
        check_config_files([path])


@pytest.mark.parametrize("value, reads, decimal", [("010", 8, "10"), ("-07", -7, "-7"),
                                                   ("0_10", 8, "10")])
def test_leading_zero_integers_name_file_and_line(tmp_path: Path, value: str, reads: int,
                                                  decimal: str) -> None:
    # YAML 1.1 reads an unquoted 010 as the octal 8: `rounds: 010` trained 8 rounds
    path = tmp_path / "my.yaml"
    path.write_text(f"training:\n  rounds: {value}\n")
    assert yaml.safe_load(path.read_text())["training"]["rounds"] == reads
    message = (rf"^{re.escape(str(path))}:2:11: '{value}' has a leading zero, which YAML "
               rf"1.1 reads as the octal number {reads}; write {decimal} ")
    with pytest.raises(ConfigError, match=message):
        load_config_file(path)


def test_zero_and_decimals_are_no_octal(tmp_path: Path) -> None:
    path = tmp_path / "my.yaml"
    path.write_text("a: 0\nb: 0.5\nc: 100\nd: '010'\ne: 0x10\n")
    assert load_config_file(path) == {"a": 0, "b": 0.5, "c": 100, "d": "010", "e": 16}


def test_quoted_or_plain_numbers_are_not_base_60(tmp_path: Path) -> None:
    path = tmp_path / "my.yaml"
    path.write_text("a: '1:30'\nb: 130\nc: 1.5\nd: '12:00'\ne: 10:00 am\n")
    assert load_config_file(path) == {"a": "1:30", "b": 130, "c": 1.5, "d": "12:00",
                                      "e": "10:00 am"}


def test_binary_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "model.pt"
    path.write_bytes(b"PK\x03\x04\x80\xff\x00binary")
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(path))}: not a text \(UTF-8\) "
                                          r"config file: byte 4"):
        load_config_file(path)


@pytest.mark.parametrize("path, overrides", [
    ("config.yaml", {}), ("config.yaml", {"scale": "cpu"}), ("config/demo.yaml", {}),
    ("config/convergence_fashion.yaml", {}), ("tests/workflow/config.yaml", {}),
])
def test_shipped_configs_pass_the_bounds(path: str, overrides: dict[str, Any]) -> None:
    raw = {**load_config_file(REPO / path), **overrides}
    cfg = check(raw, SCHEMA)
    assert max(map(projected_sample_passes, cfg.experiments.values())) < MAX_SAMPLE_PASSES
