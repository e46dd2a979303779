"""What the reporting commands read (pflrepro.cli.inputs): aggregates and the labels JSON."""

from __future__ import annotations

import argparse

import pytest

from pflrepro.cli.inputs import labels_json, labels_of, read_aggregates, with_method_labels


def test_labels_of_splits_partitions_and_experiments() -> None:
    text = ('{"partitions": {"p1": "Practical"}, "experiments": {"e": "Exp. 1"}, '
            '"methods": {"fedavg": "FedAvg"}}')
    assert labels_of(text) == ({"p1": "Practical"}, {"e": "Exp. 1"})
    assert labels_of(None) == ({}, {})
    assert labels_json(text)["methods"] == {"fedavg": "FedAvg"}


@pytest.mark.parametrize("text, message", [
    ('{"partitions": ', "--labels: not JSON"),
    ("[1, 2]", "a JSON object is expected, got list"),
    ('{"colours": {}}', "unknown key(s) ['colours']"),
    ('{"methods": ["fedavg"]}', "'methods' must map ids to labels"),
])
def test_a_malformed_labels_json_is_one_message(text: str, message: str) -> None:
    with pytest.raises(ValueError) as err:
        labels_json(text)
    assert message in str(err.value)


def test_no_aggregate_is_an_error() -> None:
    with pytest.raises(ValueError, match="no aggregate given"):
        read_aggregates([])


def test_with_method_labels_puts_the_labels_in_force_while_the_command_runs() -> None:
    from pflrepro.reporting.names import method_name

    seen = []

    def command(args: argparse.Namespace) -> None:
        seen.append(method_name("fedavg"))

    run = with_method_labels(command)
    run(argparse.Namespace(labels='{"methods": {"fedavg": "Plain averaging"}}'))
    assert seen == ["Plain averaging"]
    assert method_name("fedavg") != "Plain averaging"  # only while the command ran
