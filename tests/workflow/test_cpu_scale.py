"""The CPU scale of config.yaml, built end to end: every CPU-scale table and figure.

This runs the real experiment designs (FedeRiCo Table 1 and Figs. 3-7) on real data:
Fashion-MNIST from Debian's `dataset-fashion-mnist` package (a local mirror of the
original files, verified by checksum) and the bundled digits. Skipped when the
Debian package is not installed; `.ci/run` installs it.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml
from _wf import REPO, new_workdir, snakemake

FASHION = Path("/usr/share/datasets/fashion-mnist")

pytestmark = [
    pytest.mark.workflow,
    pytest.mark.cpu_scale,
    pytest.mark.skipif(not FASHION.is_dir(), reason="needs Debian's dataset-fashion-mnist"),
]


def seed_pairs(*experiments: str) -> int:
    """The runs per (method, partition) of these experiments (one count for all)."""
    from pflrepro.config import parse

    raw = yaml.safe_load((REPO / "config.yaml").read_text())
    cfg = parse({**raw, "scale": "cpu"})
    (count,) = {len(cfg.experiments[name].seed_pairs()) for name in experiments}
    return count


@pytest.fixture(scope="module")
def cpu_scale(tmp_path_factory: pytest.TempPathFactory) -> Path:
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    config["scale"] = "cpu"
    work = new_workdir(tmp_path_factory.mktemp("cpu") / "run", config)
    snakemake(work, timeout=4200)  # ~54 CPU-min of jobs: 28 min on 2 cores
    return work


def test_table1_at_cpu_scale(cpu_scale: Path) -> None:
    table = pd.read_csv(cpu_scale / "results/tables/federico_table1_cpu.csv")
    methods = {"fedavg", "fedavg_plus", "local", "clustered_fl_fedem", "clustered_fl", "fedem",
               "fedfomo", "federico", "federico_literal", "ditto"}
    assert set(table["method"]) == methods
    assert set(table["experiment"]) == {"federico_table1_cpu_fashion",
                                        "federico_table1_cpu_digits"}
    assert len(table) == len(methods) * 4  # 2 data sets x 2 partitions
    for experiment, rows in table.groupby("experiment"):
        assert (rows["n"] == seed_pairs(str(experiment))).all(), experiment
    assert table["mean"].between(0, 100).all()
    md = (cpu_scale / "results/tables/federico_table1_cpu.md").read_text()
    assert "Fashion-MNIST" in md and "4 distributions" in md


@pytest.mark.parametrize("figure", [
    "federico_table1_cpu_fashion-weights-federico",   # Fig. 3
    "federico_table1_cpu_fashion-weights-fedem",      # Fig. 4
    "federico_fig5_cpu-weights-federico_accumulative",  # Fig. 5a
    "federico_fig5_cpu-weights-federico",             # Fig. 5b
    "federico_fig6a_cpu-accuracy",                    # Fig. 6a
    "federico_fig6b_cpu-accuracy",                    # Fig. 6b
    "federico_fig6c_cpu-client0-accuracy",            # Fig. 6c
    "federico_fig6c_cpu-client0-weights",             # Fig. 7
    "fedamp_practical_fashion_cpu-distances",         # FedAMP model distances
    "perfedckt_table1_cpu-communication",             # accuracy vs communication
    "perfedckt_table2_cpu-architectures",             # PerFed-CKT Fig. 2a
    "fedmix_rotated_cpu-gates-fedmix",                # FedMix gates, clients x experts
    "fedmix_rotated_cpu-posterior-fedmix",            # FedMix q(z|y), classes x experts
    "fedmix_label_permutation_cpu-gates-fedmix",
    "fedmix_label_permutation_cpu-posterior-fedmix",
    "fedmix_label_skew_cpu-posterior-fedmix",
    "fedmix_rotated_cpu-gates-fedmix_shard",          # q(z|s): gates by group
])
def test_every_figure_is_built(cpu_scale: Path, figure: str) -> None:
    for ext in ("pdf", "png"):
        assert (cpu_scale / "figures" / f"{figure}.{ext}").stat().st_size > 0


def test_fashion_mnist_came_from_the_verified_local_mirror(cpu_scale: Path) -> None:
    meta = yaml.safe_load((cpu_scale / "results/data/fashion_mnist/meta.json").read_text())
    assert meta["size"] == 70000 and meta["num_classes"] == 10
    assert meta["shape"] == [1, 28, 28]


@pytest.mark.parametrize("split", ["iid", "pathological", "practical"])
def test_fedamp_tables_at_cpu_scale(cpu_scale: Path, split: str) -> None:
    table = pd.read_csv(cpu_scale / f"results/tables/fedamp_table_{split}_cpu.csv")
    methods = {"local", "fedavg", "fedprox", "fedavg_ft", "fedprox_ft", "scaffold", "apfl",
               "fedamp", "heurfedamp", "ditto"}
    assert set(table["method"]) == methods
    assert set(table["metric_name"]) == {"mean_bmta", "mean_final"}
    wide = table.pivot(index="method", columns="metric_name", values="mean")
    assert (wide["mean_bmta"] >= wide["mean_final"] - 1e-9).all()  # best >= final
    experiment = {"iid": "fedamp_iid_fashion_cpu", "pathological": "fedamp_patho_fashion_cpu",
                  "practical": "fedamp_practical_fashion_cpu"}[split]
    assert (table["n"] == seed_pairs(experiment)).all()
    md = (cpu_scale / f"results/tables/fedamp_table_{split}_cpu.md").read_text()
    assert "BMTA" in md


@pytest.mark.parametrize("method", ["fedamp", "heurfedamp"])
def test_xi_heatmaps_on_the_practical_split(cpu_scale: Path, method: str) -> None:
    for ext in ("pdf", "png"):
        path = cpu_scale / f"figures/fedamp_practical_fashion_cpu-weights-{method}.{ext}"
        assert path.stat().st_size > 0


def test_claims_table_at_cpu_scale(cpu_scale: Path) -> None:
    from pflrepro.reporting.claims.parse import VERDICTS, load_claims, row_keys

    table = pd.read_csv(cpu_scale / "results/tables/claims_cpu.csv", keep_default_na=False)
    keys = row_keys(load_claims(REPO / "config/claims.yaml"), "cpu")
    assert list(zip(table["id"], table["experiment"], strict=True)) == keys
    assert set(table["verdict"]) <= set(VERDICTS)
    assert list(table.columns[-7:]) == ["n", "ci_low", "ci_high", "level", "basis",
                                        "pairs_needed", "power"]
    assert set(table["basis"]) <= {"independent", "by design", "selection"}
    # every claim on an experiment that ran completely has data behind it: not missing
    # or incomplete, and n is the experiment's seed pairs; a self_weight claim counts only
    # the seed pairs whose split has a client alone in its distribution (1 to all of them)
    ran = table[table["experiment"] == "federico_table1_cpu_fashion"]
    assert (~ran["verdict"].isin(["missing", "incomplete"])).all(), ran[["id", "numbers"]]
    pairs = seed_pairs("federico_table1_cpu_fashion")
    lone = ran["id"] == "federico-lone-client-uses-itself"
    counted = ran[ran["verdict"] != "undecidable"]
    assert (counted.loc[~lone, "n"].astype(int) == pairs).all(), counted[["id", "n"]]
    assert counted.loc[lone, "n"].astype(int).between(1, pairs).all()
    decided = table[table["verdict"].isin(["holds", "fails", "inconclusive"])]
    assert (decided["margin"] != "").all() and (decided["ci_low"] != "").all()
    margin = decided["margin"].astype(float)
    low, high = decided["ci_low"].astype(float), decided["ci_high"].astype(float)
    holds, fails = decided["verdict"] == "holds", decided["verdict"] == "fails"
    assert (low[holds] >= 0).all() and (margin[holds] >= 0).all()
    # a fail needs the whole interval below the threshold (a tie at it is undecidable)
    assert (high[fails] < 0).all() and (margin[fails] <= 0).all()
    assert (decided.loc[decided["n"].astype(int) == 1, "verdict"] == "inconclusive").all()
    md = (cpu_scale / "results/tables/claims_cpu.md").read_text()
    assert "federico-best" in md and "cpu scale" in md


def test_perfedckt_table1_at_cpu_scale(cpu_scale: Path) -> None:
    table = pd.read_csv(cpu_scale / "results/tables/perfedckt_table1_cpu_both.csv")
    methods = {"majority", "local", "fedavg", "fedprox", "scaffold", "feddf", "per_fedavg",
               "fedfomo_m5", "ditto", "hypcluster", "perfedckt_c1", "perfedckt_c2",
               "perfedckt", "perfedckt_c4", "perfedckt_c5"}
    assert set(table["method"]) == methods
    assert set(table["experiment"]) == {"perfedckt_table1_cpu", "perfedckt_table1_c15_cpu"}
    for experiment, clients in (("perfedckt_table1_cpu", 5), ("perfedckt_table1_c15_cpu", 8)):
        comm = pd.read_csv(cpu_scale / f"results/tables/{experiment}-communication.csv")
        total = comm.set_index("method")["total"]
        assert total["local"] == 0 and total["majority"] == 0
        # soft decisions on 500 public images x 10 classes instead of a 50,890-parameter MLP
        assert total["perfedckt"] < total["fedavg"] / 3
        up = comm.set_index("method")["up_per_client_round"]
        assert up["perfedckt"] == pytest.approx(clients * 500 * 10 / 50)


def test_perfedckt_table2_heterogeneous_at_cpu_scale(cpu_scale: Path) -> None:
    table = pd.read_csv(cpu_scale / "results/tables/perfedckt_table2_cpu_both.csv")
    assert set(table["method"]) == {"majority", "feddf", "perfedckt_c1", "perfedckt_c2",
                                    "perfedckt", "perfedckt_c4", "perfedckt_c5"}
    runs = pd.read_parquet(cpu_scale / "results/aggregate/perfedckt_table2_cpu.parquet")
    # one split's run (the architectures follow each split's data sizes)
    first = runs[(runs["method"] == "feddf") & (runs["round"] == 0) & (runs["split_seed"] == 0)]
    arch = first[first["metric"] == "architecture"].set_index("client")["value"]
    n_train = first[first["metric"] == "n_train"].set_index("client")["value"]
    assert len(arch) == 50 and set(arch) == {0.0, 1.0, 2.0}
    # a larger model the more data: the largest clients' mean rank above the smallest's
    order = n_train.sort_values().index
    assert arch[order[-10:]].mean() > arch[order[:10]].mean()
    comm = pd.read_csv(cpu_scale / "results/tables/perfedckt_table2_cpu-communication.csv")
    total = comm.set_index("method")["total"]
    assert total["perfedckt"] < total["feddf"]


def test_fedmix_table_at_cpu_scale(cpu_scale: Path) -> None:
    table = pd.read_csv(cpu_scale / "results/tables/fedmix_table_cpu.csv")
    methods = {"fedavg", "local", "fedmix", "fedmix_k1", "fedmix_k2", "fedmix_k8",
               "fedmix_label_shard", "fedmix_shard"}
    assert set(table["method"]) == methods
    assert set(table["experiment"]) == {
        "fedmix_label_skew_cpu", "fedmix_rotated_cpu", "fedmix_rotated_cpu_digits",
        "fedmix_label_permutation_cpu", "fedmix_label_permutation_cpu_digits"}
    assert len(table) == len(methods) * 5  # one partition per experiment
    assert table["mean"].between(0, 100).all()
    # K = 1 is FedAvg: the same bits on the CPU, so the same accuracies
    wide = table.pivot(index="experiment", columns="method", values="mean")
    assert (wide["fedmix_k1"] == wide["fedavg"]).all()
    # FedMix's traffic: K experts down plus q; the gates are never sent
    comm = pd.read_csv(cpu_scale / "results/tables/fedmix_rotated_cpu-communication.csv")
    total = comm.set_index("method")["total"]
    assert total["fedmix_k1"] == total["fedavg"]
    assert total["fedavg"] < total["fedmix"] < 5 * total["fedavg"]


#: The CPU-scale tables each paper's README headline quotes.
HEADLINE_TABLES = {
    "FedeRiCo": ["federico_table1_cpu"],
    "FedAMP": ["fedamp_table_iid_cpu", "fedamp_table_pathological_cpu",
               "fedamp_table_practical_cpu", "fedamp_table_grouped_cpu"],
    "PerFed-CKT": ["perfedckt_table1_cpu_both", "perfedckt_table2_cpu_both"],
    "FedMix": ["fedmix_table_cpu"],
}


def _readme_headlines() -> dict[str, tuple[str, str]]:
    """The README's CPU-scale rows: paper -> (headline cell, claims-count cell)."""
    import re

    rows = {}
    for line in (REPO / "README.md").read_text().splitlines():
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
        if len(cells) == 3 and cells[0] in HEADLINE_TABLES:
            rows[cells[0]] = (cells[1], cells[2])
    assert set(rows) == set(HEADLINE_TABLES), rows
    return rows


