"""`snakemake --report`: every table and figure, by paper and experiment, with captions.

A tiny CPU-scale config whose experiment has a name of config/paper_numbers.csv
(FedeRiCo Table 1's digits analogue), so the run also builds a paper-vs-ours table.

Tier ``workflow_full`` (``pytest -m workflow_full``; ``.ci/run`` runs it, plain ``pytest``
deselects it): this file builds tiny projects of its own.
"""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path

import pandas as pd
import pytest
import yaml
from _wf import TINY, new_workdir, snakemake

pytestmark = [pytest.mark.workflow, pytest.mark.workflow_full]

EXPERIMENT = "federico_table1_cpu_digits"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    config = yaml.safe_load(TINY.read_text())
    tiny = config["experiments"].pop("tiny")
    tiny.pop("public")
    tiny.update(scale="cpu", label="digits", split_seeds=[0, 1], train_seeds=[0],
                partitions=[{"scheme": "label_groups", "clients": 4, "groups": 2,
                             "max_samples": 800, "label": "2 distributions"}])
    config["training"]["rounds"] = 2
    config["scale"] = "cpu"
    config["experiments"][EXPERIMENT] = tiny
    work = new_workdir(tmp_path_factory.mktemp("report") / "run", config)
    snakemake(work)
    snakemake(work, "--report", "report.zip")
    return work


def _report(built: Path) -> tuple[list[str], dict, dict]:
    """(files in the zip, categories, results) of the report."""
    with zipfile.ZipFile(built / "report.zip") as zf:
        names = zf.namelist()
        page = zf.read(next(n for n in names if n.endswith("report.html"))).decode()
    data = {}
    for key in ("categories", "results"):
        m = re.search(rf"^\s*var {key} = (\{{.*\}});\s*$", page, re.MULTILINE)
        assert m, f"no {key} in the report page"
        data[key] = json.loads(m.group(1))
    return names, data["categories"], data["results"]


def test_the_report_holds_every_table_and_figure_by_paper_and_experiment(built: Path) -> None:
    names, categories, results = _report(built)
    tables = sorted(p.name for p in (built / "results/tables").glob("*.md"))
    assert f"{EXPERIMENT}-paper.md" not in tables  # the paper table is named by its table
    assert "federico_table1_cpu-paper.md" in tables
    pages = {Path(p).name for p in results}
    for md in tables:
        assert md.replace(".md", ".html") in pages, md
    for png in (built / "figures").rglob("*.png"):
        assert png.name in pages, png
    assert set(categories) >= {"FedeRiCo", "Data partitions", "Claims"}
    fed = categories["FedeRiCo"]
    assert EXPERIMENT in fed and "paper vs ours" in fed
    assert any(p.endswith(f"figures/{EXPERIMENT}-accuracy.png") for p in fed[EXPERIMENT])
    assert any(n.endswith(f"{EXPERIMENT}-accuracy.png") for n in names)  # in the zip


def test_captions_say_experiment_scale_data_seeds_settings_and_claims(built: Path) -> None:
    _, _, results = _report(built)
    table = next(r for p, r in results.items() if p.endswith(f"report/{EXPERIMENT}.html"))
    caption = table["caption"]
    for item in (EXPERIMENT, "scale", "cpu", "data", "digits", "partitions",
                 "2 distributions", "seeds", "training", "methods", "federico-best"):
        assert item in caption, item
    assert table["labels"] == {"output": "accuracy table", "name": EXPERIMENT}
    figure = next(r for p, r in results.items() if p.endswith(f"{EXPERIMENT}-accuracy.png"))
    assert "Test accuracy" in figure["caption"] and "federico-best" in figure["caption"]
    paper = next(r for p, r in results.items() if p.endswith("federico_table1_cpu-paper.html"))
    assert "not expected to match" in paper["caption"]


def test_paper_vs_ours_table_lists_the_cells_with_ours(built: Path) -> None:
    frame = pd.read_csv(built / "results/tables/federico_table1_cpu-paper.csv")
    ours = frame[frame["experiment"] == EXPERIMENT]
    assert set(ours["partition"]) == {"2 distributions", "4 distributions"}
    missing = ours[ours["partition"] == "4 distributions"]  # not in this tiny config
    assert (missing["status"] == f"not run (no partition 4 distributions in {EXPERIMENT})").all()
    ran = ours[ours["ours_n"] > 0]
    assert set(ran["partition"]) == {"2 distributions"}
    assert set(ran["method"]) == {"local", "fedavg", "fedavg_plus", "federico"}
    assert (ran["ours_n"] == 2).all() and ran["ours_std"].notna().all()
    assert frame["paper_value"].isna().all()  # FedeRiCo's text gives no numbers
    assert (frame.loc[frame["ours_n"] == 0, "status"].str.startswith("not run")).all()


def test_html_report_builds(built: Path) -> None:
    proc = snakemake(built, "--report", "report.html")
    # Snakemake's own un-awaited coroutines are silenced (workflow/rules/common.smk)
    assert "was never awaited" not in proc.stdout + proc.stderr
    assert (built / "report.html").stat().st_size > 10_000
