"""Names from the config become paths, wildcards and shell words: refused before any job.

Issue 27 (items 1, 2 and the names of 9): a method named ``x$(touch /tmp/PWNED)``, or
``../../tmp/ESCAPED``, ``a/../b``, ``x/../federico``, a 300-character name or ``fed
avg`` passed the config check; each is now refused by the schema (what
``pflrepro check-config`` and the Snakefile run first) and by :func:`parse` alike, with
a message naming the key. And every path the workflow forms from the shipped configs
stays inside the working directory.
"""

from __future__ import annotations

import copy
import os
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

import pflrepro.pipeline.workflow as W
from pflrepro.algorithms.registry import INFOS
from pflrepro.config import (
    METHOD_NAME_PATTERN,
    NAME_MAX_LENGTH,
    NAME_PATTERN,
    ConfigError,
    check,
    check_config_paths,
    check_schema,
    parse,
)
from pflrepro.config.schema import build_schema
from pflrepro.data.datasets import DATASETS
from pflrepro.data.partition import PARTITIONERS
from pflrepro.reporting.claims.parse import load_claims
from pflrepro.reporting.paper import load_paper_numbers

REPO = Path(__file__).resolve().parents[2]
TINY = yaml.safe_load((REPO / "tests/workflow/config.yaml").read_text())
SCHEMA_FILE = REPO / "workflow/schemas/config.schema.yaml"

#: The fault campaign's method names, and the edges of the method-name rule.
BAD_METHODS = [
    "x$(touch /tmp/PWNED)",
    "../../../../../../../tmp/ESCAPED",
    "a/../b",
    "x/../federico",
    "m" * 300,
    "m" * (NAME_MAX_LENGTH + 1),
    "fed avg",
    "-x", ".x", "x.", "a..b", "x;id", "x`id`", "x'y", "",
]
GOOD_METHODS = ["federico_eps0.1", "federico_beta0.1", "a.b.c", "m" * NAME_MAX_LENGTH, "F1"]


def _rename_method(new: str) -> dict[str, Any]:
    raw = copy.deepcopy(TINY)
    raw["methods"][new] = raw["methods"].pop("fedavg")
    methods = raw["experiments"]["tiny"]["methods"]
    methods[methods.index("fedavg")] = new
    return raw


def _rename_experiment(new: str) -> dict[str, Any]:
    raw = copy.deepcopy(TINY)
    raw["experiments"][new] = raw["experiments"].pop("tiny")
    return raw


def _with_table(name: str) -> dict[str, Any]:
    raw = copy.deepcopy(TINY)
    raw["tables"] = {name: {"experiments": ["tiny"]}}
    return raw


def _with_mirror(mirror: str) -> dict[str, Any]:
    raw = copy.deepcopy(TINY)
    raw["data"] = {"mirrors": {"digits": [mirror]}}
    return raw


def _refused(raw: dict[str, Any], section: str, value: str) -> None:
    """Both the schema (committed file and generated) and parse refuse, naming the key."""
    for run in (lambda r: check(r, SCHEMA_FILE), lambda r: check_schema(r, build_schema()),
                parse):
        with pytest.raises(ConfigError) as info:
            run(copy.deepcopy(raw))
        text = str(info.value)
        assert text.startswith(f"{section}: "), text
        assert repr(value)[:40] in text and "is not allowed" in text, text


@pytest.mark.parametrize("name", BAD_METHODS)
def test_a_method_name_that_is_no_safe_path_part_is_refused(name: str) -> None:
    _refused(_rename_method(name), "methods", name)


@pytest.mark.parametrize("name", GOOD_METHODS)
def test_method_names_with_single_dots_are_accepted(name: str) -> None:
    cfg = check(_rename_method(name), SCHEMA_FILE)
    assert name in cfg.methods


@pytest.mark.parametrize("name", ["e" * 300, "e" * (NAME_MAX_LENGTH + 1), "a/b", "a.b",
                                  "$(id)", "fed avg", "_x"])
def test_a_bad_experiment_name_is_refused(name: str) -> None:
    _refused(_rename_experiment(name), "experiments", name)


