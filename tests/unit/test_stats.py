import numpy as np
import pandas as pd
import pytest

from pflrepro.data.partition import PARTITIONERS, from_spec
from pflrepro.data.stats import partition_stats, summary_stats

LABELS = np.array([0, 0, 1, 2, 2, 2, 1, 0])


def toy_frame() -> pd.DataFrame:
    # client 0: samples 0,1,2 (labels 0,0,1); client 2: samples 3,4,5,6 (2,2,2,1); client 1 empty
    return pd.DataFrame({
        "client": np.array([0, 0, 0, 2, 2, 2, 2], dtype=np.int32),
        "index": np.array([0, 1, 2, 3, 4, 5, 6], dtype=np.int64),
        "split": pd.array(["train", "test", "train", "train", "train", "test", "test"],
                          dtype="string"),
        "group": np.array([1, 1, 1, 0, 0, 0, 0], dtype=np.int32),
    })


def test_partition_stats_by_hand():
    stats = partition_stats(toy_frame(), LABELS, 3)
    assert list(stats.columns) == ["client", "group", "n_train", "n_test", "n", "n_labels",
                                   "label_0", "label_1", "label_2"]
    assert stats.to_dict("list") == {
        "client": [0, 1, 2], "group": [1, -1, 0], "n_train": [2, 0, 2], "n_test": [1, 0, 2],
        "n": [3, 0, 4], "n_labels": [2, 0, 2],
        "label_0": [2, 0, 0], "label_1": [1, 0, 1], "label_2": [0, 0, 3],
    }


def test_summary_by_hand():
    summary = summary_stats(partition_stats(toy_frame(), LABELS, 3))
    # client 0 in group 1, client 2 in group 0; client 1 has no rows (group -1)
    assert summary == {"clients": 3, "samples_min": 0, "samples_median": 3.0,
                       "samples_max": 4, "labels_min": 0, "labels_median": 2.0,
                       "labels_max": 2, "empty_clients": 1,
                       "clients_per_group": {0: 1, 1: 1}}
    per_group = summary.pop("clients_per_group")
    assert all(type(v) in (int, float) for v in summary.values())
    assert all(type(k) is int and type(v) is int for k, v in per_group.items())


def test_clients_per_group_counts_clients_by_hand():
    # groups 2, 0, 2, 2, -1: group 1 has no client, the last client no distribution
    per_client = pd.DataFrame({"client": range(5), "group": [2, 0, 2, 2, -1],
                               "n": [4, 4, 4, 4, 4], "n_labels": [1, 1, 1, 1, 1]})
    assert summary_stats(per_client)["clients_per_group"] == {0: 1, 1: 0, 2: 3}


def test_no_clients_per_group_without_distributions():
    per_client = pd.DataFrame({"client": range(3), "group": [-1, -1, -1],
                               "n": [4, 4, 4], "n_labels": [1, 1, 1]})
    assert "clients_per_group" not in summary_stats(per_client)


def test_empty_frame():
    frame = toy_frame().iloc[:0]
    stats = partition_stats(frame, LABELS, 3)
    assert len(stats) == 0
    assert summary_stats(stats)["clients"] == 0


def test_labels_out_of_range():
    with pytest.raises(ValueError, match="labels must lie"):
        partition_stats(toy_frame(), LABELS, 2)


SPECS = [
    {"scheme": "iid", "clients": 10},
    {"scheme": "label_groups", "clients": 10, "groups": 3, "alpha": 0.4},
    {"scheme": "dirichlet", "clients": 30, "alpha": 0.01},
    {"scheme": "pathological", "clients": 10},
    {"scheme": "practical", "clients": 10, "groups": 5},
    {"scheme": "rotation", "clients": 10, "groups": 2, "angles": [0, 180]},
    {"scheme": "label_permutation", "clients": 10, "groups": 3},
    {"scheme": "natural", "clients": 10},
    {"scheme": "domains", "clients": 10},
]
#: per-sample arrays for the schemes that need them (others ignore them)
EXTRAS = {"writer": np.arange(500) % 40, "domain": np.arange(500) % 4}


def test_specs_cover_every_scheme():
    assert {s["scheme"] for s in SPECS} == set(PARTITIONERS)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s["scheme"])
def test_every_scheme_has_no_empty_client(spec):
    labels = np.random.default_rng(0).permutation(np.repeat(np.arange(10), 50))
    p = from_spec(spec)
    frame = p.split(labels, 10, seed=4, extras=EXTRAS)
    stats = partition_stats(frame, labels, 10)
    assert len(stats) == p.clients
    assert (stats["n"] == stats["n_train"] + stats["n_test"]).all()
    assert (stats[[f"label_{c}" for c in range(10)]].sum(axis=1) == stats["n"]).all()
    assert (stats["n_labels"] == (stats[[f"label_{c}" for c in range(10)]] > 0).sum(axis=1)).all()
    summary = summary_stats(stats)
    assert summary["empty_clients"] == 0
    assert summary["samples_min"] >= 2
    assert summary["clients"] == p.clients
    has_groups = (frame["group"] >= 0).any()
    assert ("clients_per_group" in summary) == has_groups
    if has_groups:  # one count per distribution id, summing to the clients
        per_group = summary["clients_per_group"]
        assert list(per_group) == list(range(int(frame["group"].max()) + 1))
        assert sum(per_group.values()) == p.clients
        assert per_group == frame.groupby("group")["client"].nunique().to_dict()
