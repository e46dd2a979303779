"""What `snakemake --report` shows: categories, captions, HTML tables (reporting.report)."""

from __future__ import annotations

from pathlib import Path

import docutils.core

from pflrepro.cli import build_parser
from pflrepro.config import check_config_paths
from pflrepro.config.schema import build_schema
from pflrepro.reporting.claims.parse import load_claims
from pflrepro.reporting.paper import load_paper_numbers
from pflrepro.reporting.report import (
    CLAIMS_CATEGORY,
    OTHER,
    markdown_to_html,
    paper_of,
    report_captions,
    table_category,
    table_label,
)

REPO = Path(__file__).resolve().parents[2]


def _inputs() -> tuple:
    cfg = check_config_paths([REPO / "config.yaml"], build_schema())
    return (cfg, load_claims(REPO / "config" / "claims.yaml"),
            load_paper_numbers(REPO / "config" / "paper_numbers.csv"))


def test_paper_of_reads_claims_then_the_name() -> None:
    _, claims, _ = _inputs()
    assert paper_of("federico_table1_cpu_digits", claims) == "FedeRiCo"
    assert paper_of("demo_fedamp") == "FedAMP"
    assert paper_of("perfedckt_table1_cpu") == "PerFed-CKT"
    assert paper_of("fedmix_rotated_cpu") == "FedMix"
    assert paper_of("tiny") == OTHER


def test_tables_get_category_label_and_a_caption_that_is_valid_rst() -> None:
    cfg, claims, cells = _inputs()
    names = ["federico_table1_cpu_fashion", "federico_table1_cpu_fashion-communication",
             "federico_table1_cpu", "claims_cpu", "perfedckt_table1_cpu-paper"]
    captions = report_captions(cfg, claims, cells, table_names=names,
                               paper_tables={"perfedckt_table1_cpu": "perfedckt_table1"})
    assert table_category(names[0], cfg, claims, cells) == ("FedeRiCo",
                                                            "federico_table1_cpu_fashion")
    assert table_category(names[2], cfg, claims, cells) == ("FedeRiCo",
                                                            "table federico_table1_cpu")
    assert table_category(names[3], cfg, claims, cells) == (CLAIMS_CATEGORY, "claims_cpu")
    assert table_category(names[4], cfg, claims, cells) == ("PerFed-CKT", "paper vs ours")
    assert [table_label(n, cfg) for n in names] == [
        "accuracy table", "communication table", "combined table", "claims table",
        "paper vs ours"]
    # the projections are no claims table (the label fell through to it)
    assert table_label("cost-projection", cfg) == "cost projection"
    assert table_label("paper-grid-projection", cfg) == "cost projection"
    assert table_label("something-else", cfg) == "table"
    caption = captions["tables"][names[0]]
    for item in ("**scale**: cpu", "**data**: fashion", "**partitions**", "**seeds**",
                 "**training**", "**methods**", "federico-best"):
        assert item in caption, item
    assert "not expected to match" in captions["tables"][names[4]]
    assert "opens with a summary" in captions["tables"][names[3]]
    for text in [*captions["tables"].values(), *captions["experiments"].values()]:
        parts = docutils.core.publish_parts(
            text, writer="html",
            settings_overrides={"report_level": 2, "halt_level": 2})  # a warning raises
        assert parts["body"]
    assert set(captions["experiments"]) == set(cfg.experiments)


def test_markdown_to_html_renders_the_table_writers_markdown() -> None:
    md = ("# Title\n\nA **bold** line\ncontinued.\n\n| a | b \\| c |\n|:--|--:|\n"
          "| x <y> | 1.00 |\n\nNote.\n")
    page = markdown_to_html(md, "t")
    assert "<h1>Title</h1>" in page
    assert "<p>A <b>bold</b> line continued.</p>" in page
    assert "<th>a</th><th class=\"r\">b | c</th>" in page
    assert "<td>x &lt;y&gt;</td><td class=\"r\">1.00</td>" in page
    assert "<p>Note.</p>" in page


def test_cli_writes_the_html_page(tmp_path: Path) -> None:
    (tmp_path / "t.md").write_text("| a |\n|:--|\n| 1 |\n")
    args = build_parser().parse_args(["report-html", "--md", str(tmp_path / "t.md"),
                                      "--out", str(tmp_path / "t.html")])
    args.func(args)
    assert "<td>1</td>" in (tmp_path / "t.html").read_text()
    assert build_parser().parse_args(
        ["paper-vs-ours", "--numbers", "n", "--table", "t", "--scale", "cpu", "--md", "m",
         "--csv", "c"]).command == "paper-vs-ours"
