"""The papers' numbers file and the paper-vs-ours arithmetic (pflrepro.reporting.paper)."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from pflrepro.config import check_config_paths
from pflrepro.config.schema import build_schema
from pflrepro.reporting.paper import (
    COLUMNS,
    QUANTITIES,
    RESULT_COLUMNS,
    PaperNumbersError,
    check_against_config,
    compare,
    difference,
    load_paper_numbers,
    mean_std,
    output_name,
    parse_paper_numbers,
    tables_at,
    write_paper_table,
)
from pflrepro.store.results import CONFIG_COLUMNS

REPO = Path(__file__).resolve().parents[2]
NUMBERS = REPO / "config" / "paper_numbers.csv"
HEADER = ",".join(COLUMNS)


def _row(**kw: str) -> str:
    base = dict(id="x-acc", paper="PerFed-CKT", table="Table 1", table_id="t1",
                setting="C = 0.1", paper_method="PerFed-CKT (c = 3)", quantity="accuracy",
                value="74.31", unit="%", where="Experiments", metric="mean_bmta",
                experiment="exp_a", partition="", method="m", cpu_experiment="",
                cpu_partition="", planned="false", note="")
    base.update(kw)
    return ",".join(f'"{base[c]}"' for c in COLUMNS)


def _parse(*rows: str) -> list:
    return parse_paper_numbers("\n".join(["# comment", HEADER, *rows]))


# --------------------------------------------------------------------------- the file
def test_the_numbers_file_is_valid_and_matches_config_yaml() -> None:
    cells = load_paper_numbers(NUMBERS)
    cfg = check_config_paths([REPO / "config.yaml"], build_schema())
    check_against_config(cells, cfg)
    for cell in cells:
        assert cell.unit == QUANTITIES[cell.quantity][0]


def test_the_numbers_file_holds_what_perfedckt_states_and_nothing_made_up() -> None:
    cells = load_paper_numbers(NUMBERS)
    given = {(c.table, c.setting.rsplit("C = ", 1)[-1], c.method, c.quantity): c.value
             for c in cells if c.value is not None}
    assert given == {
        ("Table 1", "0.1", "perfedckt", "accuracy"): 74.31,
        ("Table 1", "0.1", "perfedckt", "communication"): 5.2,
        ("Table 1", "0.1", "fedfomo_m5", "accuracy"): 74.62,
        ("Table 1", "0.1", "fedfomo_m5", "communication"): 3900.0,
        ("Table 1", "0.15", "perfedckt", "accuracy"): 76.74,
        ("Table 1", "0.15", "perfedckt", "communication"): 7.2,
        ("Table 1", "0.15", "fedfomo_m5", "accuracy"): 77.56,
        ("Table 1", "0.15", "fedfomo_m5", "communication"): 5850.0,
        ("Table 2", "0.1", "perfedckt_c2", "accuracy"): 72.25,
        ("Table 2", "0.1", "perfedckt_c2", "communication"): 4.8,
        ("Table 2", "0.15", "perfedckt_c2", "accuracy"): 76.14,
        ("Table 2", "0.15", "perfedckt_c2", "communication"): 6.8,
    }
    # the other papers' texts give no table numbers: every value of theirs is empty
    assert {c.paper for c in cells if c.value is None} >= {"FedeRiCo", "FedAMP", "FedMix"}
    assert all(c.paper == "PerFed-CKT" for c in cells if c.value is not None)


def test_every_number_appears_in_its_paper_text() -> None:
    texts = {"PerFed-CKT": "perfed-ckt-clustered-knowledge-transfer.txt"}
    papers = REPO.parent / "shared" / "papers"
    if not papers.is_dir():
        pytest.skip("the paper texts are not beside the checkout")
    for cell in load_paper_numbers(NUMBERS):
        if cell.value is not None:
            text = (papers / texts[cell.paper]).read_text()
            assert f"{cell.value:g}" in text, cell.id


@pytest.mark.parametrize(("row", "message"), [
    (_row(unit="1e7 parameters"), "the unit of accuracy is '%'"),
    (_row(quantity="speed"), "quantity 'speed'"),
    (_row(metric="total_communication"), "metric 'total_communication' of accuracy"),
    (_row(value="about 74"), "not a number"),
    (_row(value="174"), "outside the range"),
    (_row(paper="FedX"), "paper 'FedX'"),
    (_row(id="Bad Id"), "id 'Bad Id'"),
    (_row(planned="yes"), "planned must be true or false"),
    (_row(experiment="", cpu_experiment=""), "neither experiment nor cpu_experiment"),
    (_row(where=""), "column 'where' is empty"),
])
def test_a_malformed_row_is_refused_naming_it(row: str, message: str) -> None:
    with pytest.raises(PaperNumbersError, match=message):
        _parse(row)


def test_wrong_columns_and_duplicates_are_refused() -> None:
    with pytest.raises(PaperNumbersError, match="expected the columns"):
        parse_paper_numbers("id,paper\nx,FedAMP\n")
    with pytest.raises(PaperNumbersError, match="used twice"):
        _parse(_row(), _row())
    with pytest.raises(PaperNumbersError, match="are the same cell"):
        _parse(_row(), _row(id="y-acc"))


def test_names_are_checked_against_the_config() -> None:
    cfg = check_config_paths([REPO / "config.yaml"], build_schema())
    ok = _row(experiment="perfedckt_table1", method="perfedckt")
    check_against_config(_parse(ok), cfg)
    with pytest.raises(PaperNumbersError, match="is not in the config"):
        check_against_config(_parse(_row(experiment="nope", method="perfedckt")), cfg)
    with pytest.raises(PaperNumbersError, match="not under `methods:`"):
        check_against_config(_parse(_row(experiment="perfedckt_table1", method="nope")), cfg)
    with pytest.raises(PaperNumbersError, match="no partition labelled"):
        check_against_config(_parse(_row(experiment="federico_table1_cifar10",
                                         method="federico", partition="9 distributions")),
                             cfg)
    with pytest.raises(PaperNumbersError, match="not a cpu-scale experiment"):
        check_against_config(_parse(_row(experiment="perfedckt_table1", method="perfedckt",
                                         cpu_experiment="perfedckt_table1")), cfg)
    # planned rows may name what is not in the config yet
    check_against_config(_parse(_row(experiment="nope", method="nope", planned="true")), cfg)


def test_the_workflows_check_reads_only_the_rows_of_the_configs_experiments() -> None:
    # every config is checked (common.smk): a config of other experiments passes, one
    # that keeps a paper experiment and renames its method is refused naming the row
    cfg = check_config_paths([REPO / "config.yaml"], build_schema())
    other = check_config_paths([REPO / "tests/workflow/config.yaml"], build_schema())
    cells = load_paper_numbers(NUMBERS)
    check_against_config(cells, other, present_only=True)
    with pytest.raises(PaperNumbersError, match="is not in the config"):
        check_against_config(cells, other)  # strict: every row's experiment is needed
    check_against_config(cells, cfg, present_only=True)
    row = _row(id="r-1", experiment="perfedckt_table1", method="renamed")
    with pytest.raises(PaperNumbersError, match=r"^numbers\.csv: row 'r-1': method 'renamed' "
                                                r"is not under `methods:`"):
        check_against_config(_parse(row), cfg, present_only=True, where="numbers.csv")
    # a row's CPU side is checked where the config has its CPU experiment
    cpu = _row(experiment="nope", method="m", cpu_experiment="perfedckt_table1")
    with pytest.raises(PaperNumbersError, match="not a cpu-scale experiment"):
        check_against_config(_parse(cpu), cfg, present_only=True)
    check_against_config(_parse(cpu), other, present_only=True)
    # a CPU experiment cut to fewer partitions (a test project, a user's quick run): the
    # row's CPU cell shows "not run"; the strict check still names the missing partition
    cut = _row(experiment="nope", method="m", cpu_experiment="federico_table1_cpu_digits",
               cpu_partition="no such distributions", planned="true")
    check_against_config(_parse(cut), cfg, present_only=True)
    with pytest.raises(PaperNumbersError, match="no partition labelled 'no such"):
        check_against_config(_parse(cut), cfg)


# --------------------------------------------------------------------------- arithmetic
def test_mean_std_by_hand() -> None:
    assert mean_std([]) == (pytest.approx(math.nan, nan_ok=True),
                            pytest.approx(math.nan, nan_ok=True), 0)
    mean, std, n = mean_std([70.0])
    assert (mean, n) == (70.0, 1) and math.isnan(std)
    # 72, 74, 76: mean 74, sample variance (4 + 0 + 4) / 2 = 4, std 2
    assert mean_std([72.0, 74.0, 76.0]) == (74.0, 2.0, 3)


def test_difference_by_hand() -> None:
    diff, inside = difference(74.31, 73.0, 1.5)
    assert diff == pytest.approx(-1.31) and inside == "yes"
    diff, inside = difference(74.31, 76.0, 1.5)
    assert diff == pytest.approx(1.69) and inside == "no"
    assert difference(74.0, 75.0, 1.0) == (1.0, "yes")  # on the boundary: inside
    assert difference(74.0, 75.0, math.nan)[1] == "n/a"  # one run
    assert difference(None, 75.0, 1.0)[1] == "n/a"  # the text gives no number
    assert math.isnan(difference(74.0, math.nan, math.nan)[0])  # no runs


def _agg(runs: dict[tuple[str, int], float], traffic: float = 2.6e7) -> pd.DataFrame:
    """Runs of experiment exp_a, partition p0: per (method, seed) one round, two clients
    with accuracy ``acc`` each (so every accuracy metric is ``acc``), and traffic."""
    rows = []
    for (method, seed), acc in runs.items():
        config = {c: "" for c in CONFIG_COLUMNS}
        config.update(experiment="exp_a", dataset="digits", partition="p0", method=method,
                      algorithm=method, params="{}", split_seed=0, train_seed=seed)
        for client in (0, 1):
            rows.append({**config, "round": 1, "client": client, "peer": -1,
                         "metric": "test_accuracy", "value": acc})
            rows.append({**config, "round": 1, "client": client, "peer": -1,
                         "metric": "n_test", "value": 10.0})
            for metric in ("comm_up", "comm_down"):
                rows.append({**config, "round": 1, "client": client, "peer": -1,
                             "metric": metric, "value": traffic / 4})
    return pd.DataFrame(rows)


def test_compare_by_hand(tmp_path: Path) -> None:
    cells = _parse(_row(setting="digits, C = 0.1"),
                   _row(id="x-comm", setting="digits, C = 0.1", quantity="communication",
                        value="5.2", unit="1e7 parameters", metric="total_communication"),
                   _row(id="y-acc", paper_method="FedFomo", method="other", value=""),
                   _row(id="z-acc", paper_method="Ditto", method="absent", value="50"))
    agg = _agg({("m", 0): 0.72, ("m", 1): 0.76, ("other", 0): 0.5})
    frame = compare(cells, agg, "paper", "t1", labels={"p0": "only"})
    assert list(frame.columns) == list(RESULT_COLUMNS)
    acc, comm, other, absent = (frame.iloc[i] for i in range(4))
    # accuracies 72 and 76: mean 74, std sqrt(8) = 2.83; 74 - 74.31 = -0.31, inside
    assert acc["ours_mean"] == pytest.approx(74.0)
    assert acc["ours_std"] == pytest.approx(math.sqrt(8.0))
    assert acc["difference"] == pytest.approx(-0.31)
    assert acc["within_std"] == "yes" and acc["status"] == "compared"
    # traffic 2.6e7 per run = 2.6 (1e7 parameters); std 0; 2.6 - 5.2 = -2.6, outside
    assert comm["ours_mean"] == pytest.approx(2.6) and comm["ours_std"] == 0.0
    assert comm["difference"] == pytest.approx(-2.6) and comm["within_std"] == "no"
    assert other["ours_n"] == 1 and other["status"] == "the text gives no number"
    assert absent["ours_n"] == 0 and absent["status"].startswith("not run")
    write_paper_table(frame, tmp_path / "t.md", tmp_path / "t.csv", title="T")
    text = (tmp_path / "t.md").read_text()
    assert "| 74.31 | 74.00 ± 2.83 (n=2) | -0.31 | yes |" in text
    assert len(pd.read_csv(tmp_path / "t.csv")) == 4
    assert "chosen on validation" not in text
    # a tuned method's sentence ends the note (Markdown-escaped); the CSV does not change
    before = (tmp_path / "t.csv").read_bytes()
    write_paper_table(frame, tmp_path / "t.md", tmp_path / "t.csv", title="T",
                      tuning=["m: a|b chosen on validation from {1, 2}: only split 0: 2."])
    assert (tmp_path / "t.md").read_text().rstrip().endswith(
        "no paper number). m: a\\|b chosen on validation from {1, 2}: only split 0: 2.")
    assert (tmp_path / "t.csv").read_bytes() == before


def test_compare_without_runs_and_at_cpu_scale() -> None:
    cells = _parse(_row(cpu_experiment="exp_a"), _row(id="w-acc", paper_method="W",
                                                      experiment="exp_b"))
    frame = compare(cells, None, "paper", "t1")
    assert (frame["ours_n"] == 0).all() and frame["status"].str.startswith("not run").all()
    cpu = compare(cells, _agg({("m", 0): 0.9}), "cpu", "t1")
    assert len(cpu) == 1 and cpu.iloc[0]["scale_note"].startswith("CPU-scale design analogue")
    assert cpu.iloc[0]["status"].startswith("different setting (a cpu-scale design analogue")
    other = compare(_parse(_row(partition="4 distributions")), _agg({("m", 0): 0.9}),
                    "paper", "t1")
    assert other.iloc[0]["status"] == "not run (no partition 4 distributions in exp_a)"
    with pytest.raises(ValueError, match="no row of table"):
        compare(cells, None, "cpu", "nope")


def test_output_names_and_tables_per_scale() -> None:
    cells = _parse(_row(cpu_experiment="exp_c"))
    assert output_name("t1", "paper") == "t1" and output_name("t1", "cpu") == "t1_cpu"
    assert tables_at(cells, "paper") == {"t1": "t1"}
    assert tables_at(cells, "cpu") == {"t1_cpu": "t1"}
    assert tables_at(cells, "cpu", ["exp_a"]) == {}


# --------------------------------------------------------------------------- honest cells
def test_a_cell_of_another_setting_is_not_compared() -> None:
    # the paper's CIFAR-10 number against our digits runs (a CPU-scale design analogue):
    # no difference and no "inside our std" (they used to be computed: -0.31, yes)
    cells = _parse(_row(setting="CIFAR-10, C = 0.1", cpu_experiment="exp_a"))
    agg = _agg({("m", 0): 0.72, ("m", 1): 0.76})
    for scale in ("cpu", "paper"):
        row = compare(cells, agg, scale, "t1").iloc[0]
        assert row["status"].startswith("different setting"), scale
        assert row["within_std"] == "n/a" and math.isnan(row["difference"])
        assert row["ours_mean"] == pytest.approx(74.0)  # ours is still shown
    assert "digits, not the paper's CIFAR-10" in compare(cells, agg, "paper", "t1").iloc[0][
        "status"]
    # at the paper scale with the paper's data set: compared
    same = compare(_parse(_row(setting="digits, C = 0.1")), agg, "paper", "t1").iloc[0]
    assert same["status"] == "compared" and same["within_std"] == "yes"


def test_rows_equal_in_every_run_are_noted(tmp_path: Path) -> None:
    # FedAvg-FT and FedProx-FT: 72 and 76 in both runs; Ditto 72 and 75
    cells = _parse(_row(setting="digits", paper_method="FedAvg-FT", method="a"),
                   _row(id="b", setting="digits", paper_method="FedProx-FT", method="b"),
                   _row(id="c", setting="digits", paper_method="Ditto", method="c"))
    agg = _agg({("a", 0): 0.72, ("a", 1): 0.76, ("b", 0): 0.72, ("b", 1): 0.76,
                ("c", 0): 0.72, ("c", 1): 0.75})
    frame = compare(cells, agg, "paper", "t1")
    write_paper_table(frame, tmp_path / "t.md", tmp_path / "t.csv", title="T")
    text = (tmp_path / "t.md").read_text()
    assert "FedAvg-FT = FedProx-FT: equal in every run (accuracy)." in text
    assert "Ditto =" not in text and "= Ditto" not in text
    # the CSV has no new column
    assert list(pd.read_csv(tmp_path / "t.csv").columns) == list(RESULT_COLUMNS)
