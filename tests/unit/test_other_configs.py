"""Which shipped config a target belongs to (pflrepro.pipeline.other_configs)."""

from __future__ import annotations

import re
from pathlib import Path

from pflrepro.pipeline.other_configs import (
    build_command,
    foreign_names,
    hint,
    owner,
    profiles_of,
    report_hint,
    report_mode,
    shipped_configs,
    target_pattern,
)

ROOT = Path(__file__).resolve().parents[2]


def test_the_demo_figures_belong_to_the_demo_config_and_profile() -> None:
    configs = shipped_configs(ROOT)
    assert {"demo_fedamp", "demo_federico", "demo_fedamp_bmta"} <= configs["config/demo.yaml"]
    assert profiles_of(ROOT)["config/demo.yaml"] == "profiles/demo"
    names = foreign_names(configs, configs["config.yaml"])
    assert names["demo_fedamp"] == "config/demo.yaml"
    assert not set(names) & configs["config.yaml"]
    line = hint("figures/demo_fedamp-accuracy.png", names, profiles_of(ROOT), "config.yaml")
    assert line == ("figures/demo_fedamp-accuracy.png belongs to config/demo.yaml, not to "
                    "config.yaml: add --profile profiles/demo")


def test_patterns_match_the_names_files_only() -> None:
    names = {"demo": "config/a.yaml", "demo_x": "config/b.yaml"}
    pattern = target_pattern(names)
    for path in ("figures/demo-accuracy.png", "results/tables/demo.md",
                 "results/tables/demo-cost.csv", "results/runs/demo/p/m/split0-seed0.parquet",
                 "results/aggregate/demo.parquet", "results/tuning/demo/fedamp.md"):
        assert re.fullmatch(pattern, path), path
    for path in ("figures/demo2-accuracy.png", "results/tables/demox.md", "demo.md",
                 "figures/other-accuracy.png"):
        assert not re.fullmatch(pattern, path), path
    # the longer name wins where one name starts another
    assert owner("figures/demo_x-accuracy.png", names) == "config/b.yaml"
    assert owner("figures/demo-accuracy.png", names) == "config/a.yaml"
    assert re.fullmatch(target_pattern([]), "figures/x-y.png") is None
    # a config without a profile: the --configfile to add
    assert hint("figures/demo-accuracy.png", names, {}, "config.yaml").endswith(
        "add --configfile config/a.yaml --replace-workflow-config")


def test_the_command_fails_with_the_hint(capsys) -> None:
    from pflrepro.cli import main

    assert main(["other-config", "--root", str(ROOT), "--loaded", "config.yaml",
                 "figures/demo_federico-accuracy.png"]) == 1
    assert ("figures/demo_federico-accuracy.png belongs to config/demo.yaml, not to "
            "config.yaml: add --profile profiles/demo") in capsys.readouterr().err


def test_report_mode_is_a_report_of_what_exists() -> None:
    assert report_mode(["snakemake", "--report", "report.zip"])
    assert report_mode(["snakemake", "--report=r.html", "--cores", "2"])
    assert not report_mode(["snakemake", "--report", "r.zip", "--report-after-run"])
    assert not report_mode(["snakemake", "--report-stylesheet", "s.css", "-n"])
    assert not report_mode(["snakemake", "-n", "report.zip"])


def test_the_report_hint_builds_the_loaded_config_or_names_the_demo() -> None:
    profiles = profiles_of(ROOT)
    assert build_command("config.yaml", "paper", profiles) == "snakemake --cores N"
    assert build_command("config.yaml", "cpu", profiles) == ("snakemake --cores N "
                                                             "--config scale=cpu")
    assert build_command("my.yaml", "paper", profiles) == ("snakemake --cores N --configfile "
                                                           "my.yaml --replace-workflow-config")
    line = report_hint("config.yaml", "paper", ["figures/a.png", "figures/b.png"], 5, profiles)
    assert line == ("the report is of config.yaml at the paper scale, and 2 of the 5 files it "
                    "shows are not built (e.g. figures/a.png): build them first with "
                    "snakemake --cores N; or the report of config/demo.yaml: snakemake "
                    "--profile profiles/demo --report")
    demo = report_hint("config/demo.yaml", "cpu", ["figures/d.png"], 1, profiles)
    assert demo.endswith("build them first with snakemake --profile profiles/demo")


def test_command_line_targets_are_read_with_snakemakes_parser() -> None:
    from pflrepro.pipeline.other_configs import command_line_targets

    assert command_line_targets(["-n", "--cores", "2", "a.png", "b.md", "--profile", "p"]) \
        == ["a.png", "b.md"]
    assert command_line_targets(["--cores", "2"]) == []
    assert command_line_targets(["--no-such-option-of-snakemake-x"]) == []


def test_target_problems_name_what_to_do() -> None:
    from pflrepro.pipeline.other_configs import target_problems

    names = {"demo_fedamp": "config/demo.yaml"}
    profiles = {"config/demo.yaml": "profiles/demo"}
    assert target_problems(["figures/demo_fedamp-accuracy.png"], names, profiles,
                           "config.yaml") == [
        "figures/demo_fedamp-accuracy.png belongs to config/demo.yaml, not to config.yaml: "
        "add --profile profiles/demo"]
    # the loaded config's own names are named_targets' (test_named_targets.py)
    assert target_problems(["figures/partitions/digits/nosuch-split1.pdf",
                            "results/tables/anything.md"], names, profiles,
                           "config.yaml") == []
