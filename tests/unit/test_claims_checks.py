"""pflrepro.reporting.claims.checks: three-valued logic, every check type on synthetic aggregates.

Every number below is worked out by hand in the comment beside it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import pytest
from _claims_helpers import (
    ACROSS,
    COMPARE,
    _claim,
    claims_of,
    copies,
    design_from,
    doc,
    evaluate,
    final_run,
    make_run,
    one,
    table1,
)

from pflrepro.reporting.claims.checks import combine, evaluate_claims
from pflrepro.reporting.claims.parse import (
    COLUMNS,
    ClaimsError,
    Design,
    parse_claims,
    row_keys,
)
from pflrepro.reporting.render import tidy_table
from pflrepro.reporting.tables import accuracy_table
from pflrepro.store import results as R
from pflrepro.store.results import TEST_ACCURACY, MetricLog


# --------------------------------------------------------------------------- logic
@pytest.mark.parametrize(("groups", "quantifier", "expected"), [
    ([[1.0, 2.0]], "all", 1.0),           # worst column
    ([[1.0, -2.0]], "all", -2.0),
    ([[-1.0, 3.0]], "any", 3.0),          # best column
    ([[2.0], [1.0]], "all", 1.0),         # across groups: the worst
    ([[-1.0, 3.0], [0.5, -4.0]], "any", 0.5),
])
def test_combination_of_terms(groups: list, quantifier: str, expected: float) -> None:
    assert float(combine(groups, quantifier)) == expected


def test_combination_is_elementwise_over_resamples() -> None:
    got = combine([[np.array([1.0, -1.0]), np.array([2.0, -3.0])]], "all")
    assert got.tolist() == [1.0, -3.0]
    with pytest.raises(ValueError, match="without terms"):
        combine([[]], "all")


def test_compare_holds_fails_and_tolerance() -> None:
    agg = table1()
    # p2: 90 - 85 = +5; p4: 80 - 82 = -2 -> fails, margin the worst column
    status, margin = one(evaluate(agg, COMPARE))
    assert status == "fails" and margin == pytest.approx(-2.0)
    # with 'any' the best column holds: +5
    status, margin = one(evaluate(agg, {**COMPARE, "quantifier": "any"}))
    assert status == "holds" and margin == pytest.approx(5.0)
    # >= with tolerance 2.5: min(5, -2) + 2.5 = +0.5
    status, margin = one(evaluate(agg, {**COMPARE, "op": ">=", "tolerance": 2.5}))
    assert status == "holds" and margin == pytest.approx(0.5)
    # fedavg < local: p2 85 - 60 = 25, p4 82 - 70 = 12 -> holds by 12
    frame = evaluate(agg, {**COMPARE, "a": "fedavg", "op": "<"})
    assert one(frame) == ("holds", pytest.approx(12.0))
    assert frame["unit"].iloc[0] == "pp"
    assert frame["numbers"].iloc[0] == "fedavg vs local: p2 60.0 vs 85.0; p4 70.0 vs 82.0"


def test_missing_data_is_missing_never_holding() -> None:
    agg = table1()
    # the experiment has no results
    frame = evaluate(agg, COMPARE, experiments=["other"])
    assert one(frame)[0] == "missing" and math.isnan(one(frame)[1])
    assert "other is not in the config" in frame["numbers"].iloc[0]
    frame = evaluate(agg, COMPARE, experiments=["other"], design=design_from(agg, ["other"]))
    assert "no results for other" in frame["numbers"].iloc[0]
    # a method without runs
    frame = evaluate(agg, {**COMPARE, "b": "fedem"})
    assert one(frame)[0] == "missing"
    assert "no runs of fedem" in frame["numbers"].iloc[0]
    # a column that would hold, the other absent: missing, not holds
    holds_where_present = agg[~((agg["method"] == "local") & (agg["partition"] == "p4"))]
    assert one(evaluate(holds_where_present, COMPARE))[0] == "missing"
    # no aggregate at all
    assert one(evaluate(None, COMPARE))[0] == "missing"
    # one experiment present and holding, another absent: the row of the absent one is missing
    frame = evaluate(agg, {**COMPARE, "a": "fedavg", "op": "<"}, experiments=["exp", "gone"])
    assert frame["verdict"].tolist() == ["holds", "missing"]


def test_accuracy_numbers_equal_the_tables() -> None:
    agg = pd.concat([
        table1(),
        final_run("federico", 0.70, split_seed=1),  # p2 federico: mean of 90 and 70 = 80
        make_run("local", {0: [0.1, 0.1], 10: [0.8, 0.9]}, n_test=[10, 30], split_seed=1),
    ], ignore_index=True)
    # local p2, split 1: weighted (0.8*10 + 0.9*30)/40 = 0.875; mean of 85 and 87.5 = 86.25
    tidy = tidy_table(accuracy_table(agg))
    cell = tidy.set_index(["method", "partition"])["mean"]
    assert cell[("local", "p2")] == pytest.approx(86.25)
    expected = cell[("federico", "p2")] - cell[("local", "p2")]  # 80 - 86.25
    frame = evaluate(agg, {**COMPARE, "distributions": [2]})
    # the runs disagree: split 0 gives 90 - 85 = +5, split 1 gives 70 - 87.5 = -17.5
    assert one(frame) == ("inconclusive", pytest.approx(expected))
    assert expected == pytest.approx(-6.25)
    # 2 copies x 2 splits: n = 4; a resample of only split-1 runs has chance 1/16 > 2.5 %
    # (and of only split 0 too), so the 95 % interval is the two per-split margins
    row = frame.iloc[0]
    assert row["n"] == 4 and (row["ci_low"], row["ci_high"]) == (pytest.approx(-17.5),
                                                                 pytest.approx(5.0))


def test_bmta_final_mean_and_early_accuracy() -> None:
    # per-round means 0.5, 0.8, 0.7 (rounds 1, 2, 3; round 0 at 0.1): BMTA 80, final 70
    a = make_run("fedamp", {0: [0.1, 0.1], 1: [0.4, 0.6], 2: [0.8, 0.8], 3: [0.7, 0.7]})
    b = make_run("fedavg", {0: [0.1, 0.1], 1: [0.6, 0.6], 2: [0.75, 0.75], 3: [0.72, 0.72]})
    agg = pd.concat([a, b], ignore_index=True)
    check = {"type": "compare", "a": "fedamp", "b": "fedavg", "op": ">"}
    assert one(evaluate(agg, {**check, "metric": "mean_bmta"})) == (
        "holds", pytest.approx(80 - 75))
    assert one(evaluate(agg, {**check, "metric": "mean_final"})) == (
        "fails", pytest.approx(70 - 72))
    # round_fraction 0.5 of 3 rounds: the first evaluated round >= 1.5 is round 2
    assert one(evaluate(agg, {**check, "metric": "weighted_at", "round_fraction": 0.5})) == (
        "holds", pytest.approx(80 - 75))
    # 0.2 -> round >= 0.6 -> round 1: 50 vs 60
    assert one(evaluate(agg, {**check, "metric": "weighted_at", "round_fraction": 0.2})) == (
        "fails", pytest.approx(-10))


def test_above_all_within_and_scope_together() -> None:
    agg = table1()
    above = {"type": "above_all", "metric": "weighted_final", "methods": ["federico"],
             "baselines": ["local", "fedavg"]}
    # pairs: (local) +5, -2; (fedavg) +30, +10 -> fails at -2
    frame = evaluate(agg, above)
    assert one(frame) == ("fails", pytest.approx(-2.0))
    assert frame["numbers"].iloc[0] == ("federico vs best of local, fedavg: "
                                        "p2 90.0 vs 85.0 (local); p4 80.0 vs 82.0 (local)")
    # 'any' column per pair: local +5 (p2), fedavg +30 (p2) -> holds by the smaller, 5
    assert one(evaluate(agg, {**above, "quantifier": "any"})) == ("holds", pytest.approx(5.0))
    within = {"type": "within", "metric": "weighted_final", "methods": ["federico", "fedavg"],
              "reference": "local", "tolerance": 3.0}
    # |90-85| = 5, |80-82| = 2, |60-85| = 25, |70-82| = 12 -> 3 - 25 = -22
    assert one(evaluate(agg, within)) == ("fails", pytest.approx(-22.0))
    within = {**within, "methods": ["federico"], "tolerance": 5.0}
    assert one(evaluate(agg, within)) == ("holds", pytest.approx(0.0))  # 5 - 5 holds at 0
    # together: one row over two experiments, columns from both
    other = final_run("federico", 0.5, experiment="exp2")
    other2 = final_run("local", 0.6, experiment="exp2")
    agg2 = pd.concat([agg, other, other2], ignore_index=True)
    frame = evaluate(agg2, {**COMPARE, "quantifier": "any"}, experiments=["exp", "exp2"],
                     scope="together")
    assert frame["experiment"].tolist() == ["exp + exp2"]
    assert one(frame) == ("holds", pytest.approx(5.0))
    frame = evaluate(agg2, COMPARE, experiments=["exp", "exp2"], scope="together")
    assert one(frame) == ("fails", pytest.approx(-10.0))  # exp2: 50 - 60


def test_mean_over_columns() -> None:
    # "superior on the table" read as better on the table's average column
    agg = table1()
    # federico - local: p2 +5, p4 -2 -> mean +1.5 (every column: -2, some column: +5)
    frame = evaluate(agg, {**COMPARE, "quantifier": "mean"})
    assert one(frame) == ("holds", pytest.approx(1.5))
    assert "on the mean over the columns" in frame["predicate"].iloc[0]
    assert "federico - local mean over 2 columns +1.5" in frame["numbers"].iloc[0]
    # above_all: local (+5, -2) mean +1.5, fedavg (+30, +10) mean +20 -> the worst, 1.5
    above = {"type": "above_all", "metric": "weighted_final", "methods": ["federico"],
             "baselines": ["local", "fedavg"], "quantifier": "mean"}
    assert one(evaluate(agg, above)) == ("holds", pytest.approx(1.5))
    # federico vs local only on p4 (-2) and on exp2 (50 - 60 = -10), together: mean -6
    agg2 = pd.concat([agg[agg["partition"] == "p4"],
                      final_run("federico", 0.5, experiment="exp2"),
                      final_run("local", 0.6, experiment="exp2")], ignore_index=True)
    frame = evaluate(agg2, {**COMPARE, "quantifier": "mean"}, experiments=["exp", "exp2"],
                     scope="together")
    assert one(frame) == ("fails", pytest.approx(-6.0))
    with pytest.raises(ClaimsError, match="'mean' .* not within"):
        claims_of({"type": "within", "metric": "weighted_final", "methods": ["federico"],
                   "reference": "local", "tolerance": 1.0, "quantifier": "mean"})


def traffic_run(method: str, up: Sequence[float], down: Sequence[float], *,
                partition: str = "p2", **kw: Any) -> pd.DataFrame:
    """A run (both clients at 0.8) whose clients send ``up`` and receive ``down`` in each of
    rounds 0 and 1 (so its total is 2 * (sum(up) + sum(down)))."""
    run = final_run(method, 0.8, partition=partition, **kw)
    log = MetricLog()
    for rnd in (0, 1):
        log.add_per_client(rnd, R.COMM_UP, up)
        log.add_per_client(rnd, R.COMM_DOWN, down)
    meta = run.drop(columns=[c for c in run.columns if c not in META]).iloc[0].to_dict()
    return pd.concat([run, log.to_frame(meta)], ignore_index=True)


META = ("experiment", "dataset", "partition", "method", "algorithm", "params", "split_seed",
        "train_seed", "client_training", "package_version", "git_revision")


def test_communication_ratio_by_hand() -> None:
    # perfedckt: 2 * (1 + 1 + 2 + 2) = 12 scalars per run; fedfomo 2 * (30 + 30 + 60 + 60)
    # = 360 (ratio 30); fedavg 2 * (10 + 10 + 10 + 10) = 80 (ratio 6.67)
    agg = pd.concat([traffic_run("perfedckt", [1, 1], [2, 2]),
                     traffic_run("fedfomo", [30, 30], [60, 60]),
                     traffic_run("fedavg", [10, 10], [10, 10])], ignore_index=True)
    check = {"type": "communication_ratio", "method": "perfedckt", "baselines": ["fedfomo"],
             "factor": 25, "op": ">="}
    frame = evaluate(agg, check)
    assert one(frame) == ("holds", pytest.approx(30 - 25))
    assert frame["unit"].iloc[0] == "ratio"
    assert "p2: fedfomo 360 / perfedckt 12 = 30x" in frame["numbers"].iloc[0]
    assert one(evaluate(agg, {**check, "factor": 40})) == ("fails", pytest.approx(30 - 40))
    # equal to the factor: holds with >=; with > (strict) a tie, neither shown nor refuted
    assert one(evaluate(agg, {**check, "factor": 30}))[0] == "holds"
    assert one(evaluate(agg, {**check, "factor": 30, "op": ">"}))[0] == "undecidable"
    # "fewer than every other": the worst baseline decides, fedavg 80 / 12 - 1
    every = {**check, "baselines": ["fedfomo", "fedavg"], "factor": 1, "op": ">"}
    assert one(evaluate(agg, every)) == ("holds", pytest.approx(80 / 12 - 1))
    # a baseline that communicates less than the method: fails
    cheap = pd.concat([agg, traffic_run("local", [0, 0], [0, 0])], ignore_index=True)
    assert one(evaluate(cheap, {**every, "baselines": ["local"]})) == (
        "fails", pytest.approx(-1.0))
    # the method communicating nothing: no ratio
    frame = evaluate(cheap, {**check, "method": "local"})
    assert one(frame)[0] == "undecidable"
    assert "local communicated nothing" in frame["numbers"].iloc[0]
    # runs that logged no traffic are missing, never holding
    bare = pd.concat([agg[agg["method"] != "fedfomo"], final_run("fedfomo", 0.8)],
                     ignore_index=True)
    assert one(evaluate(bare, check))[0] == "missing"
    with pytest.raises(ClaimsError, match="communication_ratio takes"):
        claims_of({**check, "op": "<"})
    with pytest.raises(ClaimsError, match="both the method and a baseline"):
        claims_of({**check, "baselines": ["perfedckt"]})
    with pytest.raises(ClaimsError, match="outside"):
        claims_of({**check, "factor": 0.5})


def test_trend_over_numbers_of_distributions() -> None:
    agg = table1()
    trend = {"type": "trend", "metric": "weighted_final", "method": "fedavg",
             "direction": "decreasing"}
    # fedavg: 2 distributions 60 -> 4 distributions 70: increasing, so decreasing fails by 10
    frame = evaluate(agg, trend)
    assert one(frame) == ("fails", pytest.approx(-10.0))
    assert "2 distributions 60.0 -> 4 distributions 70.0" in frame["numbers"].iloc[0]
    assert one(evaluate(agg, {**trend, "direction": "increasing"})) == (
        "holds", pytest.approx(10.0))
    # one number of distributions only: undecidable (complete data, no trend to read)
    assert one(evaluate(agg[agg["partition"] == "p2"], trend))[0] == "undecidable"
    # a designed column without runs: missing
    design = design_from(copies(agg))
    assert one(evaluate(agg[agg["partition"] == "p2"], trend, design=design))[0] == "missing"


# --------------------------------------------------------------------------- design, statistics
def runs_of(method: str, finals: Sequence[float], seeds: Sequence[tuple[int, int]],
            **kw: Any) -> pd.DataFrame:
    """One run per seed pair, ending at the given final accuracy."""
    return pd.concat([final_run(method, f, split_seed=s, train_seed=t, **kw)
                      for f, (s, t) in zip(finals, seeds, strict=True)], ignore_index=True)


GRID = tuple((s, t) for s in range(5) for t in range(3))  # 5 splits x 3 training seeds


def test_absent_column_is_missing_not_holding() -> None:
    # the design has columns p2 and p4; only p2 ran (federico 90 vs local 85 in two runs).
    # The old check listed only the columns present and held by +5
    g4 = {"partition": "p4", "groups": (0, 1, 2, 3)}
    agg = pd.concat([final_run("federico", 0.9), final_run("local", 0.85)], ignore_index=True)
    design = {"exp": Design(("p2", "p4"), ("federico", "local"), ((0, 0), (0, 100)))}
    frame = evaluate(agg, COMPARE, design=design)
    assert one(frame)[0] == "missing" and math.isnan(one(frame)[1])
    assert "federico p4: 0 of 2 runs" in frame["numbers"].iloc[0]
    # with p4 run as well the same check is decided (p4: 80 - 82 = -2)
    full = pd.concat([agg, final_run("federico", 0.8, **g4), final_run("local", 0.82, **g4)],
                     ignore_index=True)
    assert one(evaluate(full, COMPARE, design=design)) == ("fails", pytest.approx(-2.0))


def test_cell_from_one_of_fifteen_runs_is_incomplete() -> None:
    # federico ran all 15 (split, train) pairs; local only the first. The old check
    # averaged what was there: 90 vs 85, holds by +5
    agg = pd.concat([runs_of("federico", [0.9] * 15, GRID), runs_of("local", [0.85], GRID[:1])],
                    ignore_index=True)
    design = {"exp": Design(("p2",), ("federico", "local"), GRID)}
    frame = evaluate(agg, COMPARE, design=design, k=1)
    assert one(frame)[0] == "incomplete" and math.isnan(one(frame)[1])
    assert "local p2: 1 of 15 runs" in frame["numbers"].iloc[0]
    # runs outside the design (another seed) do not count
    extra = runs_of("local", [0.85] * 15, [(9, 9)] * 1 + list(GRID[1:15]))
    frame = evaluate(pd.concat([agg, extra], ignore_index=True), COMPARE, design=design, k=1)
    assert one(frame) == ("holds", pytest.approx(5.0))
    assert frame["n"].iloc[0] == 15


def test_one_run_is_inconclusive() -> None:
    # n = 1: the old check held by +5 on a single run; now inconclusive, "n = 1" in the row
    agg = pd.concat([final_run("federico", 0.9), final_run("local", 0.85)], ignore_index=True)
    frame = evaluate(agg, COMPARE, k=1)
    assert one(frame) == ("inconclusive", pytest.approx(5.0))
    assert "n = 1" in frame["numbers"].iloc[0] and frame["n"].iloc[0] == 1


def test_interval_containing_the_threshold_is_inconclusive() -> None:
    # two seed pairs: margins +5 (90 vs 85) and -1 (80 vs 81), mean +2. The old check
    # held by +2. Resampled means: -1 (p 1/4), +2 (1/2), +5 (1/4): interval [-1, +5]
    seeds = ((0, 0), (1, 1))
    agg = pd.concat([runs_of("federico", [0.9, 0.8], seeds), runs_of("local", [0.85, 0.81], seeds)],
                    ignore_index=True)
    frame = evaluate(agg, COMPARE, k=1)
    assert one(frame) == ("inconclusive", pytest.approx(2.0))
    row = frame.iloc[0]
    assert (row["n"], row["ci_low"], row["ci_high"]) == (2, pytest.approx(-1.0),
                                                         pytest.approx(5.0))
    assert "interval of the margin contains the threshold" in row["numbers"]


def test_bootstrap_interval_by_hand_paired_and_deterministic() -> None:
    seeds = ((0, 0), (1, 1))
    # margins +1 and +3: resampled means 1 (p 1/4), 2 (1/2), 3 (1/4) -> [1, 3], holds
    agg = pd.concat([runs_of("federico", [0.86, 0.88], seeds),
                     runs_of("local", [0.85, 0.85], seeds)], ignore_index=True)
    frame = evaluate(agg, COMPARE, k=1)
    assert one(frame) == ("holds", pytest.approx(2.0))
    assert (frame["ci_low"].iloc[0], frame["ci_high"].iloc[0]) == (pytest.approx(1.0),
                                                                   pytest.approx(3.0))
    # paired: federico 90/70 and local 88/68 move together, so the margin is +2 in both
    # runs and the interval has zero width (unpaired, the means would overlap)
    agg = pd.concat([runs_of("federico", [0.9, 0.7], seeds),
                     runs_of("local", [0.88, 0.68], seeds)], ignore_index=True)
    frame = evaluate(agg, COMPARE, k=1)
    assert one(frame) == ("holds", pytest.approx(2.0))
    assert frame["ci_low"].iloc[0] == pytest.approx(2.0) == frame["ci_high"].iloc[0]
    # identical margins across runs: zero-width interval at the margin
    frame = evaluate(table1(), COMPARE, k=3)
    assert frame["ci_low"].iloc[0] == frame["ci_high"].iloc[0] == frame["margin"].iloc[0]
    # the same inputs give the same bytes (a seeded generator, not the global one)
    noisy = pd.concat([runs_of("federico", [0.9, 0.8, 0.85], GRID[:3]),
                       runs_of("local", [0.85, 0.83, 0.8], GRID[:3])], ignore_index=True)
    first = evaluate(noisy, COMPARE, k=1)
    np.random.seed(123)
    assert first.to_csv() == evaluate(noisy, COMPARE, k=1).to_csv()


# --------------------------------------------------------------------------- weight checks
#: 4 clients, distributions 0, 0, 1, 1. Row i: client i's weights on peers 0..3.
FINAL = [[0.5, 0.3, 0.1, 0.1],   # same distribution: 0.5 + 0.3 = 0.8; peak 0.5
         [0.2, 0.6, 0.2, 0.0],   # 0.8; peak 0.6
         [0.0, 0.0, 0.7, 0.3],   # 1.0; peak 0.7
         [0.1, 0.1, 0.4, 0.4]]   # 0.8; peak 0.4


EARLY = np.full((4, 4), 0.25)


def weights_run(method: str = "federico", final: Any = FINAL, groups: Sequence[int] = (0, 0, 1, 1),
                **kw: Any) -> pd.DataFrame:
    n = len(groups)
    return make_run(method, {0: [0.1] * n, 2: [0.5] * n}, groups=groups,
                    weights={0: EARLY, 1: EARLY, 2: final}, **kw)


def test_weight_mass_by_hand() -> None:
    agg = weights_run()
    check = {"type": "weight_mass", "method": "federico", "threshold": 0.6}
    # share of the peer weight (itself excluded) on same-distribution peers:
    # 0.3 / 0.5 = 0.6, 0.2 / 0.4 = 0.5, 0.3 / 0.3 = 1.0, 0.4 / 0.6 = 2/3 -> mean 0.691667
    frame = evaluate(agg, check)
    assert one(frame) == ("holds", pytest.approx(2.7666667 / 4 - 0.6))
    assert frame["unit"].iloc[0] == "weight"
    assert one(evaluate(agg, {**check, "threshold": 0.8})) == (
        "fails", pytest.approx(2.7666667 / 4 - 0.8))
    # no distribution ids (IID): the check is not defined on these data
    frame = evaluate(weights_run(groups=(-1, -1, -1, -1)), check)
    assert one(frame)[0] == "undecidable" and "distribution id" in frame["numbers"].iloc[0]
    # a method without weight rows: missing
    frame = evaluate(agg, {**check, "method": "fedem"})
    assert one(frame)[0] == "missing" and "fedem is not in exp" in frame["numbers"].iloc[0]
    design = {"exp": Design(("p2",), ("federico", "fedem"), ((0, 0), (0, 100)))}
    frame = evaluate(agg, {**check, "method": "fedem"}, design=design)
    assert one(frame)[0] == "missing" and "no weight rows of fedem" in frame["numbers"].iloc[0]


def test_weight_mass_identity_weights_fail() -> None:
    # no collaboration at all: every client's weight on itself. The old check counted the
    # self-weight as same-distribution mass (1.0 >= 0.95: holds by +0.05); without it no
    # client puts any weight on a same-distribution peer: share 0, fails by 0.95
    check = {"type": "weight_mass", "method": "federico", "threshold": 0.95}
    assert one(evaluate(weights_run(final=np.eye(4)), check)) == (
        "fails", pytest.approx(-0.95))
    # two runs averaged: identity (0) and FINAL (0.691667): 0.345833
    agg = pd.concat([weights_run(final=np.eye(4)), weights_run(split_seed=1)],
                    ignore_index=True)
    frame = evaluate(agg, {**check, "threshold": 0.3})
    assert one(frame)[1] == pytest.approx(2.7666667 / 8 - 0.3)
    assert one(frame)[0] == "inconclusive"  # the runs are at -0.3 and +0.39


def test_group_contrast_by_hand() -> None:
    # within (i != j, same distribution): w01 0.3, w10 0.2, w23 0.3, w32 0.4 -> 0.3
    # across: 0.1 0.1 0.2 0.0 0.0 0.0 0.1 0.1 -> 0.6 / 8 = 0.075; ratio 4
    # gap 0.3 - 0.075 = 0.225, above the floor 0.02 (0.225 - 0.02 = 0.205 > 0.15)
    contrast = {"type": "group_contrast", "method": "federico", "min_ratio": 2,
                "min_gap": 0.02}
    frame = evaluate(weights_run(), contrast)
    assert one(frame) == ("holds", pytest.approx(0.3 - 2 * 0.075))
    assert "within 0.3 vs across 0.075, ratio 4" in frame["numbers"].iloc[0]
    assert one(evaluate(weights_run(), {**contrast, "min_ratio": 5})) == (
        "fails", pytest.approx(0.3 - 5 * 0.075))
    flipped = np.array(FINAL)[:, [2, 3, 0, 1]]  # weight moved to the other distribution
    assert one(evaluate(weights_run(final=flipped), contrast))[0] == "fails"
    # every client alone in its distribution: no within pairs -> undecidable
    assert one(evaluate(weights_run(groups=(0, 1, 2, 3)), contrast))[0] == "undecidable"


def test_group_contrast_needs_its_ratio() -> None:
    # within 0.2675, across 0.25: ratio 1.07, no visible preference. The old check
    # (within > across) held by +0.0175; with min_ratio 2 it fails by 0.2675 - 0.5 (the
    # gap's margin, 0.0175 - 0.02, is the smaller miss)
    near = np.full((4, 4), 0.25)
    near[0, 1] = near[1, 0] = near[2, 3] = near[3, 2] = 0.2675
    frame = evaluate(weights_run(final=near), {"type": "group_contrast", "method": "federico",
                                               "min_ratio": 2, "min_gap": 0.02})
    assert one(frame) == ("fails", pytest.approx(0.2675 - 0.5))
    assert "ratio 1.07" in frame["numbers"].iloc[0]
    with pytest.raises(ClaimsError, match=r"missing key\(s\) \['min_ratio'\]"):
        claims_of({"type": "group_contrast", "method": "federico", "min_gap": 0.02})
    with pytest.raises(ClaimsError, match="outside"):
        claims_of({"type": "group_contrast", "method": "federico", "min_ratio": 1,
                   "min_gap": 0.02})


def test_weight_compare_peak_and_variation() -> None:
    agg = pd.concat([weights_run("federico_accumulative", final=np.eye(4)), weights_run()],
                    ignore_index=True)
    peak = {"type": "weight_compare", "statistic": "peak", "a": "federico_accumulative",
            "b": "federico", "op": ">"}
    # peaks: one-hot 1.0; FINAL (0.5 + 0.6 + 0.7 + 0.4) / 4 = 0.55 -> +0.45
    assert one(evaluate(agg, peak)) == ("holds", pytest.approx(0.45))
    # variation: rounds 0 -> 1 no change; 1 -> 2 mean |w - 0.25|
    # eye: (4 * 0.75 + 12 * 0.25) / 16 = 0.375
    # FINAL: |.25|.05|.15|.15| + |.05|.35|.05|.25| + |.25|.25|.45|.05| + |.15|.15|.15|.15|
    #        = 0.6 + 0.7 + 1.0 + 0.6 = 2.9 -> 2.9 / 16 = 0.18125
    variation = {**peak, "statistic": "variation", "op": "<"}
    assert one(evaluate(agg, variation)) == ("fails", pytest.approx(0.18125 - 0.375))


def test_peak_already_one_hot_is_undecidable() -> None:
    # both one-hot: the EMA variant's peak is already 1, the accumulative one cannot be
    # higher. The old check failed (margin 0 for a strict '>'); now undecidable, with why
    agg = pd.concat([weights_run("federico_accumulative", final=np.eye(4)),
                     weights_run(final=np.eye(4))], ignore_index=True)
    peak = {"type": "weight_compare", "statistic": "peak", "a": "federico_accumulative",
            "b": "federico", "op": ">"}
    frame = evaluate(agg, peak)
    assert one(frame)[0] == "undecidable" and math.isnan(one(frame)[1])
    assert "already 1 (one-hot) in every run" in frame["numbers"].iloc[0]
    # one run of b below 1: decidable again (here: holds, (1 - 0.55) / 2 per run mean)
    agg2 = pd.concat([agg, weights_run("federico_accumulative", final=np.eye(4), split_seed=1),
                      weights_run(split_seed=1)], ignore_index=True)
    assert one(evaluate(agg2, peak))[0] == "inconclusive"  # margins 0 and 0.45 per run
    assert one(evaluate(agg2, peak))[1] == pytest.approx(0.225)


def test_components_used_and_distribution_filter() -> None:
    # FedEM-like: 4 clients of 4 distributions, 4 components; top components 3, 3, 1, 3
    mixture = [[0.1, 0.1, 0.1, 0.7], [0.0, 0.2, 0.0, 0.8], [0.1, 0.6, 0.2, 0.1],
               [0.3, 0.0, 0.0, 0.7]]
    agg = pd.concat([
        weights_run("fedem", final=mixture, groups=(0, 1, 2, 3), partition="p4"),
        weights_run("fedem", final=np.eye(4), groups=(0, 0, 1, 1), partition="p2"),
    ], ignore_index=True)
    check = {"type": "components_used", "method": "fedem", "distributions": [4]}
    frame = evaluate(agg, check)
    assert one(frame) == ("holds", pytest.approx(4 - 2 - 1))  # 2 components used of 4
    assert frame["unit"].iloc[0] == "components"
    # without the filter p2 counts too: 4 components used for 2 distributions -> -3
    assert one(evaluate(agg, {"type": "components_used", "method": "fedem"})) == (
        "fails", pytest.approx(-3.0))
    # a filter no column matches: undecidable (every column ran; none has 5)
    frame = evaluate(agg, {**check, "distributions": [5]})
    assert one(frame)[0] == "undecidable" and "no column with 5 distributions" in \
        frame["numbers"].iloc[0]


# --------------------------------------------------------------------------- rows, writing, CLI
def test_rows_without_experiments_and_planned_claims() -> None:
    claims = parse_claims(doc(
        _claim(experiments={"paper": [], "cpu": ["exp"]}),
        _claim(id="later", planned=True, experiments={"paper": ["fedmix_x"], "cpu": []}),
        _claim(id="absent", experiments={"paper": ["not_in_config"], "cpu": []}),
    ))
    # a claim naming no experiment at the scale (cpu-only "x") is no row there; one
    # naming experiments the config lacks (planned or not) is a missing row
    frame = evaluate_claims(claims, table1(), "paper", design=design_from(table1()))
    assert frame["id"].tolist() == ["later", "absent"]
    assert frame["verdict"].tolist() == ["missing", "missing"]
    assert frame["experiment"].tolist() == ["fedmix_x", "not_in_config"]
    assert frame["numbers"].iloc[0].startswith("planned experiment; ")
    assert "not_in_config is not in the config" in frame["numbers"].iloc[1]
    # at the cpu scale only "x" names an experiment
    cpu = evaluate_claims(claims, table1(), "cpu", design=design_from(table1()))
    assert cpu["id"].tolist() == ["x"] and cpu["experiment"].tolist() == ["exp"]
    assert row_keys(claims, "cpu") == [("x", "exp")]
    # no claim at the scale at all: an empty table with the columns
    none = evaluate_claims(claims[1:], None, "cpu", design={})
    assert none.empty and list(none.columns) == list(COLUMNS)
    assert list(frame.columns) == list(COLUMNS)
    with pytest.raises(ValueError, match="unknown scale"):
        evaluate_claims(claims, None, "gpu", design={})


def test_float_rounding_ties_count_as_zero() -> None:
    # equal accuracies that differ by float rounding only: a strict '<' is a tie
    # (undecidable), a non-strict '<=' holds at zero
    a = final_run("federico", 0.9)
    b = final_run("local", 0.9)
    b.loc[b["metric"] == TEST_ACCURACY, "value"] += 1e-10  # 1e-8 points
    frame = evaluate(pd.concat([a, b], ignore_index=True), {**COMPARE, "op": "<"})
    assert one(frame) == ("undecidable", 0.0) and "tie" in frame["numbers"].iloc[0]
    assert one(evaluate(pd.concat([a, b], ignore_index=True), {**COMPARE, "op": "<="})) == (
        "holds", 0.0)


# --------------------------------------------------------------------------- across experiments
def across_runs(het: Sequence[float], hom: Sequence[float], *, het_partition: str = "p2",
                hom_seeds: Sequence[int] | None = None) -> pd.DataFrame:
    """perfedckt in experiment 'het' and 'hom', run k with train seed k, final accuracies."""
    hom_seeds = list(range(len(hom))) if hom_seeds is None else list(hom_seeds)
    return pd.concat(
        [final_run("perfedckt", a, experiment="het", partition=het_partition, train_seed=k)
         for k, a in enumerate(het)]
        + [final_run("perfedckt", a, experiment="hom", train_seed=k)
           for k, a in zip(hom_seeds, hom, strict=True)], ignore_index=True)


def across(agg: pd.DataFrame, check: Mapping[str, Any] = ACROSS, k: int = 2) -> pd.DataFrame:
    return evaluate(agg, check, k=k, experiments=("het", "hom"), scope="together")


def test_across_experiments_by_hand() -> None:
    agg = across_runs([0.75], [0.77])   # |75 - 77| = 2 points
    frame = across(agg, {**ACROSS, "tolerance": 3.0})
    assert one(frame) == ("holds", pytest.approx(3.0 - 2.0))
    assert frame["experiment"].iloc[0] == "het + hom"
    assert frame["numbers"].iloc[0] == "perfedckt (het) vs perfedckt (hom): p2 75.0 vs 77.0"
    assert one(across(agg, {**ACROSS, "tolerance": 1.0})) == ("fails", pytest.approx(-1.0))
    # the other sign of the gap is the same distance
    assert one(across(across_runs([0.77], [0.75]), {**ACROSS, "tolerance": 1.0})) == (
        "fails", pytest.approx(-1.0))


def test_across_experiments_pairs_runs_by_seed() -> None:
    # runs differ by 10 points between seeds but by exactly 1 within a seed pair: the
    # paired interval is [0.5, 0.5] (tolerance 1.5); resampling the two experiments
    # independently would give gaps up to 11 points
    agg = across_runs([0.70, 0.80], [0.71, 0.81])
    frame = across(agg, {**ACROSS, "tolerance": 1.5}, k=1)
    assert one(frame) == ("holds", pytest.approx(0.5))
    assert float(frame["ci_low"].iloc[0]) == pytest.approx(0.5)
    assert float(frame["ci_high"].iloc[0]) == pytest.approx(0.5)


def test_across_experiments_missing_and_undecidable() -> None:
    # the reference experiment lacks the column: missing
    frame = across(across_runs([0.75], [0.75], het_partition="p4"))
    assert one(frame)[0] == "missing"
    assert "p4 is not a column of hom" in frame["numbers"].iloc[0]
    # the experiments ran different seed pairs: the runs cannot be paired
    agg = across_runs([0.75, 0.75], [0.75, 0.75], hom_seeds=[5, 6])
    frame = across(agg, k=1)
    assert one(frame)[0] == "undecidable"
    assert "different seed pairs" in frame["numbers"].iloc[0]
    # the reference experiment has no results at all
    agg = across_runs([0.75], [0.75])
    design = design_from(copies(agg))
    design["hom"] = Design(("p2",), ("perfedckt",), ((0, 0), (0, 100)))
    frame = evaluate(agg[agg["experiment"] == "het"], ACROSS, design=design,
                     experiments=("het", "hom"), scope="together")
    assert one(frame)[0] == "missing" and "no results for hom" in frame["numbers"].iloc[0]


def test_communication_across_experiments_by_hand() -> None:
    # perfedckt in 'het' 2 * (1 + 1 + 2 + 2) = 12 scalars, in 'hom' 2 * (2 + 2 + 2 + 2) = 16:
    # hom / het = 4 / 3; margin 4/3 - 1
    agg = pd.concat([traffic_run("perfedckt", [1, 1], [2, 2], experiment="het"),
                     traffic_run("perfedckt", [2, 2], [2, 2], experiment="hom")],
                    ignore_index=True)
    check = {"type": "communication_across", "method": "perfedckt", "factor": 1, "op": ">"}
    frame = evaluate(agg, check, experiments=("het", "hom"), scope="together")
    assert one(frame) == ("holds", pytest.approx(4 / 3 - 1))
    assert frame["unit"].iloc[0] == "ratio"
    assert "p2 12 vs 16 = 1.333x" in frame["numbers"].iloc[0]
    # the same traffic in both (logits do not depend on the model): ratio 1, strict: a tie
    same = pd.concat([traffic_run("perfedckt", [1, 1], [2, 2], experiment=e)
                      for e in ("het", "hom")], ignore_index=True)
    assert one(evaluate(same, check, experiments=("het", "hom"), scope="together")) == (
        "undecidable", 0.0)
    # a reference without traffic rows: missing
    bare = pd.concat([agg[agg["experiment"] == "het"],
                      final_run("perfedckt", 0.8, experiment="hom")], ignore_index=True)
    frame = evaluate(bare, check, experiments=("het", "hom"), scope="together")
    assert one(frame)[0] == "missing"


def test_above_all_pooled_means() -> None:
    # methods a 90, b 70 (mean 80); baselines c 75, d 78 (mean 76.5): +3.5 pooled, while
    # each pair would fail (b 70 < c 75)
    agg = pd.concat([final_run(m, v) for m, v in
                     (("a", 0.90), ("b", 0.70), ("c", 0.75), ("d", 0.78))], ignore_index=True)
    pooled = {"type": "above_all", "metric": "weighted_final", "methods": ["a", "b"],
              "baselines": ["c", "d"], "pool": "mean"}
    frame = evaluate(agg, pooled)
    assert one(frame) == ("holds", pytest.approx(3.5))
    assert frame["numbers"].iloc[0] == "mean of a/b vs mean of c, d: p2 80.0 vs 76.5"
    assert frame["predicate"].iloc[0].startswith("mean of a, b > mean of c, d")
    each = {k: v for k, v in pooled.items() if k != "pool"}
    assert one(evaluate(agg, each)) == ("fails", pytest.approx(70 - 78))
    # a method without runs: missing, never holding
    frame = evaluate(agg[agg["method"] != "d"], pooled)
    assert one(frame)[0] == "missing"


def test_unchecked_claims_are_undecidable_or_planned_missing() -> None:
    check = {"type": "unchecked", "reason": "the runs record no per-class gate"}
    frame = evaluate(table1(), check)
    assert one(frame)[0] == "undecidable" and math.isnan(one(frame)[1])
    assert frame["numbers"].iloc[0] == "not checkable: the runs record no per-class gate"
    claims = parse_claims(doc(_claim(id="later", planned=True, check=check,
                                     experiments={"paper": ["x"], "cpu": []})))
    frame = evaluate_claims(claims, table1(), "paper", design=design_from(table1()))
    assert one(frame)[0] == "missing"
    assert frame["numbers"].iloc[0] == ("planned experiment; not checkable: the runs record "
                                        "no per-class gate")
