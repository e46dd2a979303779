"""pflrepro.store.paths: the stored artefacts' path patterns, shared by the workflow and io."""

from __future__ import annotations

from pflrepro.pipeline import workflow
from pflrepro.store import io, paths


def test_the_workflow_uses_these_patterns() -> None:
    for name in ("DATA_DIR", "PARTITION", "RUN", "METHOD_AGGREGATE", "AGGREGATE", "PUBLIC"):
        assert getattr(workflow, name) is getattr(paths, name)


def test_a_run_path_says_what_it_holds() -> None:
    path = "w/results/runs/e1/p-1/fedavg/split2-seed3.parquet"
    assert io.expected_identity(path) == {"kind": "run", "experiment": "e1",
                                          "partition": "p-1", "method": "fedavg",
                                          "split": "2", "seed": "3"}
    assert io.expected_identity("w/results/aggregate/e1.parquet")["kind"] == \
        "experiment_aggregate"
    assert io.expected_identity("w/elsewhere/x.parquet") is None
