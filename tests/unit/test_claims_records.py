"""pflrepro.reporting.claims.checks.records: recorded matrices' peaks and cluster ids.

``record_peak`` on FedMix's q (``expert_posterior``: one row per class) and
``clusters_used`` on Clustered FL's per-client ``cluster`` ids; numbers by hand.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd
import pytest
from _claims_helpers import evaluate, make_run, one

from pflrepro.store.results import CLUSTER, EXPERT_POSTERIOR

PEAK = {"type": "record_peak", "method": "fedmix", "record": "expert_posterior",
        "threshold": 0.5}


def q_run(final: Any, method: str = "fedmix", **kw: Any) -> pd.DataFrame:
    """A FedMix-like run, 4 clients, q uniform at round 0 and ``final`` at round 10."""
    k = len(final[0])
    return make_run(method, {0: [0.1] * 4, 10: [0.8] * 4}, groups=(0, 0, 1, 1),
                    matrices={EXPERT_POSTERIOR: {0: [[1 / k] * k] * len(final), 10: final}},
                    **kw)


def test_record_peak_by_hand() -> None:
    # 3 classes, 4 experts: largest shares 0.7, 1.0, 0.25 -> mean 0.65
    q = [[0.7, 0.1, 0.1, 0.1], [0.0, 1.0, 0.0, 0.0], [0.25, 0.25, 0.25, 0.25]]
    frame = evaluate(q_run(q), PEAK)
    assert one(frame) == ("holds", pytest.approx(0.65 - 0.5))   # the final round's q
    assert frame["unit"].iloc[0] == "weight"
    assert "p2: 0.65" in frame["numbers"].iloc[0]
    # uniform q (no specialisation): 0.25 - 0.5
    assert one(evaluate(q_run([[0.25] * 4] * 3), PEAK)) == ("fails", pytest.approx(-0.25))
    # rows are normalised: [2, 2, 4, 0] is [0.25, 0.25, 0.5, 0]
    assert one(evaluate(q_run([[2, 2, 4, 0]]), PEAK)) == ("holds", pytest.approx(0.0))


def test_record_peak_missing_and_undecidable() -> None:
    frame = evaluate(q_run([[0.5, 0.5]]), {**PEAK, "method": "fedmix_shard"})
    assert one(frame)[0] == "missing" and "fedmix_shard is not in exp" in \
        frame["numbers"].iloc[0]
    frame = evaluate(q_run([[0.5, 0.5]]), {**PEAK, "record": "gate_mass"})
    assert one(frame)[0] == "missing" and "no gate_mass rows of fedmix" in \
        frame["numbers"].iloc[0]
    frame = evaluate(q_run([[0.5, 0.5], [0.0, 0.0]]), PEAK)
    assert one(frame)[0] == "undecidable" and "sums to zero" in frame["numbers"].iloc[0]


def cluster_run(ids: dict[int, Sequence[int]], groups: Sequence[int] = (0, 0, 1, 1, 2, 2),
                **kw: Any) -> pd.DataFrame:
    n = len(groups)
    return make_run("clustered_fl", {0: [0.1] * n, 10: [0.5] * n}, groups=groups,
                    per_client={CLUSTER: {r: [float(c) for c in v] for r, v in ids.items()}},
                    **kw)


CLUSTERS = {"type": "clusters_used", "method": "clustered_fl"}


def test_clusters_used_by_hand() -> None:
    # 3 distributions; at the last round 2 clusters (one split): fewer by 1, margin
    # 3 - 2 - 1 = 0 (on whole counts "fewer" is "at most one fewer")
    agg = cluster_run({0: [0] * 6, 5: [0, 0, 1, 1, 1, 1], 10: [0, 0, 0, 1, 1, 1]})
    frame = evaluate(agg, CLUSTERS)
    assert one(frame) == ("holds", pytest.approx(0.0))
    assert frame["unit"].iloc[0] == "clusters"
    assert "2 clusters at the end for 3 distributions" in frame["numbers"].iloc[0]
    # no split at all: 3 - 1 - 1 = 1
    assert one(evaluate(cluster_run({10: [0] * 6}), CLUSTERS)) == ("holds", pytest.approx(1.0))
    # split into the right clusters: as many as distributions, so not fewer: fails by
    # one (3 - 3 - 1), a whole count, never a tie; more clusters than distributions
    # fails by more: 3 - 6 - 1 = -4
    right = cluster_run({10: [0, 0, 1, 1, 2, 2]})
    assert one(evaluate(right, CLUSTERS)) == ("fails", -1.0)
    assert one(evaluate(cluster_run({10: [0, 1, 2, 3, 4, 5]}), CLUSTERS)) == (
        "fails", -4.0)


def test_clusters_used_missing_and_undecidable() -> None:
    frame = evaluate(make_run("clustered_fl", {0: [0.1] * 2, 10: [0.5] * 2}), CLUSTERS)
    assert one(frame)[0] == "missing" and "no cluster rows of clustered_fl" in \
        frame["numbers"].iloc[0]
    frame = evaluate(cluster_run({10: [0] * 4}, groups=(-1, -1, -1, -1)), CLUSTERS)
    assert one(frame)[0] == "undecidable" and "no distribution ids" in frame["numbers"].iloc[0]
