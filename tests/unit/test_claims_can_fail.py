"""Every check type can fail: for each, a run table under which it holds and one under
which it fails (two identical copies of each run, so the interval has zero width and the
verdict is the margin's sign). Margins by hand in the comments."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest
from _claims_helpers import (
    COMPARE,
    block,
    evaluate,
    final_run,
    make_run,
    one,
    traffic,
    weight_run,
)

from pflrepro.reporting.claims.parse import CHECK_TYPES
from pflrepro.store.results import CLUSTER, EXPERT_POSTERIOR

G4 = {"partition": "p4", "groups": (0, 1, 2, 3)}
#: 4 clients, distributions 0, 0, 1, 1: weight spread over the client's own distribution
BLOCK = np.kron(np.eye(2), np.full((2, 2), 0.5))
#: the same weight moved to the other distribution
SWAPPED = BLOCK[:, [2, 3, 0, 1]]
#: 0.9 on itself, 0.1 spread over the three others: peak 0.9
NEAR = 0.9 * np.eye(4) + 0.1 / 3 * (1 - np.eye(4))
#: 8 clients of distributions 0, 1, 1, 1, 2, 2, 2, 3 (0 and 7 alone in theirs)
LONE = (0, 1, 1, 1, 2, 2, 2, 3)


def _concat(*frames: pd.DataFrame) -> pd.DataFrame:
    return pd.concat(frames, ignore_index=True)


def _clusters(ids: list[int]) -> pd.DataFrame:
    return make_run("clustered_fl", {0: [0.1] * 4, 10: [0.5] * 4}, groups=(0, 0, 1, 1),
                    per_client={CLUSTER: {10: [float(c) for c in ids]}})


def _q(final: list[list[float]]) -> pd.DataFrame:
    return make_run("fedmix", {0: [0.1] * 4, 10: [0.8] * 4}, groups=(0, 0, 1, 1),
                    matrices={EXPERT_POSTERIOR: {10: final}})


TWO = {"experiments": ("het", "hom"), "scope": "together"}

#: type -> (check, run table under which it holds, one under which it fails, evaluate's kw)
CASES: dict[str, tuple[dict[str, Any], Callable[[], pd.DataFrame],
                       Callable[[], pd.DataFrame], dict[str, Any]]] = {
    # 90 > 85 (+5); 80 > 85 (-5)
    "compare": (COMPARE,
                lambda: _concat(final_run("federico", 0.9), final_run("local", 0.85)),
                lambda: _concat(final_run("federico", 0.8), final_run("local", 0.85)), {}),
    # 90 above 85 and 60 (+5); 80 below 85 (-5)
    "above_all": ({"type": "above_all", "metric": "weighted_final", "methods": ["federico"],
                   "baselines": ["local", "fedavg"]},
                  lambda: _concat(final_run("federico", 0.9), final_run("local", 0.85),
                                  final_run("fedavg", 0.6)),
                  lambda: _concat(final_run("federico", 0.8), final_run("local", 0.85),
                                  final_run("fedavg", 0.6)), {}),
    # |85 - 86| <= 2 (+1); |85 - 90| <= 2 (-3)
    "within": ({"type": "within", "metric": "weighted_final", "methods": ["federico"],
                "reference": "local", "tolerance": 2.0},
               lambda: _concat(final_run("federico", 0.85), final_run("local", 0.86)),
               lambda: _concat(final_run("federico", 0.85), final_run("local", 0.9)), {}),
    # 2 distributions 70 -> 4 distributions 60 (+10); 60 -> 70 (-10)
    "trend": ({"type": "trend", "metric": "weighted_final", "method": "fedavg",
               "direction": "decreasing"},
              lambda: _concat(final_run("fedavg", 0.7), final_run("fedavg", 0.6, **G4)),
              lambda: _concat(final_run("fedavg", 0.6), final_run("fedavg", 0.7, **G4)), {}),
    # share of peer weight on the group-mate: 1 (1 - 0.8); 0 (-0.8)
    "weight_mass": ({"type": "weight_mass", "method": "federico", "threshold": 0.8},
                    lambda: weight_run("federico", BLOCK, (0, 0, 1, 1)),
                    lambda: weight_run("federico", SWAPPED, (0, 0, 1, 1)), {}),
    # lone clients' self weight 1 (+0.1); 0.3 (-0.6)
    "self_weight": ({"type": "self_weight", "method": "federico", "threshold": 0.9},
                    lambda: weight_run("federico", block(LONE, 1.0), LONE),
                    lambda: weight_run("federico", block(LONE, 0.3), LONE), {}),
    # models used = distribution size (0); uniform 1/8: 8 used for 2.5 (-5.5)
    "weight_support": ({"type": "weight_support", "method": "federico", "threshold": 0.01},
                       lambda: weight_run("federico", block(LONE, 1.0), LONE),
                       lambda: weight_run("federico", np.full((8, 8), 1 / 8), LONE), {}),
    # same final weights (0.05 - 0); BLOCK vs SWAPPED: every entry differs by 0.5 (-0.45)
    "weight_distance": ({"type": "weight_distance", "a": "federico", "b": "local",
                         "tolerance": 0.05},
                        lambda: _concat(weight_run("federico", BLOCK, (0, 0, 1, 1)),
                                        weight_run("local", BLOCK, (0, 0, 1, 1))),
                        lambda: _concat(weight_run("federico", BLOCK, (0, 0, 1, 1)),
                                        weight_run("local", SWAPPED, (0, 0, 1, 1))), {}),
    # within 0.5, across 0: min(0.5 - 0, 0.5 - 0.02); swapped: within 0, across 0.5
    "group_contrast": ({"type": "group_contrast", "method": "federico", "min_ratio": 2,
                        "min_gap": 0.02},
                       lambda: weight_run("federico", BLOCK, (0, 0, 1, 1)),
                       lambda: weight_run("federico", SWAPPED, (0, 0, 1, 1)), {}),
    # peak: one-hot 1 > BLOCK 0.5 (+0.5); BLOCK 0.5 > NEAR 0.9 (-0.4)
    "weight_compare": ({"type": "weight_compare", "statistic": "peak", "a": "federico",
                        "b": "local", "op": ">"},
                       lambda: _concat(weight_run("federico", np.eye(4), (0, 0, 1, 1)),
                                       weight_run("local", BLOCK, (0, 0, 1, 1))),
                       lambda: _concat(weight_run("federico", BLOCK, (0, 0, 1, 1)),
                                       weight_run("local", NEAR, (0, 0, 1, 1))), {}),
    # q one-hot per class: 1 (1 - 0.5); uniform over 4 experts: 0.25 (-0.25)
    "record_peak": ({"type": "record_peak", "method": "fedmix", "record": "expert_posterior",
                     "threshold": 0.5},
                    lambda: _q([[1.0, 0, 0, 0], [0, 1.0, 0, 0]]),
                    lambda: _q([[0.25] * 4, [0.25] * 4]), {}),
    # 2 distributions: 1 cluster (+1); 4 clusters (-2)
    "clusters_used": ({"type": "clusters_used", "method": "clustered_fl"},
                      lambda: _clusters([0, 0, 0, 0]), lambda: _clusters([0, 1, 2, 3]), {}),
    # |75 - 75.5| <= 1 (+0.5); |75 - 80| <= 1 (-4)
    "across_experiments": ({"type": "across_experiments", "metric": "weighted_final",
                            "method": "perfedckt", "tolerance": 1.0},
                           lambda: _concat(final_run("perfedckt", 0.75, experiment="het"),
                                           final_run("perfedckt", 0.755, experiment="hom")),
                           lambda: _concat(final_run("perfedckt", 0.75, experiment="het"),
                                           final_run("perfedckt", 0.8, experiment="hom")),
                           TWO),
    # 2 distributions, 2 components: top components 0, 0, 0, 0 -> 1 used (+1);
    # 8 clients of 4 distributions over 8 components, each its own: 8 used (4 - 8 = -4)
    "components_used": ({"type": "components_used", "method": "fedem"},
                        lambda: weight_run("fedem", [[0.9, 0.1]] * 4, (0, 0, 1, 1)),
                        lambda: weight_run("fedem", np.eye(8), (0, 0, 1, 1, 2, 2, 3, 3)), {}),
    # hom 16 / het 8 = 2 >= 1.5 (+0.5); hom 8 / het 8 = 1 (-0.5)
    "communication_across": ({"type": "communication_across", "method": "perfedckt",
                              "factor": 1.5, "op": ">="},
                             lambda: _concat(traffic("perfedckt", 1, experiment="het"),
                                             traffic("perfedckt", 2, experiment="hom")),
                             lambda: _concat(traffic("perfedckt", 1, experiment="het"),
                                             traffic("perfedckt", 1, experiment="hom")), TWO),
    # fedfomo 30 x perfedckt's traffic >= 25 x (+5); 20 x (-5)
    "communication_ratio": ({"type": "communication_ratio", "method": "perfedckt",
                             "baselines": ["fedfomo"], "factor": 25, "op": ">="},
                            lambda: _concat(traffic("perfedckt", 1), traffic("fedfomo", 30)),
                            lambda: _concat(traffic("perfedckt", 1), traffic("fedfomo", 20)),
                            {}),
}

MARGINS = {"compare": (5, -5), "above_all": (5, -5), "within": (1, -3), "trend": (10, -10),
           "weight_mass": (0.2, -0.8), "self_weight": (0.1, -0.6),
           "weight_support": (0, -5.5), "weight_distance": (0.05, -0.45),
           "group_contrast": (0.48, -1.0), "weight_compare": (0.5, -0.4),
           "record_peak": (0.5, -0.25), "clusters_used": (0, -3),
           "across_experiments": (0.5, -4), "components_used": (0, -5),
           "communication_across": (0.5, -0.5), "communication_ratio": (5, -5)}


def test_every_check_type_is_covered() -> None:
    assert set(CASES) == set(CHECK_TYPES) - {"unchecked"} == set(MARGINS)


@pytest.mark.parametrize("kind", sorted(CASES))
def test_a_check_holds_on_one_table_and_fails_on_another(kind: str) -> None:
    check, holding, failing, kw = CASES[kind]
    held, failed = MARGINS[kind]
    assert one(evaluate(holding(), check, **kw)) == ("holds", pytest.approx(held))
    assert one(evaluate(failing(), check, **kw)) == ("fails", pytest.approx(failed))
