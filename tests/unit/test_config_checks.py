"""Config files checked as files: the bad key's file and line, periodic names refused."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pflrepro.config import ConfigError, check_config_paths
from pflrepro.config.errors import periodic_piece
from pflrepro.config.schema import build_schema

TINY = Path(__file__).parents[1] / "workflow" / "config.yaml"


def test_an_unknown_key_names_its_file_and_line(tmp_path: Path) -> None:
    # "unknown key 'roundz' at training; known: ..." named neither file nor line
    mine = tmp_path / "my.yaml"
    mine.write_text("# my overrides\ntraining:\n  lr: 0.1\n  roundz: 5\n")
    with pytest.raises(ConfigError, match=rf"^{mine}:4: unknown key 'roundz' at training; "
                                          r"did you mean 'rounds'\?; known: "):
        check_config_paths([TINY, mine], build_schema())


def test_a_bad_value_names_the_last_file_that_sets_it(tmp_path: Path) -> None:
    first, second = tmp_path / "a.yaml", tmp_path / "b.yaml"
    first.write_text("training:\n  rounds: 3\n")
    second.write_text("\n\ntraining:\n  rounds: -1\n")
    with pytest.raises(ConfigError, match=rf"^{second}:4: "):
        check_config_paths([TINY, first, second], build_schema())


@pytest.mark.parametrize("name, piece, times", [
    ("e" * 20, "e", 20), ("ab" * 20, "ab", 20), ("x" + "abc" * 21, "abc", 21)])
def test_periodic_names_are_refused(tmp_path: Path, name: str, piece: str, times: int) -> None:
    # check-config said "valid", then the dry run stopped with PeriodicWildcardError
    assert periodic_piece(name) == (piece, times)
    config = yaml.safe_load(TINY.read_text())
    config["experiments"][name] = config["experiments"].pop("tiny")
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(ConfigError, match=rf"experiment '{name}' ends in '{piece}' repeated "
                                          rf"{times} times: .*PeriodicWildcardError"):
        check_config_paths([path], build_schema())


@pytest.mark.parametrize("name", ["e" * 19, "abab", "tiny", "fedavg_eps0.1"])
def test_ordinary_names_pass(name: str) -> None:
    assert periodic_piece(name) is None


# ------------------------------------------------------------------ messages that help
@pytest.mark.parametrize("text", ["methods:\n  on:\n    algorithm: fedavg\n",
                                  "experiments:\n  tiny:\n    methods: [on]\n"])
def test_a_name_read_as_a_boolean_says_so(tmp_path: Path, text: str) -> None:
    # "True is not of type 'string'" for a method named on
    path = tmp_path / "on.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=r"True.*YAML's reading of an unquoted on/off, "
                                          r"yes/no, true/false, y/n: quote a name"):
        check_config_paths([TINY, path], build_schema())


@pytest.mark.parametrize("rounds", [-1, 0])
def test_one_bound_one_wording(tmp_path: Path, rounds: int) -> None:
    # -1: "less than the minimum of 0"; 0: "training.rounds must be >= 1, got 0"
    path = tmp_path / "r.yaml"
    path.write_text(f"training:\n  rounds: {rounds}\n")
    with pytest.raises(ConfigError, match=rf"^{path}:2: training\.rounds: {rounds} is less "
                                          r"than the minimum of 1$"):
        check_config_paths([TINY, path], build_schema())


def test_a_nested_config_string_says_how_to_set_it() -> None:
    # Snakemake passes --config 'training={rounds: 5}' as {'rounds': '5'}
    from pflrepro.config import check

    raw = yaml.safe_load(TINY.read_text())
    raw["training"] = {**raw.get("training", {}), "rounds": "5"}
    with pytest.raises(ConfigError, match=r"'5' is not of type 'integer' \(a string where a "
                                          r"number or boolean belongs: Snakemake passes the "
                                          r"values of a nested --config .*--configfile"):
        check(raw, build_schema())
