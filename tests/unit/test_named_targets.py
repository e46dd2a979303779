"""Targets naming what the config lacks (pflrepro.pipeline.workflow.named_targets)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

import pflrepro.pipeline.workflow as W
from pflrepro.config import parse
from pflrepro.pipeline.workflow.adapter import Rules
from pflrepro.pipeline.workflow.named_targets import LISTED, target_problems
from pflrepro.reporting.claims.parse import load_claims
from pflrepro.reporting.paper import load_paper_numbers

REPO = Path(__file__).resolve().parents[2]
DATASETS = W.dataset_names()


def _tiny() -> dict:
    raw = yaml.safe_load((REPO / "tests/workflow/config.yaml").read_text())
    raw["methods"]["fedamp"] = {"algorithm": "fedamp"}
    raw["experiments"]["tuned"] = {**raw["experiments"]["tiny"], "methods": ["fedamp"],
                                   "tune": {"rounds": 1, "seeds": [0],
                                            "methods": {"fedamp": {"sigma": [1e-5]}}}}
    return raw


CFG = parse(_tiny())
PID = CFG.experiments["tiny"].partitions[0].id
PIDS = ", ".join(sorted(p.id for p in CFG.experiments["tiny"].partitions))


def _problems(*targets: str, outputs: tuple[str, ...] = ()) -> list[str]:
    return target_problems(list(targets), CFG, "my.yaml", DATASETS, lambda: outputs)


@pytest.mark.parametrize(("target", "says"), [
    ("results/runs/nosuch/x/fedavg/split0-seed0.parquet",
     "my.yaml has no experiment 'nosuch'; its experiments: tiny, tuned"),
    ("results/runs/tiny/nosuch/fedavg/split0-seed0.parquet",
     f"experiment 'tiny' has no partition 'nosuch'; its partitions: {PIDS}"),
    (f"results/runs/tiny/{PID}/fedavgg/split0-seed0.parquet",
     "experiment 'tiny' has no method 'fedavgg'; did you mean 'fedavg'?"),
    ("results/aggregate/tiny/nosuch.parquet", "experiment 'tiny' has no method 'nosuch'"),
    ("results/aggregate/tiyn.parquet", "no experiment 'tiyn'; did you mean 'tiny'?"),
    ("results/partitions/digits/nosuch/split0.parquet",
     f"no experiment of my.yaml uses partition 'nosuch' of digits; its partitions of "
     f"digits: {PIDS}"),
    ("results/partitions/digitz/x/split0.parquet",
     "no experiment of my.yaml uses data set 'digitz'; did you mean 'digits'?"),
    (f"figures/partitions/digits/{PID[:-1]}x-split0.png",
     f"uses partition '{PID[:-1]}x' of digits; did you mean {PID!r}?"),
    ("figures/partitions/digit/x-split0.png",
     "uses data set 'digit'; did you mean 'digits'?; its data sets: digits"),
    ("results/data/nosuch/meta.json", "pflrepro has no data set 'nosuch'"),
    ("results/tuning/tiny/fedavg.md",
     "experiment 'tiny' of my.yaml tunes nothing (no `tune:` block); experiments that "
     "tune: tuned"),
    ("results/tuning/tuned/fedavg.md", "experiment 'tuned' has no tuned method 'fedavg'"),
    ("results/tables/nosuch.md", "my.yaml has no table 'nosuch'; its tables: tiny"),
    ("figures/nosuch-accuracy.png", "my.yaml has no experiment 'nosuch'"),
    ("figures/tiny-weights-nosuch.png", "experiment 'tiny' has no method 'nosuch'"),
    ("figures/tiny-weights-fedavg.png", "method 'fedavg' records no 'weight'"),
    ("figures/tiny-client9-accuracy.png", "experiment 'tiny' has 4 clients (0..3), not "
                                          "client 9"),
    ("figures/tiny-nosuch.png", "experiment 'tiny' has no figure 'nosuch'; its figures: "
                                "accuracy"),
])
def test_a_wrong_name_is_one_line_starting_with_the_target(target: str, says: str) -> None:
    outputs = ("results/tables/tiny.md", "figures/tiny-accuracy.png")
    (line,) = _problems(target, outputs=outputs)
    assert line.startswith(f"{target}: ") and says in line, line
    assert "\n" not in line


def test_names_that_exist_and_unknown_shapes_are_left_to_snakemake() -> None:
    asked: list[int] = []

    def outputs() -> tuple[str, ...]:
        asked.append(1)
        return ("results/tables/tiny.md",)

    ok = [f"results/runs/tiny/{PID}/fedavg/split0-seed0.parquet",
          "results/aggregate/tiny/local.parquet", "results/aggregate/tiny.parquet",
          f"results/partitions/digits/{PID}/split0.parquet", "results/data/digits/meta.json",
          "results/tuning/tuned/fedamp.md", "results/tables/tiny.md",
          "figures/tiny-client2-accuracy.png", f"figures/partitions/digits/{PID}-split1.pdf",
          "logs/anything.log", "somewhere/else.txt"]
    assert target_problems(ok, CFG, "my.yaml", DATASETS, outputs) == []
    # an experiment's tables are its own by name, also when rule `all` leaves them out
    assert target_problems(["results/tables/tuned.md", "results/tables/tuned-cost.csv"], CFG,
                           "my.yaml", DATASETS, tuple) == []
    # the config's outputs are computed once, and only for a table or figure path
    assert asked == [1]
    assert target_problems(ok[:6], CFG, "my.yaml", DATASETS, outputs) == []
    assert asked == [1]


def test_a_long_list_of_names_says_how_many() -> None:
    raw = _tiny()
    raw["experiments"] = {f"e{i:02d}": raw["experiments"]["tiny"] for i in range(LISTED + 3)}
    cfg = parse(raw)
    (line,) = target_problems(["results/aggregate/x.parquet"], cfg, "c.yaml", DATASETS,
                              tuple)
    assert f"… ({LISTED + 3} in all)" in line and "e11" in line and "e12" not in line


def _rules(raw: dict, tmp_path: Path) -> Rules:
    workflow = SimpleNamespace(basedir=str(REPO), rules=[])
    return Rules(parse(raw), raw, workflow=workflow, checkpoints=None,
                 claims=load_claims(REPO / W.CLAIMS_FILE),
                 paper_cells=load_paper_numbers(REPO / W.PAPER_NUMBERS_FILE),
                 config_files=(), python=Path("/py"), source=Path("/src"))


@pytest.mark.parametrize("name", ["config.yaml", "config.yaml@cpu", "config/demo.yaml"])
def test_no_output_of_a_shipped_config_is_refused(name: str, tmp_path: Path) -> None:
    file, _, scale = name.partition("@")
    raw = yaml.safe_load((REPO / file).read_text())
    if scale:
        raw["scale"] = scale
    rules = _rules(raw, tmp_path)
    outputs = rules.all_targets()
    assert len(outputs) > 50
    assert target_problems(outputs, rules.cfg, file, DATASETS, lambda: outputs) == []
