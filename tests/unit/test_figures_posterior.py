"""FedMix q(z|y) figure: the panels by hand, files, fit for 100 classes, CLI."""

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
)

from pflrepro.cli import main
from pflrepro.reporting.figures.posterior import (
    EXPERT_POSTERIOR,
    plot_expert_posterior,
    posterior_panels,
)

PART = "label_permutation-clients4-groups2"
Q_FINAL = np.array([[0.9, 0.1], [0.25, 0.75], [0.5, 0.5]])  # 3 classes x 2 experts


def posterior_aggregate(partitions: int = 1, classes: int = 3, experts: int = 2,
                        method: str = "fedmix") -> pd.DataFrame:
    runs = []
    rng = np.random.default_rng(0)
    for p in range(partitions):
        part = PART if p == 0 else f"{PART}-with-a-long-suffix-{p}"
        for seed in (1, 0):
            final = (Q_FINAL if (classes, experts, seed) == (3, 2, 0)
                     else rng.dirichlet(np.ones(experts), size=classes))
            # the q rows carry the class in the client column
            runs.append(make_run({2: [0.5] * 4}, n_test=[1] * 4, method=method,
                                 partition=part, split_seed=seed,
                                 matrices={EXPERT_POSTERIOR: {
                                     0: np.full((classes, experts), 1 / experts),
                                     2: final}}))
    return pd.concat(runs, ignore_index=True)


def test_metric_is_the_algorithms() -> None:
    from pflrepro.algorithms.fedmix import EXPERT_POSTERIOR as LOGGED

    assert EXPERT_POSTERIOR == LOGGED


def test_posterior_panels_by_hand() -> None:
    (panel,) = posterior_panels(posterior_aggregate())
    assert panel.run["split_seed"] == 0 and panel.round == 2
    assert list(panel.matrix.index) == [0, 1, 2] and list(panel.matrix.columns) == [0, 1]
    assert panel.matrix.to_numpy().tolist() == Q_FINAL.tolist()


def test_plot_expert_posterior(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    figures = captured_figures(monkeypatch)
    pdf, png = tmp_path / "q.pdf", tmp_path / "q.png"
    plot_expert_posterior(posterior_aggregate(), pdf, png, labels={PART: "permuted labels"})
    assert_figure_files(pdf, png)
    assert_names_not_ids(figures[0], ["fedmix"], {PART: "permuted labels"})
    with pytest.raises(ValueError, match="'fedavg'"):
        plot_expert_posterior(posterior_aggregate(), tmp_path / "x.pdf", tmp_path / "x.png",
                              "fedavg")
    assert not (tmp_path / "x.pdf").exists()


@pytest.mark.parametrize(("partitions", "classes", "experts"),
                         [(1, 3, 2), (2, 10, 4), (4, 100, 8)])
def test_fits_any_size(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, partitions: int,
                       classes: int, experts: int) -> None:
    agg = posterior_aggregate(partitions, classes, experts)
    check_fits(monkeypatch, tmp_path, lambda pdf, png: plot_expert_posterior(agg, pdf, png))


def test_cli_plot_posterior(tmp_path: Path) -> None:
    agg = tmp_path / "agg.parquet"
    from pflrepro.store.io import write_parquet

    write_parquet(posterior_aggregate(), agg)  # with its digest record (issue 27, item 3)
    pdf, png = tmp_path / "q.pdf", tmp_path / "q.png"
    labels = f'{{"partitions": {{"{PART}": "label permutation"}}}}'
    assert main(["plot", "posterior", "--aggregate", str(agg), "--method", "fedmix",
                 "--labels", labels, "--pdf", str(pdf), "--png", str(png)]) == 0
    assert_figure_files(pdf, png)
    assert main(["plot", "posterior", "--aggregate", str(agg), "--method", "fedavg",
                 "--pdf", str(pdf), "--png", str(png)]) == 1
