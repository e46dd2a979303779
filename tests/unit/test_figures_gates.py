"""FedMix gate figure: the panels and the per-group masses by hand, files, fit, CLI."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from _figure_helpers import (
    assert_figure_files,
    assert_names_not_ids,
    captured_figures,
    check_fits,
    make_run,
    weights_aggregate,
)

from pflrepro.cli import main
from pflrepro.reporting.figures.gates import (
    GATE_MASS,
    gate_mass_by_group,
    gate_panels,
    plot_gate_mass,
)

PART = "rotation-clients4-groups2"
#: clients 0..3 in groups [1, 0, 1, 0]; final-round mean gates over 2 experts
GATES_SEED0 = np.array([[0.1, 0.9], [0.8, 0.2], [0.3, 0.7], [0.6, 0.4]])
GATES_SEED1 = np.array([[0.0, 1.0], [1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])


def gates_aggregate(partitions: int = 1, clients: int = 4) -> pd.DataFrame:
    runs = []
    for p in range(partitions):
        part = PART if p == 0 else f"{PART}-{p}"
        for seed, final in ((1, GATES_SEED1), (0, GATES_SEED0)):
            final = final if clients == 4 else np.full((clients, 2), 0.5)
            runs.append(make_run({3: [0.5] * clients}, n_test=[1] * clients, method="fedmix",
                                 partition=part, split_seed=seed,
                                 groups=[1 - c % 2 for c in range(clients)],
                                 matrices={GATE_MASS: {0: np.full((clients, 2), 0.5),
                                                       3: final}}))
    return pd.concat(runs, ignore_index=True)


def test_metric_is_the_algorithms() -> None:
    from pflrepro.algorithms.fedmix import GATE_MASS as LOGGED

    assert GATE_MASS == LOGGED


def test_gate_panels_by_hand() -> None:
    (panel,) = gate_panels(gates_aggregate())
    assert panel.run["split_seed"] == 0 and panel.round == 3
    assert list(panel.matrix.index) == [1, 3, 0, 2]  # by (group, client)
    assert list(panel.matrix.columns) == [0, 1]
    assert panel.matrix.to_numpy().tolist() == GATES_SEED0[[1, 3, 0, 2]].tolist()
    assert panel.client_groups == [0, 0, 1, 1] and panel.peer_groups is None


def test_gate_mass_by_group_by_hand() -> None:
    table = gate_mass_by_group(gates_aggregate())
    assert table[["group", "expert"]].values.tolist() == [[0, 0], [0, 1], [1, 0], [1, 1]]
    # group 0 (clients 1, 3): seed 0 means [0.7, 0.3], seed 1 [1, 0] -> [0.85, 0.15]
    # group 1 (clients 0, 2): seed 0 means [0.2, 0.8], seed 1 [0, 1] -> [0.1, 0.9]
    assert table["mass"].tolist() == pytest.approx([0.85, 0.15, 0.1, 0.9])
    assert (table["runs"] == 2).all() and (table["partition"] == PART).all()
    with pytest.raises(ValueError, match="'federico'"):
        gate_mass_by_group(weights_aggregate(), "federico")


def test_plot_gate_mass(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    figures = captured_figures(monkeypatch)
    pdf, png = tmp_path / "g.pdf", tmp_path / "g.png"
    plot_gate_mass(gates_aggregate(), pdf, png, labels={PART: "rotated"})
    assert_figure_files(pdf, png)
    assert_names_not_ids(figures[0], ["fedmix"], {PART: "rotated"})
    with pytest.raises(ValueError, match="'fedavg'"):
        plot_gate_mass(gates_aggregate(), tmp_path / "x.pdf", tmp_path / "x.png", "fedavg")
    assert not (tmp_path / "x.pdf").exists()


@pytest.mark.parametrize(("partitions", "clients"), [(1, 4), (4, 20)])
def test_fits_any_number_of_panels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   partitions: int, clients: int) -> None:
    agg = gates_aggregate(partitions, clients)
    check_fits(monkeypatch, tmp_path, lambda pdf, png: plot_gate_mass(agg, pdf, png))


def test_cli_plot_gates(tmp_path: Path) -> None:
    agg = tmp_path / "agg.parquet"
    from pflrepro.store.io import write_parquet

    write_parquet(gates_aggregate(), agg)  # with its digest record (issue 27, item 3)
    pdf, png = tmp_path / "g.pdf", tmp_path / "g.png"
    labels = f'{{"partitions": {{"{PART}": "rotated, 2 angles"}}}}'
    assert main(["plot", "gates", "--aggregate", str(agg), "--method", "fedmix",
                 "--labels", labels, "--pdf", str(pdf), "--png", str(png)]) == 0
    assert_figure_files(pdf, png)
    assert main(["plot", "gates", "--aggregate", str(agg), "--method", "fedavg",
                 "--pdf", str(pdf), "--png", str(png)]) == 1
