"""pflrepro.reporting.claims.checks.weights: the weight checks on FedeRiCo's Fig. 3 structure.

Synthetic final-round weights with the block structure of FedeRiCo's Fig. 3: every
client with group-mates spreads its weight over its own distribution, every client
alone in its distribution puts all of it on itself. Numbers by hand.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import pytest
from _claims_helpers import block, evaluate, make_run, one

from pflrepro.reporting.claims.parse import Design

#: 8 clients; clients 0 and 7 are alone in their distribution (as the paper's client 0).
LONE_GROUPS = (0, 1, 1, 1, 2, 2, 2, 3)


def run(final: Any, groups: Sequence[int] = LONE_GROUPS, method: str = "federico",
        **kw: Any) -> pd.DataFrame:
    n = len(groups)
    return make_run(method, {0: [0.1] * n, 2: [0.5] * n}, groups=groups,
                    weights={0: np.full((n, n), 1 / n), 2: final}, **kw)


MASS = {"type": "weight_mass", "method": "federico", "threshold": 0.8}
NEAR_ZERO = {**MASS, "threshold": 0.95}
LONE = {"type": "self_weight", "method": "federico", "threshold": 0.9}
SUPPORT = {"type": "weight_support", "method": "federico", "threshold": 0.01}


def test_fig3_block_structure_with_lone_clients_holds() -> None:
    # Every client with group-mates puts all its peer weight on them (share 1); the two
    # lone clients put all their weight on themselves. The former statistic gave the
    # lone clients share 0: mean 6 / 8 = 0.75, so ">= 0.8" failed by 0.05 and ">= 0.95"
    # by 0.2 on exactly the structure the paper shows. They are left out now: share 1.
    agg = run(block(LONE_GROUPS))
    assert one(evaluate(agg, MASS)) == ("holds", pytest.approx(1.0 - 0.8))
    assert one(evaluate(agg, NEAR_ZERO)) == ("holds", pytest.approx(1.0 - 0.95))
    # the lone clients are their own claim: self weight 1.0 >= 0.9
    frame = evaluate(agg, LONE)
    assert one(frame) == ("holds", pytest.approx(0.1))
    assert frame["unit"].iloc[0] == "weight"
    assert "1 in the 2 of 2 runs with a client alone" in frame["numbers"].iloc[0]
    # few models: each client weights exactly its distribution's models (margin 0)
    assert one(evaluate(agg, SUPPORT)) == ("holds", pytest.approx(0.0))


def test_weight_mass_still_fails_a_wrong_structure() -> None:
    # weight on the wrong distribution: client 1 (group 1) spreads over group 2 etc.
    wrong = block(LONE_GROUPS)[:, [0, 4, 5, 6, 1, 2, 3, 7]]
    assert one(evaluate(run(wrong), MASS)) == ("fails", pytest.approx(0.0 - 0.8))
    # identity weights: clients with group-mates collaborate with no one: share 0
    assert one(evaluate(run(np.eye(8)), MASS)) == ("fails", pytest.approx(-0.8))
    # ... while the lone clients' self weight is 1 there (their claim holds)
    assert one(evaluate(run(np.eye(8)), LONE))[0] == "holds"


def test_lone_client_that_spreads_its_weight_fails() -> None:
    # lone self weight 0.3: 0.3 - 0.9 = -0.6
    agg = run(block(LONE_GROUPS, lone_self=0.3))
    assert one(evaluate(agg, LONE)) == ("fails", pytest.approx(0.3 - 0.9))
    # its peers' share of the lone clients is not counted by weight_mass
    assert one(evaluate(agg, MASS)) == ("holds", pytest.approx(0.2))


def test_self_weight_reads_only_the_runs_with_a_lone_client() -> None:
    paired = (0, 0, 1, 1, 2, 2, 3, 3)  # no lone client
    # no run with a lone client: undecidable, with why
    frame = evaluate(run(block(paired), groups=paired), LONE)
    assert one(frame)[0] == "undecidable"
    assert "no client alone in its distribution" in frame["numbers"].iloc[0]
    # three splits, two of them with lone clients (self weights 1.0 and 0.6): the mean
    # over those two runs, 0.8, n = 2 (k = 1 copy of each split)
    agg = pd.concat([run(block(paired), groups=paired, split_seed=0),
                     run(block(LONE_GROUPS), split_seed=1),
                     run(block(LONE_GROUPS, lone_self=0.6), split_seed=2)],
                    ignore_index=True)
    frame = evaluate(agg, LONE, k=1)
    assert one(frame) == ("inconclusive", pytest.approx(0.8 - 0.9))
    assert int(frame["n"].iloc[0]) == 2
    assert frame["ci_low"].iloc[0] == pytest.approx(-0.3)  # both runs 0.6
    assert frame["ci_high"].iloc[0] == pytest.approx(0.1)  # both runs 1.0
    assert "in the 2 of 3 runs" in frame["numbers"].iloc[0]
    # a second column without lone clients (8 clients in 2 distributions) is left out;
    # alone it is undecidable (above)
    two = (0, 0, 0, 0, 1, 1, 1, 1)
    both = pd.concat([agg, *(run(block(two), groups=two, partition="p4", split_seed=s)
                             for s in (0, 1, 2))], ignore_index=True)
    frame = evaluate(both, LONE, k=1)
    assert one(frame) == ("inconclusive", pytest.approx(0.8 - 0.9))
    assert "p4: n/a in the 0 of 3 runs" in frame["numbers"].iloc[0]
    # one split missing: missing, as any check
    design = {"exp": Design(("p2",), ("federico",), ((0, 0), (1, 0), (2, 0), (3, 0)))}
    assert one(evaluate(agg, LONE, k=1, design=design))[0] == "incomplete"


def test_weight_support_by_hand() -> None:
    # uniform weights 1/8: every client needs all 8 models; distribution sizes
    # 1, 3, 3, 3, 3, 3, 3, 1 -> mean 20 / 8 = 2.5; margin 2.5 - 8 = -5.5
    frame = evaluate(run(np.full((8, 8), 1 / 8)), SUPPORT)
    assert one(frame) == ("fails", pytest.approx(2.5 - 8))
    assert frame["unit"].iloc[0] == "models"
    assert "8 models used for a distribution of 2.5 clients" in frame["numbers"].iloc[0]
    # below the floor a weight is not a needed model: 0.005 on the other distributions
    near = block(LONE_GROUPS) * 0.96 + 0.005
    assert one(evaluate(run(near), SUPPORT)) == ("holds", pytest.approx(0.0))


def test_same_share_statistic_of_weight_compare() -> None:
    # epsilon = 0 finds the wrong peers for client 1 and 2 (group 1): their peer weight
    # goes to group 2; shares over the six clients with mates: 0, 0, 1, 1, 1, 1 -> 2/3
    missed = block(LONE_GROUPS)
    missed[1] = missed[2] = [0, 0, 0, 0, 0.5, 0.5, 0, 0]
    agg = pd.concat([run(missed, method="federico_eps0"), run(block(LONE_GROUPS))],
                    ignore_index=True)
    check = {"type": "weight_compare", "statistic": "same_share", "a": "federico_eps0",
             "b": "federico", "op": "<"}
    assert one(evaluate(agg, check)) == ("holds", pytest.approx(1.0 - 4 / 6))


def test_weight_distance_by_hand() -> None:
    base = block(LONE_GROUPS)
    moved = base.copy()
    moved[0, 0], moved[0, 1] = 0.6, 0.4   # two entries change by 0.4: 0.8 / 64
    agg = pd.concat([run(base, method="federico_beta0.1"),
                     run(moved, method="federico_beta0.9")], ignore_index=True)
    check = {"type": "weight_distance", "a": "federico_beta0.1", "b": "federico_beta0.9",
             "tolerance": 0.05}
    frame = evaluate(agg, check)
    assert one(frame) == ("holds", pytest.approx(0.05 - 0.8 / 64))
    assert one(evaluate(agg, {**check, "tolerance": 0.01})) == (
        "fails", pytest.approx(0.01 - 0.8 / 64))
    # a method without runs: missing
    frame = evaluate(run(base, method="federico_beta0.1"), check)
    assert one(frame)[0] == "missing"
