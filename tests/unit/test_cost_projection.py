"""One projection of the paper grid from several experiments (reporting.cost_projection)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml

from pflrepro.cli import main
from pflrepro.reporting.cost_projection import combined_rates


def _rates(method: str, algorithm: str, s_per_sample: float) -> pd.DataFrame:
    return pd.DataFrame([{"method": method, "algorithm": algorithm, "device": "cpu",
                          "s_per_sample": s_per_sample, "overhead_s": 1.0}])


def test_the_first_experiment_measuring_an_algorithm_prices_it() -> None:
    rates = combined_rates(["a", "b"], [
        pd.concat([_rates("fedavg", "fedavg", 1e-3), _rates("local", "local", 2e-3)]),
        pd.concat([_rates("fedavg", "fedavg", 9e-3), _rates("fedamp", "fedamp", 5e-3)])])
    assert rates["method"].tolist() == ["fedavg (a)", "local (a)", "fedamp (b)"]
    assert rates["s_per_sample"].tolist() == [1e-3, 2e-3, 5e-3]
    with pytest.raises(ValueError, match="1 cost table"):
        combined_rates(["a", "b"], [_rates("fedavg", "fedavg", 1e-3)])


def test_the_command_writes_one_projection(tmp_path: Path) -> None:
    paper = {"methods": {"fedavg": {"algorithm": "fedavg"}, "ditto": {"algorithm": "ditto"}},
             "experiments": {"big": {
                 "dataset": "digits", "scale": "paper", "methods": ["fedavg", "ditto"],
                 "partitions": [{"scheme": "dirichlet", "clients": 4, "alpha": 0.5}],
                 "split_seeds": [0], "train_seeds": [0, 1],
                 "training": {"rounds": 20, "model": "mlp"}}}}
    (tmp_path / "paper.yaml").write_text(yaml.safe_dump(paper))
    costs = []
    for name, s in (("a", 1e-3), ("b", 9e-3)):
        _rates("fedavg", "fedavg", s).to_csv(tmp_path / f"{name}.csv", index=False)
        costs.append(str(tmp_path / f"{name}.csv"))
    md, csv = tmp_path / "p.md", tmp_path / "p.csv"
    assert main(["cost-projection", "--experiments", "a", "b", "--costs", *costs,
                 "--project", str(tmp_path / "paper.yaml"), "--md", str(md),
                 "--csv", str(csv)]) == 0
    frame = pd.read_csv(csv)
    assert frame["method"].tolist() == ["fedavg", "ditto"]
    assert frame["rate_from"].tolist()[0] == "fedavg (a) on cpu"
    text = md.read_text()
    assert text.count("## Projection of the paper-scale grid") == 1
    assert "1 experiment × method pair(s) not priced" in text
    from pflrepro.store.records import record_problem

    assert record_problem(md) is None and record_problem(csv) is None  # pflrepro verify's
