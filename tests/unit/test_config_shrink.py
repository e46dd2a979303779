"""The one helper that shrinks a config for benchmarks and test tiers keeps it valid."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pflrepro.config import ConfigError, parse
from pflrepro.config.shrink import shrink_config, shrink_experiment

REPO = Path(__file__).resolve().parents[2]
RAW = yaml.safe_load((REPO / "config.yaml").read_text())
#: config.yaml building its CPU scale (the experiments below are CPU-scale ones).
CPU = {**RAW, "scale": "cpu"}


def test_every_experiment_of_config_yaml_shrinks_to_one_round_and_stays_valid() -> None:
    # what broke run_all.py --quick: rounds lowered under a tune block's budget
    small = shrink_config(RAW, rounds=1, split_seeds=1, train_seeds=1, partitions=1)
    cfg = parse(small)
    assert set(cfg.experiments) == set(RAW["experiments"])
    for name, exp in cfg.experiments.items():
        assert exp.training.rounds == 1, name
        assert len(exp.split_seeds) == len(exp.train_seeds) == len(exp.partitions) == 1
        if exp.tune is not None:
            assert exp.tune.rounds == 1, name
    assert parse(RAW).experiments["federico_table1_cpu_digits"].tune.rounds == 30  # untouched


def test_the_tuning_budget_keeps_its_share_of_the_rounds() -> None:
    exps = RAW["experiments"]
    small = shrink_config(RAW, experiments=["fedamp_iid_mnist", "federico_table1_cpu_digits"],
                          rounds=20)
    cfg = parse(small)
    # 50 of 200 rounds -> 5 of 20; 30 of 30 -> 20 of 20
    assert exps["fedamp_iid_mnist"]["tune"]["rounds"] == 50
    assert cfg.experiments["fedamp_iid_mnist"].tune.rounds == 5
    assert cfg.experiments["federico_table1_cpu_digits"].tune.rounds == 20
    fixed = shrink_config(RAW, experiments=["fedamp_iid_mnist"], rounds=20, tune_rounds=1)
    assert parse(fixed).experiments["fedamp_iid_mnist"].tune.rounds == 1
    # rounds are never raised, nor the budget past them
    same = shrink_config(RAW, experiments=["fedamp_iid_mnist"], rounds=10_000)
    assert parse(same).experiments["fedamp_iid_mnist"].training.rounds == 200


def test_grids_follow_the_methods_kept() -> None:
    name = "federico_table1_cpu_digits"  # tunes clustered_fl's eps1, eps2
    keep = shrink_config(CPU, experiments=[name], methods=["fedavg", "clustered_fl"])
    assert list(keep["experiments"][name]["tune"]["methods"]) == ["clustered_fl"]
    gone = shrink_config(CPU, experiments=[name], methods=["fedavg"])
    assert "tune" not in gone["experiments"][name]
    assert parse(gone).experiments[name].methods == ("fedavg",)
    # a shared training grid goes with the method that tunes it (FedMix: lr by fedavg)
    fedmix = "fedmix_label_skew_cpu"
    by = RAW["experiments"][fedmix]["tune"]["training"]["by"]
    others = [m for m in RAW["experiments"][fedmix]["methods"] if m != by]
    small = shrink_config(CPU, experiments=[fedmix], methods=others)
    assert "tune" not in small["experiments"][fedmix]


def test_tables_keep_only_the_kept_experiments() -> None:
    small = shrink_config(CPU, experiments=["federico_table1_cpu_digits"])
    assert small["tables"]["federico_table1_cpu"]["experiments"] == \
        ["federico_table1_cpu_digits"]
    assert all(set(t["experiments"]) == {"federico_table1_cpu_digits"}
               for t in small["tables"].values())
    with pytest.raises(ConfigError, match=r"no experiment\(s\) \['nope'\]"):
        shrink_config(RAW, experiments=["nope"])


def test_paired_seeds_shrink_together() -> None:
    exp = {"split_seeds": [0, 1, 2], "train_seeds": [5, 6, 7], "seed_pairing": "paired",
           "tune": {"rounds": 4, "seeds": [0, 1], "methods": {"m": {"k": [1, 2]}}},
           "methods": ["m"], "training": {"rounds": 8}}
    new = shrink_experiment(exp, {}, split_seeds=2, train_seeds=1, rounds=2)
    assert new["split_seeds"] == [0] and new["train_seeds"] == [5]
    assert new["tune"]["rounds"] == 1 and new["tune"]["seeds"] == [0]
    assert exp["split_seeds"] == [0, 1, 2] and exp["tune"]["rounds"] == 4  # a copy


def test_an_invalid_result_fails_where_it_is_made() -> None:
    # a tuning budget of 0 rounds: the config parser's own error, naming the key
    with pytest.raises(ConfigError, match=r"the shrunk config is invalid: experiments\."
                       r"federico_table1_cpu_digits\.tune\.rounds: must be 1\.\.2"):
        shrink_config(CPU, experiments=["federico_table1_cpu_digits"], rounds=2, tune_rounds=0)
    # the config's scale must keep an experiment
    with pytest.raises(ConfigError, match="no experiment has scale 'paper'"):
        shrink_config(RAW, experiments=["federico_table1_cpu_digits"])