@pytest.mark.parametrize("name", ["t" * 300, "t/../x", "t b"])
def test_a_bad_table_name_is_refused(name: str) -> None:
    _refused(_with_table(name), "tables", name)


@pytest.mark.parametrize("mirror", ["/data/$(touch /tmp/PWNED)", "relative/dir", "../up",
                                    "/a;b", "/a`id`", "http://x/?q=1&r=2", "/a\nb", ""])
def test_a_mirror_is_an_absolute_path_or_url_without_shell_characters(mirror: str) -> None:
    _refused(_with_mirror(mirror), "data.mirrors.digits[0]", mirror)


@pytest.mark.parametrize("mirror", ["/usr/share/datasets/fashion-mnist", "/a b/c",
                                    "https://example.org/mnist/", "file:///srv/m", "~/m"])
def test_absolute_mirrors_and_urls_are_accepted(mirror: str) -> None:
    assert check(_with_mirror(mirror), SCHEMA_FILE).mirrors["digits"] == (mirror,)


def test_the_check_config_command_refuses_before_anything_runs(tmp_path: Path) -> None:
    # what `pflrepro check-config` runs: the file read strictly, the schema, parse
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(_rename_method("x$(touch /tmp/PWNED)")))
    with pytest.raises(ConfigError, match=rf"^{path}:\d+: methods: key "
                                          r"'x\$\(touch /tmp/PWNED\)'"):
        check_config_paths([path], SCHEMA_FILE)


def test_registered_names_are_safe_path_parts() -> None:
    # data set, scheme and algorithm names become wildcards and directory names too
    for name in [*DATASETS, *PARTITIONERS, *INFOS]:
        assert len(name) <= NAME_MAX_LENGTH
        assert __import__("re").fullmatch(NAME_PATTERN, name), name


def _shipped_configs() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for rel in ("config.yaml", "config/demo.yaml", "tests/workflow/config.yaml"):
        raw = yaml.safe_load((REPO / rel).read_text())
        scales = ("paper", "cpu") if rel == "config.yaml" else (raw.get("scale", "paper"),)
        out += [(f"{rel}@{s}", {**raw, "scale": s}) for s in scales]
    return out


def _all_paths(raw: dict[str, Any]) -> list[str]:
    cfg = check(raw, SCHEMA_FILE)
    claims = load_claims(REPO / W.CLAIMS_FILE)
    cells = load_paper_numbers(REPO / W.PAPER_NUMBERS_FILE)
    paths = W.all_targets(cfg, claims) + W.report_targets(cfg, claims, cells)
    for name in cfg.experiments:
        # every run with its log and benchmark record (the cost job's arguments)
        paths += W.cost_inputs(cfg, name) + shlex.split(W.cost_args(cfg, name))[:-2]
        paths += [W.PARTIAL_REPORT.format(experiment=name, ext=e) for e in ("md", "csv")]
    return [p for p in paths if not p.startswith("--")]


@pytest.mark.parametrize("name,raw", _shipped_configs(), ids=lambda v: v if isinstance(v, str)
                         else "")
def test_every_path_of_the_shipped_configs_stays_in_the_working_directory(
        name: str, raw: dict[str, Any], tmp_path: Path) -> None:
    paths = _all_paths(raw)
    assert len(paths) > 20, name
    root = tmp_path.resolve()
    for p in paths:
        assert not os.path.isabs(p) and os.path.normpath(p) == p, p
        assert ".." not in Path(p).parts and (root / p).resolve().is_relative_to(root), p
        assert all(len(part.encode()) <= 255 for part in Path(p).parts), p
        assert shlex.quote(p) == p, p  # nothing a shell would read


def test_method_pattern_keeps_the_shipped_method_names() -> None:
    # config.yaml's methods include dotted names (federico_eps0.1, federico_beta0.1)
    names = yaml.safe_load((REPO / "config.yaml").read_text())["methods"]
    dotted = [n for n in names if "." in n]
    assert dotted and all(__import__("re").fullmatch(METHOD_NAME_PATTERN, n) for n in names)
