"""pflrepro.tuning: grids, tied values, the validation partition, selection, outputs."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

from pflrepro import tuning as T
from pflrepro.data.federated import FederatedData
from pflrepro.reporting import tuning_note as TN
from pflrepro.store import results as R


def _partition() -> pd.DataFrame:
    # client 0: train rows 0-9, test rows 10-11; client 1: train rows 20-24, test 25
    rows = [(i, 0, "train") for i in range(10)] + [(10, 0, "test"), (11, 0, "test")]
    rows += [(i, 1, "train") for i in range(20, 25)] + [(25, 1, "test")]
    frame = pd.DataFrame(rows, columns=["index", "client", "split"])
    frame["group"] = frame["client"]
    return frame


def test_log_grid_and_list_grid() -> None:
    g = T.parse_grid("sigma", {"log": [1e-7, 1e-1], "num": 7}, "x")
    assert g.values == (1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1) and g.log
    assert T.parse_grid("xi", [0.3, 0.5], "x") == T.Grid("xi", (0.3, 0.5), False)
    for bad in ({"log": [1e-3, 1e-5], "num": 3}, {"log": [0, 1], "num": 3},
                {"log": [1, 2], "num": 1}, [], [1, 1], ["a"]):
        with pytest.raises(T.TuneError):
            T.parse_grid("sigma", bad, "x")


def test_grid_points_and_ids() -> None:
    points = T.grid_points([T.Grid("sigma", (1e-5, 1.0)), T.Grid("prox", (0.5,))])
    assert points == [{"sigma": 1e-5, "prox": 0.5}, {"sigma": 1.0, "prox": 0.5}]
    assert [T.point_id(p) for p in points] == ["sigma1e-05_prox0.5", "sigma1_prox0.5"]


def test_fedamp_ties_alpha_and_lambda_to_sigma() -> None:
    # K = 20: alpha = sigma / 20 (xi_ii >= 0, FedAvg's mean at zero distance); lam = prox*alpha
    assert T.tied_params("fedamp", {"sigma": 1e-3}, 20, {}) == \
        {"sigma": 1e-3, "alpha": 5e-5, "lam": 5e-5}
    assert T.tied_params("fedamp", {"sigma": 1e-3, "prox": 2.0}, 20, {}) == \
        {"sigma": 1e-3, "alpha": 5e-5, "lam": 1e-4}
    # a value the config fixes holds, and the tie uses it
    assert T.tied_params("fedamp", {"sigma": 1e-3}, 20, {"alpha": 1e-6}) == \
        {"sigma": 1e-3, "lam": 1e-6}


def test_heurfedamp_ties_lambda_to_prox() -> None:
    assert T.tied_params("heurfedamp", {"sigma": 10.0, "self_attention": 0.3, "prox": 2.0},
                         8, {"init": "shared"}) == {"sigma": 10.0, "self_attention": 0.3,
                                                    "lam": 2.0}


def test_parse_tune_fixed_value_turns_tuning_off() -> None:
    spec = {"rounds": 5, "methods": {"fedamp": {"sigma": [1e-5, 1e-3]}}}
    tunable = {"fedamp": T.tunable_keys("fedamp")}
    tune = T.parse_tune(spec, "t", {"fedamp": {}}, tunable, 10)
    assert tune.methods["fedamp"] == (T.Grid("sigma", (1e-5, 1e-3)),)
    assert tune.rounds == 5 and tune.seeds == (0,) and tune.criterion == "best_mean"
    assert T.parse_tune(spec, "t", {"fedamp": {"sigma": 1e-4}}, tunable, 10) is None
    with pytest.raises(T.TuneError, match="rounds"):
        T.parse_tune({**spec, "rounds": 11}, "t", {"fedamp": {}}, tunable, 10)
    with pytest.raises(T.TuneError, match="not tunable"):
        T.parse_tune({"methods": {"fedamp": {"bogus": [1]}}}, "t", {"fedamp": {}},
                     tunable, 10)


def test_validation_partition_has_no_test_rows_and_is_seeded() -> None:
    frame = _partition()
    val = T.validation_partition(frame, 0.2, seed=3)
    assert set(val["index"]) == set(range(10)) | set(range(20, 25))  # train rows only
    counts = val[val["split"] == "test"].groupby("client").size().to_dict()
    assert counts == {0: 2, 1: 1}  # round(0.2 * 10), round(0.2 * 5)
    assert val.equals(T.validation_partition(frame, 0.2, seed=3))
    others = [T.validation_partition(frame, 0.2, seed=s) for s in range(4, 9)]
    assert any(not o["split"].equals(val["split"]) for o in others)


def test_guard_refuses_a_test_row() -> None:
    frame = _partition()
    leaked = pd.concat([T.validation_partition(frame, 0.2, 0), frame.iloc[[10]]])
    with pytest.raises(ValueError, match="test row"):
        T.check_no_test_rows(leaked, frame)


class _Recording:
    """An image array that records every row read."""

    def __init__(self, x: np.ndarray) -> None:
        self.x, self.read = x, set()

    def __getitem__(self, rows):  # noqa: ANN001
        self.read |= set(np.arange(len(self.x))[rows].ravel().tolist())
        return self.x[rows]

    @property
    def shape(self) -> tuple[int, ...]:
        return self.x.shape


def test_tuning_data_never_reads_a_test_image() -> None:
    frame = _partition()
    x = _Recording(np.zeros((30, 1, 2, 2), dtype=np.uint8))
    meta = SimpleNamespace(max_value=255.0, mean=(0.0,), std=(1.0,), num_classes=2)
    dataset = SimpleNamespace(x=x, y=np.zeros(30, dtype=np.int64), meta=meta)
    data = FederatedData.build(dataset, T.validation_partition(frame, 0.2, 0),
                               torch.device("cpu"))
    assert x.read == set(range(10)) | set(range(20, 25))
    assert [len(t) for t in data.test] == [2, 1]
    # the instrument works: the full partition reads the test rows
    FederatedData.build(dataset, frame, torch.device("cpu"))
    assert {10, 11, 25} <= x.read


def _run(curve: list[float], partition: str = "p") -> pd.DataFrame:
    rows = [{"round": r, "client": c, "peer": -1, "metric": R.TEST_ACCURACY, "value": v}
            for r, v in enumerate(curve) for c in (0, 1)]
    rows += [{"round": 0, "client": c, "peer": -1, "metric": R.GROUP, "value": g}
             for c, g in ((0, 0), (1, 0), (2, 1))]
    rows += [{"round": 2, "client": i, "peer": j, "metric": R.WEIGHT, "value": w}
             for i, j, w in ((0, 1, 0.4), (0, 2, 0.1), (1, 0, 0.2), (2, 0, 0.3))]
    return pd.DataFrame(rows)


def test_scores_on_synthetic_curves() -> None:
    assert T.score(_run([0.5, 0.8, 0.7]), "best_mean") == (0.8, 1)
    assert T.score(_run([0.5, 0.8, 0.7]), "final_mean") == (0.7, 2)
    # within-group pairs (0,1), (1,0): 0.3; across (0,2), (2,0): 0.2
    assert T.xi_contrast(_run([0.5])) == pytest.approx((0.3, 0.2))


def test_select_best_mean_over_seeds_first_on_ties() -> None:
    points = [{"sigma": 1e-5}, {"sigma": 1e-3}, {"sigma": 1e-1}]
    curves = {(0, 0): [0.5, 0.6], (0, 1): [0.5, 0.8],   # sigma 1e-5: 0.6, 0.8 -> 0.7
              (1, 0): [0.7, 0.7], (1, 1): [0.7, 0.7],   # sigma 1e-3: 0.7 (tie, later)
              (2, 0): [0.4, 0.5], (2, 1): [0.1, 0.2]}   # sigma 1e-1: 0.35
    trials = [T.Trial(points[i], "p", 0, seed, _run(c)) for (i, seed), c in curves.items()]
    scores = T.score_trials(trials, "best_mean")
    chosen = T.select(scores, points)
    assert chosen == {("p", 0): {"sigma": 1e-5}}
    from pflrepro.reporting.tuning import tuning_table

    table = tuning_table(scores, [T.Grid("sigma", (1e-5, 1e-3, 1e-1), log=True)], chosen)
    assert table["score"].tolist() == pytest.approx([0.7, 0.7, 0.35])
    assert table["selected"].tolist() == [True, False, False]
    # without the second seed, 1e-3 wins
    chosen = T.select(scores[scores["seed"] == 0], points)
    assert chosen == {("p", 0): {"sigma": 1e-3}}


def _run_with_rows(curve: list[float], rows: tuple[int, int]) -> pd.DataFrame:
    """:func:`_run` with each client's validation rows logged (``n_test`` at round 0)."""
    extra = pd.DataFrame([{"round": 0, "client": c, "peer": -1, "metric": R.N_TEST,
                           "value": n} for c, n in enumerate(rows)])
    return pd.concat([_run(curve), extra], ignore_index=True)