def test_no_headline_claim_is_underpowered(cpu_scale: Path) -> None:
    # every headline row has the seed pairs the power rule of config/claims.yaml asks
    # for within its cap: decided, or decided only above the cap, or by no number of pairs
    from pflrepro.reporting.claims.power import UNDERPOWERED

    claims = pd.read_csv(cpu_scale / "results/tables/claims_cpu.csv", keep_default_na=False)
    heads = claims[claims["power"] != ""]
    assert set(heads["paper"]) == {"FedeRiCo", "FedAMP", "PerFed-CKT", "FedMix"}
    low = heads[heads["power"].str.startswith(UNDERPOWERED)]
    assert low.empty, low[["id", "experiment", "n", "power"]].to_string()


def test_the_readme_headlines_are_the_built_tables(cpu_scale: Path) -> None:
    import re

    from pflrepro.reporting.claims.parse import BASES

    claims = pd.read_csv(cpu_scale / "results/tables/claims_cpu.csv", keep_default_na=False)
    for paper, (headline, counts) in _readme_headlines().items():
        # every accuracy the headline quotes (one decimal) is a number of its tables
        values = set()
        for name in HEADLINE_TABLES[paper]:
            table = pd.read_csv(cpu_scale / f"results/tables/{name}.csv")
            for column in table.select_dtypes("number").columns:
                values |= {f"{v:.1f}" for v in table[column].dropna()}
        quoted = re.findall(r"(?<![\d.])\d{2,3}\.\d(?![\d.])", headline)
        assert quoted, (paper, headline)
        assert set(quoted) <= values, (paper, sorted(set(quoted) - values))
        # the claims counts are the built claims table's summary
        mine = claims[claims["paper"] == paper]
        independent = mine[mine["basis"] == "independent"]
        verdicts = [int((independent["verdict"] == v).sum())
                    for v in ("holds", "fails", "inconclusive", "undecidable", "missing")]
        apart = [int((mine["basis"] == b).sum()) for b in BASES if b != "independent"]
        expected = (" / ".join(map(str, verdicts))
                    + f" (+ {', '.join(map(str, apart))})")
        assert counts == expected, (paper, counts, expected)
        assert not (independent["verdict"] == "incomplete").any(), paper
