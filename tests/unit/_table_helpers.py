"""Synthetic run tables for the accuracy and table tests (numbers checked by hand)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from pflrepro.store.results import GROUP, N_TEST, N_TRAIN, TEST_ACCURACY, WEIGHT, MetricLog


def make_run(
    accuracies: Mapping[int, Sequence[float]],
    n_test: Sequence[int] = (10, 30),
    *,
    method: str = "federico",
    partition: str = "label_groups-clients2-groups2",
    split_seed: int = 0,
    train_seed: int = 0,
    groups: Sequence[int] | None = None,
    weights: Mapping[int, np.ndarray] | None = None,
    dataset: str = "cifar10",
    experiment: str = "table1",
    with_n_test: bool = True,
) -> pd.DataFrame:
    """One synthetic run table: ``accuracies[round][client]``, sizes at round 0."""
    log = MetricLog()
    if with_n_test:
        log.add_per_client(0, N_TEST, n_test)
    log.add_per_client(0, N_TRAIN, [4 * n for n in n_test])
    log.add_per_client(0, GROUP, groups if groups is not None else [-1] * len(n_test))
    for round_, accs in accuracies.items():
        log.add_per_client(round_, TEST_ACCURACY, accs)
    for round_, matrix in (weights or {}).items():
        log.add_matrix(round_, WEIGHT, matrix)
    config = {
        "experiment": experiment, "dataset": dataset, "partition": partition,
        "method": method, "algorithm": method, "params": "default",
        "split_seed": split_seed, "train_seed": train_seed,
        "client_training": "loop", "package_version": "0.1.0", "git_revision": "abc",
    }
    return log.to_frame(config)


def two_run_aggregate() -> pd.DataFrame:
    """fedavg: two runs ending at 0.8 and 0.6; federico: one run ending at 0.5."""
    return pd.concat([
        make_run({0: [0.1, 0.1], 5: [0.5, 0.9]}, method="fedavg", split_seed=0),
        make_run({0: [0.1, 0.1], 5: [0.3, 0.7]}, method="fedavg", split_seed=1),
        make_run({0: [0.1, 0.1], 5: [0.5, 0.5]}, method="federico"),
    ], ignore_index=True)
