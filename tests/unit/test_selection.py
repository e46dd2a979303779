"""Client selection per round: uniform, by data size, shuffled (random reshuffling)."""

from collections import Counter

import pytest
import torch

from pflrepro.seeding import NO_CLIENT, torch_generator
from pflrepro.training.selection import participants, round_size, shuffled
from pflrepro.training.settings import TrainingConfig


def test_round_size():
    assert [round_size(c, k) for c, k in ((0.1, 50), (0.15, 50), (0.25, 10), (0.01, 10))] \
        == [5, 8, 2, 1]


def test_everyone_at_full_participation():
    for selection in ("uniform", "data_size", "shuffled"):
        assert participants(selection, 1.0, [3, 1, 2], 0, 4) == [0, 1, 2]


def test_uniform_is_the_seeded_permutations_head():
    # the draw the engine has always made: the first m of a permutation seeded by
    # (seed, round, 'participants')
    gen = torch_generator(7, 3, NO_CLIENT, "participants")
    expected = sorted(torch.randperm(10, generator=gen)[:2].tolist())
    assert participants("uniform", 0.25, [4] * 10, 7, 3) == expected


def test_data_size_draws_big_clients_more():
    # p_k = n_k / n: client 0 holds 97 of 100 samples; with m = 1 it is drawn about
    # 97 % of the rounds (expected 194 of 200, sd 2.4)
    counts = Counter(k for r in range(1, 201)
                     for k in participants("data_size", 0.25, [97, 1, 1, 1], 0, r))
    assert 180 <= counts[0] <= 200 and sum(counts.values()) == 200
    with pytest.raises(ValueError, match="training sample"):
        participants("data_size", 0.5, [3, 0], 0, 1)


def test_shuffled_draws_each_client_once_per_pass():
    # K = 5, m = 2: rounds 1-5 hold 10 draws, two passes; every client twice, never
    # twice in one round, and all five by round ceil(5 / 2) = 3
    rounds = [shuffled(5, 2, 0, r) for r in range(1, 6)]
    assert all(len(p) == 2 == len(set(p)) for p in rounds)
    assert Counter(k for p in rounds for k in p) == dict.fromkeys(range(5), 2)
    assert set().union(*rounds[:3]) == set(range(5))
    assert rounds == [participants("shuffled", 0.4, [1] * 5, 0, r) for r in range(1, 6)]
    assert shuffled(5, 2, 1, 1) != rounds[0] or shuffled(5, 2, 1, 2) != rounds[1]


def test_cpu_design_never_trains_some_clients_under_uniform_only():
    # PerFed-CKT's CPU design: 50 clients, C = 0.1, 20 rounds, training seed 0.
    # Uniform sampling leaves 4 clients never drawn (P = 0.9^20 = 12 % each);
    # shuffled draws every client by round 10
    def drawn(selection, last):
        return set().union(*(participants(selection, 0.1, [10] * 50, 0, r)
                             for r in range(1, last + 1)))
    assert 50 - len(drawn("uniform", 20)) == 4
    assert len(drawn("shuffled", 10)) == 50


def test_training_config_keys():
    t = TrainingConfig(rounds=2)
    assert (t.client_selection, t.eval_test) == ("uniform", "own")
    # at their defaults the keys stay out of the spec (run digests as before them)
    assert "client_selection" not in t.to_dict() and "eval_test" not in t.to_dict()
    t = TrainingConfig(rounds=2, client_selection="shuffled", eval_test="global")
    assert t.to_dict()["client_selection"] == "shuffled" and t.to_dict()["eval_test"] == "global"
    with pytest.raises(ValueError, match="client_selection"):
        TrainingConfig(rounds=2, client_selection="size")
    with pytest.raises(ValueError, match="eval_test"):
        TrainingConfig(rounds=2, eval_test="pooled")


def test_perfedckt_cpu_designs_train_every_client():
    # config.yaml's PerFed-CKT CPU experiments: every client drawn at least once in its
    # rounds for every training seed (uniform draws left 4 of 50 out at C = 0.1)
    from pathlib import Path

    from pflrepro.config.files import load_config_file
    from pflrepro.config.parsing import parse

    cfg = parse(load_config_file(Path(__file__).parents[2] / "config.yaml"))
    names = [n for n, e in cfg.experiments.items()
             if n.startswith("perfedckt") and e.scale == "cpu"]
    assert len(names) == 4
    for name in names:
        exp = cfg.experiments[name]
        t, clients = exp.training, exp.partitions[0].clients
        for seed in exp.train_seeds:
            drawn = set().union(*(participants(t.client_selection, t.client_fraction,
                                               [1] * clients, seed, r)
                                  for r in range(1, t.rounds + 1)))
            assert len(drawn) == clients, (name, seed)
