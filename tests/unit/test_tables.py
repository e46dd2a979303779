"""Accuracy tables from small synthetic aggregates whose numbers are checked by hand."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import pytest

from pflrepro.reporting.tables import (
    accuracy_table,
    final_accuracy,
    weighted_accuracy_per_round,
    write_table,
)
from pflrepro.results import GROUP, N_TEST, N_TRAIN, TEST_ACCURACY, WEIGHT, MetricLog


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
        "package_version": "0.1.0", "git_revision": "abc",
    }
    return log.to_frame(config)


def two_run_aggregate() -> pd.DataFrame:
    """fedavg: two runs ending at 0.8 and 0.6; federico: one run ending at 0.5."""
    return pd.concat([
        make_run({0: [0.1, 0.1], 5: [0.5, 0.9]}, method="fedavg", split_seed=0),
        make_run({0: [0.1, 0.1], 5: [0.3, 0.7]}, method="fedavg", split_seed=1),
        make_run({0: [0.1, 0.1], 5: [0.5, 0.5]}, method="federico"),
    ], ignore_index=True)


# ------------------------------------------------------------------ per round / final
def test_weighted_accuracy_by_hand() -> None:
    agg = make_run({0: [0.0, 0.2], 3: [0.5, 0.9]})
    out = weighted_accuracy_per_round(agg)
    assert out["round"].tolist() == [0, 3]
    # (0.5*10 + 0.9*30) / 40 = 0.8; unweighted (0.5 + 0.9) / 2 = 0.7
    assert out["weighted_accuracy"].tolist() == pytest.approx([0.15, 0.8])
    assert out["mean_accuracy"].tolist() == pytest.approx([0.1, 0.7])
    assert out["clients"].tolist() == [2, 2]
    assert out["n_test"].tolist() == [40, 40]
    assert out["method"].tolist() == ["federico", "federico"]


def test_weights_and_clients_without_test_set_are_ignored() -> None:
    agg = make_run({0: [0.5, 0.9, float("nan")]}, n_test=(10, 30, 0),
                   weights={0: np.eye(3)})
    out = weighted_accuracy_per_round(agg)
    assert out["weighted_accuracy"].item() == pytest.approx(0.8)
    assert out["mean_accuracy"].item() == pytest.approx(0.7)
    assert out["clients"].item() == 2


def test_final_accuracy_is_last_round_per_run() -> None:
    final = final_accuracy(two_run_aggregate())
    assert len(final) == 3
    assert set(final["round"]) == {5}
    got = dict(zip(zip(final["method"], final["split_seed"], strict=True),
                   final["weighted_accuracy"], strict=True))
    assert got == pytest.approx({("fedavg", 0): 0.8, ("fedavg", 1): 0.6, ("federico", 0): 0.5})


def test_missing_metrics_raise() -> None:
    agg = make_run({0: [0.5, 0.9]}, with_n_test=False)
    with pytest.raises(ValueError, match="n_test"):
        weighted_accuracy_per_round(agg)
    no_acc = make_run({})
    with pytest.raises(ValueError, match="test_accuracy"):
        final_accuracy(no_acc)
    with pytest.raises(ValueError, match="test_accuracy"):
        accuracy_table(no_acc)
    with pytest.raises(ValueError, match="lacks column"):
        weighted_accuracy_per_round(pd.DataFrame({"metric": ["x"]}))
    with pytest.raises(ValueError, match="empty"):
        weighted_accuracy_per_round(make_run({}).iloc[:0])


def test_client_without_n_test_raises() -> None:
    agg = make_run({0: [0.5, 0.9]})
    agg = agg[~((agg["metric"] == N_TEST) & (agg["client"] == 1))]
    with pytest.raises(ValueError, match=r"client\(s\) \[1\]"):
        weighted_accuracy_per_round(agg)


def test_duplicate_accuracy_raises() -> None:
    run = make_run({0: [0.5, 0.9]})
    with pytest.raises(ValueError, match="twice"):
        weighted_accuracy_per_round(pd.concat([run, run]))


# ------------------------------------------------------------------ accuracy table
def test_accuracy_table_mean_std_n() -> None:
    table = accuracy_table(two_run_aggregate())
    part = "label_groups-clients2-groups2"
    assert list(table.index) == ["fedavg", "federico"]
    assert table.loc["fedavg", (part, "mean")] == pytest.approx(70.0)
    assert table.loc["fedavg", (part, "std")] == pytest.approx(math.sqrt(200.0))  # 14.14
    assert table.loc["fedavg", (part, "n")] == 2
    assert table.loc["federico", (part, "mean")] == pytest.approx(50.0)
    assert math.isnan(table.loc["federico", (part, "std")])
    assert table.loc["federico", (part, "n")] == 1


def test_accuracy_table_order_and_empty_cells() -> None:
    agg = pd.concat([
        two_run_aggregate(),
        make_run({4: [1.0, 0.0]}, method="local", partition="label_groups-clients2-groups10"),
        make_run({4: [1.0, 0.0]}, method="local", partition="label_groups-clients2-groups4"),
    ], ignore_index=True)
    table = accuracy_table(agg, methods_order=["local", "federico"])
    # listed methods first, the rest in natural order; partitions naturally sorted
    assert list(table.index) == ["local", "federico", "fedavg"]
    assert list(dict.fromkeys(table.columns.get_level_values(0))) == [
        "label_groups-clients2-groups2", "label_groups-clients2-groups4",
        "label_groups-clients2-groups10"]
    assert table.loc["local", ("label_groups-clients2-groups4", "mean")] == pytest.approx(25.0)
    assert table.loc["local", ("label_groups-clients2-groups2", "n")] == 0
    assert math.isnan(table.loc["local", ("label_groups-clients2-groups2", "mean")])
    with pytest.raises(ValueError, match="fedprox"):
        accuracy_table(agg, methods_order=["fedprox"])
    with pytest.raises(ValueError, match="twice"):
        accuracy_table(agg, partitions_order=["label_groups-clients2-groups2"] * 2)


def test_accuracy_table_rejects_incomparable_cells() -> None:
    base = make_run({5: [0.5, 0.9]})
    other_dataset = make_run({5: [0.5, 0.9]}, dataset="cifar100", split_seed=1)
    with pytest.raises(ValueError, match="different settings"):
        accuracy_table(pd.concat([base, other_dataset]))
    same_seeds = make_run({5: [0.5, 0.9]})
    same_seeds["git_revision"] = "def"
    with pytest.raises(ValueError, match="same seeds twice"):
        accuracy_table(pd.concat([base, same_seeds]))
    shorter = make_run({3: [0.5, 0.9]}, split_seed=1)
    with pytest.raises(ValueError, match="different rounds"):
        accuracy_table(pd.concat([base, shorter]))


# ------------------------------------------------------------------ writing
def test_write_table(tmp_path) -> None:
    agg = pd.concat([
        two_run_aggregate(),
        make_run({0: [0.0, 0.0], 5: [0.4, 0.6]}, method="federico", split_seed=1),
        make_run({5: [0.2, 0.2]}, method="fed_x", partition="dir_alpha0.1"),
    ], ignore_index=True)
    table = accuracy_table(agg, methods_order=["fedavg", "federico", "fed_x"])
    md, tex, csv = tmp_path / "t.md", tmp_path / "sub" / "t.tex", tmp_path / "t.csv"
    write_table(table, md, tex, csv, caption="Test accuracy, 50% clients_per_round")

    text = md.read_text()
    assert "Table: Test accuracy, 50% clients_per_round" in text
    # federico: (0.5, and (0.4*10+0.6*30)/40 = 0.55) -> 52.5 ± 3.5
    assert "| fedavg | — | 70.0 ± 14.1 |" in text
    assert "| federico | — | 52.5 ± 3.5 |" in text
    assert "| fed\\_x |" not in text and "| fed_x | 20.0 ± n/a (n=1) | — |" in text
    assert "n = 1–2; n = 2 unless marked" in text
    assert "n/a: a single run" in text

    latex = tex.read_text()
    assert "\\toprule" in latex and "\\midrule" in latex and "\\bottomrule" in latex
    assert "\\begin{tabular}{lrr}" in latex
    assert "\\caption{Test accuracy, 50\\% clients\\_per\\_round}" in latex
    assert "fed\\_x & 20.0 $\\pm$ n/a (n=1) & --- \\\\" in latex
    assert "label\\_groups-clients2-groups2" in latex
    assert "(\\%)" in latex  # the note's percent sign must not start a comment

    tidy = pd.read_csv(csv)
    assert list(tidy.columns) == ["method", "partition", "mean", "std", "n"]
    assert len(tidy) == 3  # empty cells are left out
    row = tidy[tidy["method"] == "fedavg"].iloc[0]
    assert (row["partition"], row["mean"], row["n"]) == ("label_groups-clients2-groups2",
                                                         pytest.approx(70.0), 2)
    assert row["std"] == pytest.approx(14.1421356)
    assert math.isnan(tidy[tidy["method"] == "fed_x"]["std"].item())
    assert not list(tmp_path.glob(".*.tmp")) and not list((tmp_path / "sub").glob(".*.tmp"))


def test_write_table_uniform_n_note(tmp_path) -> None:
    agg = pd.concat([make_run({1: [0.5, 0.9]}, split_seed=s) for s in range(3)])
    write_table(accuracy_table(agg), tmp_path / "t.md", tmp_path / "t.tex", tmp_path / "t.csv",
                caption="c")
    text = (tmp_path / "t.md").read_text()
    assert "80.0 ± 0.0 |" in text
    assert "over n = 3 runs (split seeds × train seeds) per cell." in text
    assert "(n=" not in text.split("\n\n")[1]


def test_write_table_rejects_malformed_table(tmp_path) -> None:
    paths = (tmp_path / "t.md", tmp_path / "t.tex", tmp_path / "t.csv")
    with pytest.raises(ValueError, match="accuracy_table"):
        write_table(pd.DataFrame({"a": [1.0]}), *paths, caption="c")
    table = accuracy_table(two_run_aggregate())
    with pytest.raises(ValueError, match="lacks column"):
        write_table(table.drop(columns=[("label_groups-clients2-groups2", "std")]), *paths,
                    caption="c")
    assert not any(p.exists() for p in paths)