def test_scores_within_half_a_validation_row_are_ties_for_the_first_point() -> None:
    # 374 + 86 = 460 pooled validation rows: half a row is 0.5 / 460 = 1.09e-3
    points = [{"sigma": 1e-4}, {"sigma": 1e-3}, {"sigma": 1e-2}]
    trials = [T.Trial(points[0], "p", 0, 0, _run_with_rows([0.5, 0.8], (374, 86))),
              T.Trial(points[1], "p", 0, 0, _run_with_rows([0.5, 0.8 + 3e-9], (374, 86))),
              T.Trial(points[2], "p", 0, 0, _run_with_rows([0.5, 0.2], (374, 86)))]
    scores = T.score_trials(trials, "best_mean")
    assert scores["n_rows"].tolist() == [460, 460, 460]
    assert T.tie_tolerance(scores) == pytest.approx(0.5 / 460)
    # 3e-9 apart (float summation noise): a tie, the first grid point is chosen
    assert T.select(scores, points) == {("p", 0): {"sigma": 1e-4}}
    # a whole row apart (1 / 460 = 2.2e-3) is no tie: the better point is chosen
    trials[1] = T.Trial(points[1], "p", 0, 0, _run_with_rows([0.5, 0.8 + 1 / 460],
                                                              (374, 86)))
    assert T.select(T.score_trials(trials, "best_mean"), points) == {("p", 0): {"sigma": 1e-3}}
    # rows unknown (no n_test logged): exact comparison, as before
    assert T.tie_tolerance(scores.drop(columns="n_rows")) == 0.0


