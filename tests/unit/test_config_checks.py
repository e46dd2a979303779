"""Config files checked as files: the bad key's file and line, periodic names refused."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pflrepro.config import ConfigError, check_config_paths
from pflrepro.config_checks import periodic_piece
from pflrepro.schema import build_schema

TINY = Path(__file__).parents[1] / "workflow" / "config.yaml"


def test_an_unknown_key_names_its_file_and_line(tmp_path: Path) -> None:
    # "unknown key 'roundz' at training; known: ..." named neither file nor line
    mine = tmp_path / "my.yaml"
    mine.write_text("# my overrides\ntraining:\n  lr: 0.1\n  roundz: 5\n")
    with pytest.raises(ConfigError, match=rf"^{mine}:4: unknown key 'roundz' at training; "
                                          r"known: "):
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
