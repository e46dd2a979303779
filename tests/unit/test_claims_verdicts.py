"""Verdicts that test what they say: ties, ceilings, material contrasts, rows counted apart.

Numbers by hand in the comments. Runs are built by :mod:`_claims_helpers` (two clients of
1000 test rows each unless stated, so one test row of a column is 100 / 2000 = 0.05 pp).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
from _claims_helpers import COMPARE, TIES, _claim, doc, evaluate, final_run, make_run, one

from pflrepro.reporting.claims.parse import BASES, ClaimsError, parse_claims
from pflrepro.reporting.claims.writer import summary_lines

LESS = {**COMPARE, "op": "<"}


def _runs(*pairs: tuple[str, float], **kw: Any) -> pd.DataFrame:
    return pd.concat([final_run(m, v, **kw) for m, v in pairs], ignore_index=True)


def _two_pairs() -> pd.DataFrame:
    """Two seed pairs: federico - local = 0 (90 vs 90) and -4 (80 vs 84)."""
    seeds = ((0, 0), (1, 1))
    return pd.concat([final_run("federico", f, split_seed=s, train_seed=t)
                      for f, (s, t) in zip((0.9, 0.8), seeds, strict=True)]
                     + [final_run("local", f, split_seed=s, train_seed=t)
                        for f, (s, t) in zip((0.9, 0.84), seeds, strict=True)],
                     ignore_index=True)


# --------------------------------------------------------------------------- item 1: ties
def test_zero_width_interval_at_the_threshold_is_a_tie_not_a_failure() -> None:
    # federico 90 = local 90 in every run: margin 0, interval [0, 0]. A strict '<' is
    # neither shown nor refuted: undecidable, reason tie (it used to fail)
    frame = evaluate(_runs(("federico", 0.9), ("local", 0.9)), LESS)
    assert one(frame) == ("undecidable", 0.0)
    row = frame.iloc[0]
    assert (row["ci_low"], row["ci_high"], row["n"]) == (0.0, 0.0, 2)
    assert "[undecidable: tie" in row["numbers"]
    # the non-strict '<=' holds at zero
    assert one(evaluate(_runs(("federico", 0.9), ("local", 0.9)), {**LESS, "op": "<="})) == (
        "holds", 0.0)


def test_fails_only_when_the_whole_interval_is_below_the_threshold() -> None:
    # two seed pairs: federico - local = 0 (90 vs 90) and -4 (80 vs 84). Resampled means
    # 0 (p 1/4), -2 (1/2), -4 (1/4): interval [-4, 0]. Its top is at the threshold, so a
    # strict '>' is not refuted: inconclusive (it used to fail)
    agg = _two_pairs()
    frame = evaluate(agg, COMPARE, k=1)
    assert one(frame) == ("inconclusive", pytest.approx(-2.0))
    assert (frame["ci_low"].iloc[0], frame["ci_high"].iloc[0]) == (pytest.approx(-4.0), 0.0)


def test_every_value_at_the_ceiling_or_floor_is_undecidable() -> None:
    # small-beta-converges-slower's case: both variants at 100 % in every run
    frame = evaluate(_runs(("federico", 1.0), ("local", 1.0)), LESS)
    assert one(frame)[0] == "undecidable"
    assert "[undecidable: ceiling" in frame["numbers"].iloc[0]
    # ... whatever the predicate: 'within' would hold by its tolerance, '<=' at zero
    within = {"type": "within", "metric": "weighted_final", "methods": ["federico"],
              "reference": "local", "tolerance": 1.0}
    assert one(evaluate(_runs(("federico", 1.0), ("local", 1.0)), within))[0] == "undecidable"
    assert one(evaluate(_runs(("federico", 1.0), ("local", 1.0)), {**LESS, "op": "<="}))[0] \
        == "undecidable"
    # every value at 0 %: floor
    frame = evaluate(_runs(("federico", 0.0), ("local", 0.0)), LESS)
    assert one(frame)[0] == "undecidable" and "[undecidable: floor" in frame["numbers"].iloc[0]
    # one method below the ceiling: decided (100 vs 99.5, '<' fails by 0.5)
    assert one(evaluate(_runs(("federico", 1.0), ("local", 0.995)), LESS)) == (
        "fails", pytest.approx(-0.5))


def test_a_difference_below_one_test_row_is_a_tie() -> None:
    # 2 clients x 10 test rows: one test row is 100 / 20 = 5 pp. 90 vs 87 differ by 3 pp
    # (less than one row of this column): a tie. It used to hold by +3
    small = {"n_test": [10, 10]}
    agg = pd.concat([final_run("federico", 0.90, **small), final_run("local", 0.87, **small)],
                    ignore_index=True)
    frame = evaluate(agg, COMPARE)
    assert one(frame)[0] == "undecidable" and "tie" in frame["numbers"].iloc[0]
    # 90 vs 80: two rows apart (10 pp), not a tie: holds
    agg = pd.concat([final_run("federico", 0.90, **small), final_run("local", 0.80, **small)],
                    ignore_index=True)
    assert one(evaluate(agg, COMPARE)) == ("holds", pytest.approx(10.0))


def test_a_weight_difference_below_the_quantum_is_a_tie() -> None:
    # small-epsilon-may-miss-collaborators' case: same_share 1.9e-6 lower with epsilon 0
    # (below the 0.001 quantum of weights): a tie. It used to hold by +1.9e-6
    base = np.array([[0.5, 0.3, 0.1, 0.1], [0.2, 0.6, 0.2, 0.0],
                     [0.0, 0.0, 0.7, 0.3], [0.1, 0.1, 0.4, 0.4]])
    shifted = base.copy()
    shifted[0, 1] -= 1.9e-6 * 4 * 0.5  # share of client 0: 0.3 / 0.5 -> 7.6e-6 lower
    shifted[0, 2] += 1.9e-6 * 4 * 0.5
    groups = (0, 0, 1, 1)
    agg = pd.concat([
        make_run("federico_eps0", {0: [0.1] * 4, 2: [0.5] * 4}, groups=groups,
                 weights={2: shifted}),
        make_run("federico", {0: [0.1] * 4, 2: [0.5] * 4}, groups=groups, weights={2: base})],
        ignore_index=True)
    check = {"type": "weight_compare", "statistic": "same_share", "a": "federico_eps0",
             "b": "federico", "op": "<"}
    frame = evaluate(agg, check)
    assert one(frame)[0] == "undecidable" and "tie" in frame["numbers"].iloc[0]


# --------------------------------------------------------------------------- item 1: the ties key
def test_ties_are_stated_in_the_claims_file() -> None:
    claims = parse_claims(doc(_claim()))
    assert claims[0].tie is None  # pp: one test row of the column, from the data
    weight = parse_claims(doc(_claim(check={"type": "weight_mass", "method": "f",
                                            "threshold": 0.5})))
    assert weight[0].tie == 0.001


@pytest.mark.parametrize(("ties", "message"), [
    ({k: v for k, v in TIES.items() if k != "ratio"}, r"ties: missing unit\(s\) \['ratio'\]"),
    ({**TIES, "speed": {"value": 1, "reason": "r"}}, r"ties: unknown unit\(s\) \['speed'\]"),
    ({**TIES, "pp": {"value": 0.5, "reason": "r"}}, "ties.pp: 0.5 is not 'one test row'"),
    ({**TIES, "weight": {"value": 1e-12, "reason": "r"}},
     r"ties.weight: 1e-12 is below the resolution of weight \(0.001\)"),
    ({**TIES, "clusters": {"value": 0.5, "reason": "r"}},
     r"ties.clusters: 0.5 is below the resolution of clusters \(1\)"),
    ({**TIES, "weight": {"value": 0.01}}, r"ties.weight: missing key\(s\) \['reason'\]"),
    ({**TIES, "weight": {"value": "x", "reason": "r"}}, "ties.weight.value: expected a number"),
    ({**TIES, "weight": 0.01}, "ties.weight: expected a mapping"),
])
def test_malformed_ties_are_refused_in_one_line(ties: Any, message: str) -> None:
    with pytest.raises(ClaimsError, match=message) as err:
        parse_claims({"claims": [_claim()], "ties": ties})
    assert "\n" not in str(err.value)


def test_a_claims_file_without_ties_is_refused() -> None:
    with pytest.raises(ClaimsError, match="the keys 'claims' and 'ties'"):
        parse_claims({"claims": [_claim()]})


# --------------------------------------------------------------------------- item 3: material
def _xi(self_weight: float, groups: tuple[int, ...] = (0, 0, 1, 1)) -> np.ndarray:
    """``self_weight`` on itself; of the rest 95 % to its group-mate, 5 % over the others."""
    n = len(groups)
    w = np.zeros((n, n))
    for i, g in enumerate(groups):
        mates = [j for j, h in enumerate(groups) if h == g and j != i]
        others = [j for j, h in enumerate(groups) if h != g]
        w[i, i] = self_weight
        w[i, mates] = (1 - self_weight) * 0.95 / len(mates)
        w[i, others] = (1 - self_weight) * 0.05 / len(others)
    return w


CONTRAST = {"type": "group_contrast", "method": "fedamp", "min_ratio": 2, "min_gap": 0.02}


def test_group_contrast_needs_a_material_gap() -> None:
    # near-identity xi: 0.99 on itself; within 0.0095, across 0.00025: ratio 38 (>= 2), but
    # the gap 0.0095 - 0.00025 = 0.00925 is below the floor 0.02: fails by 0.02 - 0.00925.
    # (Without the floor it held by 0.0095 - 2 x 0.00025 = 0.009.)
    agg = make_run("fedamp", {0: [0.1] * 4, 2: [0.5] * 4}, groups=(0, 0, 1, 1),
                   weights={2: _xi(0.99)})
    frame = evaluate(agg, CONTRAST)
    assert one(frame) == ("fails", pytest.approx(0.00925 - 0.02))
    assert "ratio 38" in frame["numbers"].iloc[0] and "gap 0.00925" in frame["numbers"].iloc[0]
    # half the weight on peers: within 0.475, across 0.0125: ratio 38, gap 0.4625; the
    # margin is the smaller of 0.475 - 2 x 0.0125 = 0.45 and 0.4625 - 0.02 = 0.4425
    agg = make_run("fedamp", {0: [0.1] * 4, 2: [0.5] * 4}, groups=(0, 0, 1, 1),
                   weights={2: _xi(0.5)})
    assert one(evaluate(agg, CONTRAST)) == ("holds", pytest.approx(0.4425))


def test_group_contrast_requires_its_floor() -> None:
    with pytest.raises(ClaimsError, match=r"missing key\(s\) \['min_gap'\]"):
        parse_claims(doc(_claim(check={"type": "group_contrast", "method": "f",
                                       "min_ratio": 2})))


# --------------------------------------------------------------------------- items 2, 4: apart
def test_by_design_and_selection_rows_are_counted_apart() -> None:
    agg = _runs(("federico", 0.9), ("local", 0.85))
    design = evaluate(agg, COMPARE, extra={"by_design": "4 / 3 matrices per client-round"})
    assert one(design) == ("holds", pytest.approx(5.0))
    assert design["basis"].iloc[0] == "by design"
    assert design["numbers"].iloc[0].startswith("by design: 4 / 3 matrices per client-round; ")
    chosen = evaluate(agg, COMPARE, extra={"selected_by": "warmup_rounds: 1 (config.yaml)"})
    assert chosen["basis"].iloc[0] == "selection"
    assert chosen["numbers"].iloc[0].startswith("selection: warmup_rounds: 1 (config.yaml); ")
    plain = evaluate(agg, COMPARE)
    assert plain["basis"].iloc[0] == "independent"
    assert tuple(BASES) == ("independent", "by design", "selection")
    # the summary counts verdicts of independent rows only, the others in their columns
    frame = pd.concat([plain, design, chosen], ignore_index=True)
    text = "\n".join(summary_lines(frame))
    assert ("| paper | rows | holds | fails | inconclusive | undecidable | incomplete "
            "| missing | by design | selection |") in text
    assert "| FedeRiCo | 3 | 1 | 0 | 0 | 0 | 0 | 0 | 1 | 1 |" in text
    with pytest.raises(ClaimsError, match="both by_design and selected_by"):
        parse_claims(doc(_claim(by_design="x", selected_by="y")))
    with pytest.raises(ClaimsError, match="non-empty string"):
        parse_claims(doc(_claim(selected_by=" ")))


def test_shipped_by_design_and_selection_claims() -> None:
    from _claims_helpers import REPO

    from pflrepro.reporting.claims.parse import load_claims

    claims = {c.id: c for c in load_claims(REPO / "config/claims.yaml")}
    designed = {i for i, c in claims.items() if c.by_design}
    # traffic is counted from the protocol (model sizes, the public set, c, R), never
    # from what the runs learn: every claim on it is by design
    traffic = {i for i, c in claims.items() if c.check.type.startswith("communication_")}
    assert designed == traffic and len(traffic) == 6
    # the arithmetic: R + c (R - 1) matrices per sampled client; R = 20: 96 / 77 = 1.247
    assert "96/77 = 1.247" in claims["perfedckt-communication-grows-with-c"].by_design
    # 2 P R / (500 R + 1500 (R - 1)) at P = 5,090, R = 20: 203,600 / 38,500 = 5.29
    assert "203,600 / 38,500 = 5.29" in claims["perfedckt-least-communication"].by_design
    selected = {i for i, c in claims.items() if c.selected_by}
    assert selected == {"federico-weight-on-own-distribution",
                        "federico-other-distributions-near-zero",
                        "federico-lone-client-uses-itself", "federico-few-models",
                        "federico-weights-within-above-across"}
    assert all("warmup_rounds: 1" in claims[i].selected_by for i in selected)


def test_an_inconclusive_row_says_how_many_seed_pairs_would_decide_it() -> None:
    from pflrepro.reporting.claims.checks.logic import pairs_needed

    # margin 1, interval [-1, 3] from 3 pairs: half-width 2; at 3 * (2/1)^2 = 12 pairs
    # the interval would touch 0, so 13 clear it
    assert pairs_needed(1.0, -1.0, 3.0, 3) == (
        "at the observed spread about 13 seed pairs would decide it (n = 3)")
    # a half-width just above the margin: one more pair at least
    assert "about 4 seed pairs" in pairs_needed(1.0, -0.01, 2.01, 3)
    assert "no number of seed pairs" in pairs_needed(0.0, -1.0, 1.0, 3)
    # and the reason of a real inconclusive row carries it
    agg = _two_pairs()
    frame = evaluate(agg, COMPARE, k=1)
    assert "seed pairs would decide it (n = 2)" in frame["numbers"].iloc[0]