def test_pooled_selection_gives_every_split_of_a_partition_one_point() -> None:
    points = [{"eps1": 0.4}, {"eps1": 3.0}]
    # split 0: 0.4 scores 0.9, 3 scores 0.8; split 1: 0.4 scores 0.5, 3 scores 0.8
    curves = {(0, 0): [0.9], (1, 0): [0.8], (0, 1): [0.5], (1, 1): [0.8]}
    trials = [T.Trial(points[i], "p", split, 0, _run(c)) for (i, split), c in curves.items()]
    scores = T.score_trials(trials, "best_mean")
    # per split: each split its own best point
    assert T.select(scores, points) == {("p", 0): {"eps1": 0.4}, ("p", 1): {"eps1": 3.0}}
    # pooled: 0.4 averages 0.7, 3 averages 0.8, so both splits take 3
    assert T.select(scores, points, "partition") == {("p", 0): {"eps1": 3.0},
                                                     ("p", 1): {"eps1": 3.0}}
    with pytest.raises(ValueError, match="pool"):
        T.select(scores, points, "seed")
    grids = [T.Grid("eps1", (0.4, 3.0))]
    text = T.note(grids, T.select(scores, points, "partition"), "best_mean", 5, [0], 0.2,
                  pool="partition")
    assert "p (its splits pooled): 3 (the grid's highest value)" in text


def test_parse_tune_pool() -> None:
    spec = {"methods": {"fedamp": {"sigma": [1e-5, 1e-3]}}}
    tunable = {"fedamp": ("sigma",)}
    assert T.parse_tune(spec, "t", {"fedamp": {}}, tunable, 10).pool == "split"
    pooled = T.parse_tune({**spec, "pool": "partition"}, "t", {"fedamp": {}}, tunable, 10)
    assert pooled.pool == "partition" and pooled.to_dict()["pool"] == "partition"
    assert "pool" not in T.parse_tune(spec, "t", {"fedamp": {}}, tunable, 10).to_dict()
    with pytest.raises(T.TuneError, match="pool"):
        T.parse_tune({**spec, "pool": "client"}, "t", {"fedamp": {}}, tunable, 10)


def test_a_selection_at_the_grid_edge_is_said() -> None:
    g = T.Grid("sigma", (1e-3, 1e-5, 1e-4), log=True)
    assert T.edge(g, 1e-5) == " (the grid's lowest value)"
    assert T.edge(g, 1e-3) == " (the grid's highest value)"
    assert T.edge(g, 1e-4) == ""
    assert T.edge(T.Grid("sigma", (1e-4,)), 1e-4) == ""  # a one-value grid has no edge
    # nothing lies below 0 (every tuned key is non-negative): 0 is no edge, the top is
    prox = T.Grid("prox", (0.0, 0.01, 0.1, 1.0))
    assert T.edge(prox, 0.0) == "" and T.edge(prox, 1.0) == " (the grid's highest value)"
    text = T.note([g], {("p", 0): {"sigma": 1e-5}, ("q", 1): {"sigma": 1e-4}}, "best_mean",
                  10, [0], 0.2, labels={"p": "practical"})
    assert ("sigma chosen on validation from {0.001, 1e-05, 0.0001}: practical split 0: "
            "1e-05 (the grid's lowest value), q split 1: 0.0001 (best mean validation "
            "accuracy, 10 rounds, seeds [0], 0.2 of each client's training rows held out; "
            "the test rows never read).") == text


def _final_runs(params: dict) -> pd.DataFrame:
    return pd.DataFrame([{"experiment": "e", "method": "fedamp", "partition": "p",
                          "split_seed": 0, "train_seed": s, "params": json.dumps(params)}
                         for s in (0, 1)])


