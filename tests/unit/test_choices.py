"""The one-line error of a setting outside its choices, and its near miss, here and in
every check that uses it."""

from __future__ import annotations

import pytest

from pflrepro.algorithms.registry import INFOS, parse_hyper
from pflrepro.choices import did_you_mean, require_choice
from pflrepro.data.schemes.label_groups import LabelGroupsPartitioner
from pflrepro.data.schemes.pathological import PathologicalPartitioner
from pflrepro.training.settings import TrainingConfig


def test_a_choice_is_returned_as_it_is() -> None:
    assert require_choice("sum", ("sum", "mean"), "x") == "sum"
    columns = ("experiment", "partition")
    assert require_choice(columns, [("partition",), columns], "x") is columns


@pytest.mark.parametrize(("value", "message"), [
    # "meen": difflib's ratio to "mean" is 2·3/8 = 0.75, at the cutoff: named
    ("meen", "estep_loss must be one of ['sum', 'mean'], got 'meen'; did you mean 'mean'?"),
    # "avg": no choice within the cutoff, no hint
    ("avg", "estep_loss must be one of ['sum', 'mean'], got 'avg'"),
    # not text: no hint, the value as repr
    (3, "estep_loss must be one of ['sum', 'mean'], got 3"),
])
def test_the_message_names_the_choices_the_value_and_a_near_miss(value: object,
                                                                 message: str) -> None:
    with pytest.raises(ValueError) as err:
        require_choice(value, ("sum", "mean"), "estep_loss")
    assert str(err.value) == message


def test_two_near_misses_closest_first() -> None:
    # "shard" to "shards" 10/11, to "shard_s" 10/12: both above 0.75, the closer first
    assert did_you_mean("shard", ["shard_s", "label", "shards"]) == (
        "; did you mean 'shards' or 'shard_s'?")
    assert did_you_mean("x", ["label"]) == ""


def test_a_tuple_value_gets_no_near_miss() -> None:
    with pytest.raises(ValueError) as err:
        require_choice(("partitions",), [("partition",)], "table: columns")
    assert str(err.value) == ("table: columns must be one of [('partition',)], "
                              "got ('partitions',)")


@pytest.mark.parametrize(("build", "message"), [
    (lambda: TrainingConfig(rounds=1, device="gpu"),
     "training.device must be one of ['auto', 'cpu', 'cuda'], got 'gpu'"),
    (lambda: TrainingConfig(rounds=1, client_training="vmaps"),
     "training.client_training must be one of ['auto', 'loop', 'vmap'], got 'vmaps'; "
     "did you mean 'vmap'?"),
    (lambda: TrainingConfig(rounds=1, eval_test="finl"),
     "training.eval_test must be one of ["),
    (lambda: TrainingConfig(rounds=1, client_selection="uniformly"),
     "training.client_selection must be one of ["),
    (lambda: TrainingConfig(rounds=1, architecture_assignment="cycle"),
     "training.architecture_assignment must be one of ["),
    (lambda: LabelGroupsPartitioner(clients=4, groups=2, assignment="balance"),
     "label_groups: assignment must be one of ['random', 'balanced'], got 'balance'; "
     "did you mean 'balanced'?"),
    (lambda: LabelGroupsPartitioner(clients=4, groups=2, sizes="equals"),
     "label_groups: sizes must be one of ["),
    (lambda: PathologicalPartitioner(clients=4, shards="sorted_"),
     "pathological: shards must be one of ["),
    (lambda: parse_hyper(INFOS["federico"], {"estep_loss": "meen"}),
     "algorithm 'federico': hyperparameter 'estep_loss' must be one of ['sum', 'mean'], "
     "got 'meen'; did you mean 'mean'?"),
])
def test_every_choice_check_gives_the_one_line(build, message: str) -> None:
    with pytest.raises(ValueError) as err:
        build()
    assert str(err.value).startswith(message) and "\n" not in str(err.value)
