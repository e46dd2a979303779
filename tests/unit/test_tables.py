"""Accuracy tables from small synthetic aggregates whose numbers are checked by hand."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import pandas as pd
import pytest
from _table_helpers import make_run, two_run_aggregate

from pflrepro.reporting.tables import accuracy_table, write_table
from pflrepro.store.results import MetricLog


# ------------------------------------------------------------------ accuracy table
def test_accuracy_table_names_missing_metrics() -> None:
    with pytest.raises(ValueError, match="test_accuracy"):
        accuracy_table(make_run({}))


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
    assert "| FedAvg | — | 70.0 ± 14.1 |" in text
    assert "| FedeRiCo | — | 52.5 ± 3.5 |" in text
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


# ------------------------------------------------------------------ BMTA (FedAMP)
def bmta_aggregate() -> pd.DataFrame:
    """fedamp, two runs: means 0.5/0.8/0.7 and 0.6/0.6/0.9 (BMTA 0.8, 0.9; final 0.7, 0.9)."""
    return pd.concat([
        make_run({0: [0.4, 0.6], 5: [0.7, 0.9], 10: [0.6, 0.8]}, method="fedamp", split_seed=0),
        make_run({0: [0.6, 0.6], 5: [0.5, 0.7], 10: [0.9, 0.9]}, method="fedamp", split_seed=1),
    ], ignore_index=True)


def test_accuracy_table_mean_bmta() -> None:
    part = "label_groups-clients2-groups2"
    table = accuracy_table(bmta_aggregate(), metric="mean_bmta")
    assert list(table.columns.names) == ["partition", "metric_name", "stat"]
    assert table.loc["fedamp", (part, "mean_bmta", "mean")] == pytest.approx(85.0)
    assert table.loc["fedamp", (part, "mean_bmta", "std")] == pytest.approx(math.sqrt(50.0))
    assert table.loc["fedamp", (part, "mean_final", "mean")] == pytest.approx(80.0)
    assert table.loc["fedamp", (part, "mean_final", "std")] == pytest.approx(math.sqrt(200.0))
    assert table.loc["fedamp", (part, "mean_bmta", "n")] == 2
    assert table.attrs["metric"] == "mean_bmta"
    # the default metric is unchanged: final weighted accuracy (0.75 and 0.9)
    default = accuracy_table(bmta_aggregate())
    assert list(default.columns.names) == ["partition", "stat"]
    assert default.loc["fedamp", (part, "mean")] == pytest.approx(82.5)
    with pytest.raises(ValueError, match="unknown table metric"):
        accuracy_table(bmta_aggregate(), metric="bmta")


def test_write_table_mean_bmta(tmp_path) -> None:
    agg = pd.concat([bmta_aggregate(),
                     make_run({10: [0.5, 0.5]}, method="local")], ignore_index=True)
    table = accuracy_table(agg, metric="mean_bmta", methods_order=["fedamp", "local"])
    md, tex, csv = tmp_path / "t.md", tmp_path / "t.tex", tmp_path / "t.csv"
    write_table(table, md, tex, csv, caption="FedAMP")
    text = md.read_text()
    assert "| FedAMP | 85.0 ± 7.1 / 80.0 ± 14.1 |" in text
    assert "| Local | 50.0 ± n/a / 50.0 ± n/a (n=1) |" in text
    assert "BMTA / final round" in text
    assert "picked on the test set" in text and "final-round mean accuracy" in text
    latex = tex.read_text()
    assert "FedAMP & 85.0 $\\pm$ 7.1 / 80.0 $\\pm$ 14.1 \\\\" in latex
    tidy = pd.read_csv(csv)
    assert list(tidy.columns) == ["method", "partition", "metric_name", "mean", "std", "n"]
    assert tidy["metric_name"].tolist() == ["mean_bmta", "mean_final"] * 2
    assert tidy["mean"].tolist() == pytest.approx([85.0, 80.0, 50.0, 50.0])
    assert tidy["n"].tolist() == [2, 2, 1, 1]


# ------------------------------------------------------------------ several experiments
P2, P4 = "label_groups-clients2-groups2", "label_groups-clients2-groups4"
EXP_LABELS = {"t1_cifar10": "CIFAR-10", "t1_cifar100": "CIFAR-100"}
LABELS = {P2: "2 distributions", P4: "4 distributions"}


def experiments_aggregate() -> pd.DataFrame:
    """CIFAR-10 (P2, P4) and CIFAR-100 (P4 only); fedavg and federico, one or two runs."""
    runs = []
    for experiment, dataset, parts in (("t1_cifar10", "cifar10", (P2, P4)),
                                       ("t1_cifar100", "cifar100", (P4,))):
        for part in parts:
            acc = {P2: 0.6, P4: 0.8}[part] - (0.2 if dataset == "cifar100" else 0.0)
            for method, bonus in (("fedavg", 0.0), ("federico", 0.1)):
                for seed in (0, 1):
                    runs.append(make_run({5: [acc + bonus + 0.1 * seed] * 2}, method=method,
                                         partition=part, split_seed=seed,
                                         experiment=experiment, dataset=dataset))
    return pd.concat(runs, ignore_index=True)


def test_accuracy_table_over_experiments() -> None:
    table = accuracy_table(experiments_aggregate())
    assert list(table.columns.names) == ["experiment", "partition", "stat"]
    pairs = list(dict.fromkeys((e, p) for e, p, _ in table.columns))
    assert pairs == [("t1_cifar10", P2), ("t1_cifar10", P4), ("t1_cifar100", P4)]
    # federico on CIFAR-100, P4: 0.8 - 0.2 + 0.1 (+ 0.1 for seed 1) -> 70 and 80
    assert table.loc["federico", ("t1_cifar100", P4, "mean")] == pytest.approx(75.0)
    assert table.loc["fedavg", ("t1_cifar10", P2, "mean")] == pytest.approx(65.0)
    assert table.loc["fedavg", ("t1_cifar10", P2, "n")] == 2
    ordered = accuracy_table(experiments_aggregate(), experiments_order=["t1_cifar100"],
                             partitions_order=[P4])
    assert list(dict.fromkeys((e, p) for e, p, _ in ordered.columns)) == [
        ("t1_cifar100", P4), ("t1_cifar10", P4), ("t1_cifar10", P2)]
    # one experiment with explicit experiment columns is allowed
    one = experiments_aggregate().query("experiment == 't1_cifar100'")
    assert list(accuracy_table(one, columns=("experiment", "partition")).columns.names) == [
        "experiment", "partition", "stat"]


def test_accuracy_table_over_experiments_stays_strict() -> None:
    agg = experiments_aggregate()
    with pytest.raises(ValueError, match="different settings"):
        accuracy_table(agg, columns=("partition",))  # a cell would mix experiments
    mixed = pd.concat([agg, make_run({5: [0.5, 0.5]}, method="fedavg", partition=P4,
                                     split_seed=7, experiment="t1_cifar10",
                                     dataset="cifar100")])
    with pytest.raises(ValueError, match="experiment='t1_cifar10'.*different settings"):
        accuracy_table(mixed)
    with pytest.raises(ValueError, match="columns must be one of"):
        accuracy_table(agg, columns=("dataset", "partition"))
    with pytest.raises(ValueError, match="t1_mnist"):
        accuracy_table(agg, experiments_order=["t1_mnist"])


def test_write_table_over_experiments(tmp_path) -> None:
    table = accuracy_table(experiments_aggregate(), labels=LABELS,
                           experiment_labels=EXP_LABELS)
    md, tex, csv = tmp_path / "t.md", tmp_path / "t.tex", tmp_path / "t.csv"
    write_table(table, md, tex, csv, caption="Table 1")
    text = md.read_text()
    assert ("| method | CIFAR-10 · 2 distributions | CIFAR-10 · 4 distributions | "
            "CIFAR-100 · 4 distributions |") in text
    assert "| FedeRiCo | 75.0 ± 7.1 | 95.0 ± 7.1 | 75.0 ± 7.1 |" in text
    latex = tex.read_text()
    assert "\\begin{tabular}{lrrr}" in latex
    assert ("     & \\multicolumn{2}{c}{CIFAR-10} & \\multicolumn{1}{c}{CIFAR-100} \\\\"
            in latex)
    assert "\\cmidrule(lr){2-3} \\cmidrule(lr){4-4}" in latex
    assert "Method & 2 distributions & 4 distributions & 4 distributions \\\\" in latex
    lines = latex.splitlines()
    assert lines.index("    \\toprule") < [i for i, x in enumerate(lines)
                                            if "multicolumn" in x][0]
    tidy = pd.read_csv(csv)
    assert list(tidy.columns) == ["method", "experiment", "partition", "mean", "std", "n"]
    assert len(tidy) == 6
    assert tidy.iloc[2][["method", "experiment", "partition"]].tolist() == [
        "fedavg", "t1_cifar100", P4]  # ids, not labels
    assert tidy.iloc[2]["mean"] == pytest.approx(65.0)


def test_write_table_over_experiments_with_bmta(tmp_path) -> None:
    table = accuracy_table(experiments_aggregate(), metric="mean_bmta")
    assert list(table.columns.names) == ["experiment", "partition", "metric_name", "stat"]
    write_table(table, tmp_path / "t.md", tmp_path / "t.tex", tmp_path / "t.csv", caption="c")
    tidy = pd.read_csv(tmp_path / "t.csv")
    assert list(tidy.columns) == ["method", "experiment", "partition", "metric_name", "mean",
                                  "std", "n"]
    assert len(tidy) == 12
    assert "t1_cifar10 · label_groups-clients2-groups2" in (tmp_path / "t.md").read_text()


# ------------------------------------------------------------------ labels
def test_labels_in_markdown_and_latex(tmp_path) -> None:
    agg = pd.concat([two_run_aggregate(),
                     make_run({5: [0.2, 0.2]}, method="fed_x", partition="dir_alpha0.1")],
                    ignore_index=True)
    table = accuracy_table(agg, labels={"label_groups-clients2-groups2": "2 dist. & more_"})
    paths = tmp_path / "t.md", tmp_path / "t.tex", tmp_path / "t.csv"
    write_table(table, *paths, caption="c")
    assert "| method | dir_alpha0.1 | 2 dist. & more_ |" in paths[0].read_text()
    assert "Method & dir\\_alpha0.1 & 2 dist. \\& more\\_ \\\\" in paths[1].read_text()
    assert "label_groups-clients2-groups2" in paths[2].read_text()  # CSV keeps ids
    # labels given to write_table add to / override those of accuracy_table
    write_table(table, *paths, caption="c", labels={"dir_alpha0.1": "Dir(0.1)"})
    assert "| method | Dir(0.1) | 2 dist. & more_ |" in paths[0].read_text()


def test_bad_labels_raise(tmp_path) -> None:
    agg = pd.concat([two_run_aggregate(),
                     make_run({5: [0.2, 0.2]}, method="fed_x", partition="dir_alpha0.1")],
                    ignore_index=True)
    same = {"label_groups-clients2-groups2": "x", "dir_alpha0.1": "x"}
    with pytest.raises(ValueError, match="both be shown as 'x'"):
        accuracy_table(agg, labels=same)
    with pytest.raises(ValueError, match="non-empty strings"):
        accuracy_table(agg, labels={"dir_alpha0.1": 3})
    table = accuracy_table(agg)
    paths = tmp_path / "t.md", tmp_path / "t.tex", tmp_path / "t.csv"
    with pytest.raises(ValueError, match="both be shown"):
        write_table(table, *paths, caption="c", labels={"dir_alpha0.1": "label_groups-"
                                                        "clients2-groups2"})
    assert not any(p.exists() for p in paths)


# ------------------------------------------------------------------ divergence
def test_diverged_runs_are_counted_marked_and_explained(tmp_path) -> None:
    from pflrepro.reporting.accuracy import run_accuracies
    from pflrepro.reporting.render import tidy_table
    from pflrepro.store.results import DIVERGED

    ok = make_run({0: [0.1, 0.1], 5: [0.5, 0.9]}, method="fedavg", split_seed=0)
    bad = make_run({0: [0.1, 0.1], 3: [0.1, 0.1]}, method="fedavg", split_seed=1)
    mark = bad.iloc[:1].copy()
    mark[["round", "client", "peer", "metric", "value"]] = [3, -1, -1, DIVERGED, 3.0]
    agg = pd.concat([ok, bad, mark, make_run({0: [0.1, 0.1], 5: [0.5, 0.5]})],
                    ignore_index=True)
    runs = run_accuracies(agg)
    fedavg = runs[runs["method"] == "fedavg"].set_index("split_seed")
    assert fedavg.loc[[0, 1], "diverged"].tolist() == [False, True]
    assert not runs.loc[runs["method"] == "federico", "diverged"].any()
    table = accuracy_table(agg)
    # the diverged run counts, with its accuracy at the round it stopped: (0.8 + 0.1) / 2
    assert table.loc["fedavg"].xs("mean", level="stat").iloc[0] == pytest.approx(45.0)
    tidy = tidy_table(table)
    assert tidy.set_index("method")["diverged"].to_dict() == {"fedavg": 1, "federico": 0}
    md, tex, csv = (tmp_path / f"t.{e}" for e in ("md", "tex", "csv"))
    write_table(table, md, tex, csv, caption="c")
    text = md.read_text()
    assert "(1 diverged)" in text and "non-finite loss" in text
    assert text.count("(1 diverged)") == 1  # federico's cell is not marked
    assert "(1 diverged)" in tex.read_text()
    # no diverged run: no column, no mark (outputs as before)
    clean = accuracy_table(two_run_aggregate())
    assert "diverged" not in tidy_table(clean).columns
    write_table(clean, md, tex, csv, caption="c")
    assert "diverged" not in md.read_text() and "diverged" not in csv.read_text()


def test_a_method_that_never_split_is_named_under_the_table(tmp_path) -> None:
    from pflrepro.reporting.accuracy import one_cluster_methods
    from pflrepro.store.results import CLUSTER

    def with_clusters(run: pd.DataFrame, ids: Mapping[int, Sequence[int]]) -> pd.DataFrame:
        log = MetricLog()
        for round_, values in ids.items():
            log.add_per_client(round_, CLUSTER, values)
        extra = log.to_frame({c: run[c].iloc[0] for c in run.columns
                              if c not in ("round", "client", "peer", "metric", "value")})
        return pd.concat([run, extra], ignore_index=True)

    never = with_clusters(make_run({0: [0.1, 0.1], 5: [0.5, 0.9]}, method="clustered_fl"),
                          {0: [0, 0], 5: [0, 0]})
    split = with_clusters(make_run({0: [0.1, 0.1], 5: [0.5, 0.9]}, method="hypcluster"),
                          {0: [0, 0], 5: [0, 1]})
    agg = pd.concat([never, split, make_run({0: [0.1, 0.1], 5: [0.5, 0.5]},
                                            method="fed_avg")], ignore_index=True)
    assert one_cluster_methods(agg) == ["clustered_fl"]
    # one split in a second run of the same method: it did split, no note
    again = with_clusters(make_run({0: [0.1, 0.1], 5: [0.5, 0.9]}, method="clustered_fl",
                                   split_seed=1), {0: [0, 0], 5: [1, 0]})
    assert one_cluster_methods(pd.concat([agg, again], ignore_index=True)) == []
    md, tex, csv = (tmp_path / f"t.{e}" for e in ("md", "tex", "csv"))
    write_table(accuracy_table(agg), md, tex, csv, caption="c")
    note = "every client stayed in one cluster in every round of every run (no split)"
    # the method by its paper's name (Clustered FL), the CSV by its id
    assert f"Clustered FL: {note}" in md.read_text() and f"Clustered FL: {note}" in tex.read_text()
    assert "HypCluster:" not in md.read_text()
    assert "clustered_fl" in csv.read_text() and "Clustered FL" not in csv.read_text()
    # no method logging clusters: the note as before
    write_table(accuracy_table(two_run_aggregate()), md, tex, csv, caption="c")
    assert "cluster" not in md.read_text()


def test_tuned_values_are_named_in_the_note(tmp_path) -> None:
    table = accuracy_table(two_run_aggregate(), methods_order=["fedavg", "federico"])
    md, tex, csv = tmp_path / "t.md", tmp_path / "t.tex", tmp_path / "t.csv"
    line = "federico: epsilon chosen on validation from {0.1, 0.3}: p split 0: 0.3"
    write_table(table, md, tex, csv, caption="c", tuning=[line])
    note = md.read_text().strip().splitlines()[-1]
    assert note.endswith(" " + line)
    assert "p split 0: 0.3" in tex.read_text()
    # without tuned methods the note is as before
    write_table(table, md, tex, csv, caption="c")
    assert "chosen on validation" not in md.read_text()
