"""pflrepro.reporting.communication: traffic summed per run, by hand."""

import pandas as pd
import pytest

from pflrepro.reporting.communication import (
    communication_table,
    per_run_traffic,
    write_communication,
)
from pflrepro.store import results as R


def _run(method: str, seed: int, up: float, down: float, acc: float) -> pd.DataFrame:
    log = R.MetricLog()
    log.add_per_client(0, R.N_TEST, [10, 30])
    log.add_per_client(0, R.COMM_UP, [0.0, 0.0])
    log.add_per_client(0, R.COMM_DOWN, [5.0, 5.0])  # initialisation
    for rnd in (1, 2):
        log.add_per_client(rnd, R.COMM_UP, [up, up])
        log.add_per_client(rnd, R.COMM_DOWN, [down, down])
        log.add_per_client(rnd, R.TEST_ACCURACY, [acc, acc])
    config = {c: "x" for c in R.CONFIG_COLUMNS}
    config.update(method=method, algorithm=method, partition="p", split_seed=seed,
                  train_seed=0)
    return log.to_frame(config)


def test_totals_and_means_by_hand(tmp_path):
    agg = pd.concat([_run("fedavg", 0, 100, 100, 0.5), _run("fedavg", 1, 100, 100, 0.7),
                     _run("local", 0, 0, 0, 0.4)], ignore_index=True)
    runs = per_run_traffic(agg)
    # 2 clients x (2 rounds x (100 + 100)) + 2 x 5 at round 0 = 810
    assert runs.loc[runs["method"] == "fedavg", "total"].tolist() == [810.0, 810.0]
    table = communication_table(agg, methods_order=["local", "fedavg"])
    assert table["method"].tolist() == ["local", "fedavg"]
    row = table.set_index("method").loc["fedavg"]
    assert row["runs"] == 2 and row["accuracy"] == pytest.approx(60.0)
    assert row["up_per_client_round"] == 100.0 and row["total"] == 810.0
    assert table.set_index("method").loc["local", "total"] == 10.0
    md, csv = tmp_path / "c.md", tmp_path / "c.csv"
    write_communication(table, md, csv, caption="cap")
    assert "| FedAvg | p | 2 | 60.0 | 1.00e+02 | 1.00e+02 | 8.10e+02 |" in md.read_text()
    assert pd.read_csv(csv)["total"].tolist() == [10.0, 810.0]
    assert "fedavg" in pd.read_csv(csv)["method"].tolist()  # the CSV keeps the ids
    assert "chosen on validation" not in md.read_text()
    # a tuned method's sentence ends the note; the CSV does not change
    before = csv.read_bytes()
    write_communication(table, md, csv, caption="cap",
                        tuning=["fedavg: mu chosen on validation from {0.1, 1}: p split 0: 1."])
    assert md.read_text().rstrip().endswith(
        "means over the runs. fedavg: mu chosen on validation from {0.1, 1}: p split 0: 1.")
    assert csv.read_bytes() == before


def test_runs_without_traffic_are_named():
    agg = _run("fedavg", 0, 1, 1, 0.5)
    with pytest.raises(ValueError, match="no comm_up"):
        per_run_traffic(agg[~agg["metric"].isin([R.COMM_UP, R.COMM_DOWN])])
    other = _run("fedprox", 0, 1, 1, 0.5)
    other = other[~other["metric"].isin([R.COMM_UP, R.COMM_DOWN])]
    with pytest.raises(ValueError, match="fedprox / p .* logged no traffic"):
        per_run_traffic(pd.concat([agg, other], ignore_index=True))