def test_table_notes_name_grid_and_selection_and_check_the_runs() -> None:
    selection = {"p": {"0": {"point": {"sigma": 1e-3, "prox": 0.1},
                             "params": {"sigma": 1e-3, "alpha": 5e-5, "lam": 5e-6}}}}
    spec = [{"experiment": "e", "method": "fedamp", "algorithm": "fedamp",
             "grids": {"sigma": [1e-5, 1e-3], "prox": [0.1, 1.0]}, "log": ["sigma"],
             "criterion": "best_mean", "rounds": 10, "seeds": [0], "fraction": 0.2,
             "selection": selection},
            {"experiment": "e", "method": "heurfedamp", "grids": {"sigma": [1.0]},
             "criterion": "best_mean", "rounds": 10, "seeds": [0], "fraction": 0.2,
             "selection": {}}]   # no heurfedamp run in the table: no note
    runs = _final_runs({"init": "shared", "sigma": 1e-3, "alpha": 5e-5, "lam": 5e-6})
    notes = TN.table_notes(spec, runs, labels={"p": "practical"})
    # short: the selected values and the tuning table, which says how and from what
    assert notes == ["FedAMP: chosen on validation, practical: sigma=0.001 (the grid's highest "
                     "value), prox=0.1 (the grid's lowest value) (every value tried: "
                     "results/tuning/e/fedamp.md)."]
    # runs trained with other values than the selection's: the note would lie
    with pytest.raises(ValueError, match="not the tuning selection"):
        TN.table_notes(spec, _final_runs({"sigma": 1e-5, "alpha": 5e-7, "lam": 5e-7}))
    # notes_for: what the table, paper-vs-ours, communication and cost jobs call
    assert TN.notes_for(json.dumps(spec), runs, labels={"p": "practical"}) == notes
    assert TN.notes_for(None, runs) == [] and TN.notes_for("[]", runs) == []
    assert TN.notes_for(json.dumps(spec), None) == []  # a paper table with no runs yet


def test_score_trials_record_the_budgets_last_round() -> None:
    scores = T.score_trials([T.Trial({"sigma": 1e-5}, "p", 0, 0, _run([0.5, 0.8, 0.7]))],
                            "best_mean")
    assert scores[["round", "last_round"]].values.tolist() == [[1, 2]]


def test_fedamp_grids_reach_below_0_01_include_0_and_refine_sigma() -> None:
    """Every FedAMP / HeurFedAMP grid of config.yaml: lam/alpha from 0 and a value below
    0.01; FedAMP's sigma at half-decade steps or finer over 1e-6 .. 1e-4."""
    from pathlib import Path

    import yaml

    from pflrepro.config import parse

    repo = Path(__file__).resolve().parents[2]
    cfg = parse(yaml.safe_load((repo / "config.yaml").read_text()))
    seen = 0
    for exp in cfg.experiments.values():
        for method in ("fedamp", "heurfedamp"):
            if exp.tune is None or method not in exp.tune.methods:
                continue
            grids = {g.key: g.values for g in exp.tune.methods[method]}
            assert 0 in grids["prox"] and min(v for v in grids["prox"] if v > 0) < 0.1, \
                (exp.name, method)
            if exp.scale == "paper":
                assert min(v for v in grids["prox"] if v > 0) < 0.01, exp.name
            if method == "fedamp":
                inside = sorted(v for v in grids["sigma"] if 1e-6 <= v <= 1e-4)
                assert len(inside) >= 5, (exp.name, inside)
                steps = [b / a for a, b in zip(inside[:-1], inside[1:], strict=True)]
                assert max(steps) <= 3.5, exp.name
            seen += 1
    assert seen >= 2 * 15  # 12 paper-scale, 3 CPU-scale experiments


def test_a_shared_training_note_names_every_method_and_the_selecting_one() -> None:
    selection = {"p": {"0": {"point": {"lr": 0.2}, "params": {}, "training": {"lr": 0.2}}}}
    spec = [{"experiment": "e", "method": "fedavg", "algorithm": "fedavg", "training": True,
             "grids": {"lr": [0.05, 0.2, 0.4]}, "log": [], "criterion": "final_mean",
             "rounds": 20, "seeds": [0], "fraction": 0.2, "selection": selection}]
    runs = pd.DataFrame([{"experiment": "e", "method": "fedavg", "partition": "p",
                          "split_seed": 0, "train_seed": 0, "params": "{}"}])
    (text,) = TN.table_notes(spec, runs)
    assert text == ("Every method's training settings (by FedAvg's score): chosen on validation, "
                    "p: lr=0.2 (every value tried: results/tuning/e/fedavg.md).")
